"""The metrics collectors on a real worker: the ``cluster`` message names them, ``metric`` messages come back.

GPU collectors run against a fake ``nvidia-smi`` (``packages/core/test/fixtures/bin``) that answers
only the real query form and records its arguments.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import Client, WorkerProcess  # noqa: E402

from skyward.metrics import read_cpu_times, read_memory, read_network  # noqa: E402

FAKE_BIN = Path(__file__).resolve().parents[2] / "test" / "fixtures" / "bin"


def collector(kind: str, interval: float = 0.2, **extra: Any) -> Dict[str, Any]:
    return {"kind": "metric", "collector": kind, "name": extra.pop("name", kind), "interval": interval, **extra}


def metrics_for(client: Client, seconds: float) -> List[Dict[str, Any]]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        client._receive_once(0.1)
    return [message for message in client.inbox if message["t"] == "metric"]


@pytest.fixture()
def gpu_worker(tmp_path: Path) -> Iterator[tuple[WorkerProcess, Path]]:
    record = tmp_path / "calls.jsonl"
    env = {"PATH": f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}", "FAKE_NVIDIA_RECORD": str(record)}
    with WorkerProcess("--executor", "thread", env=env) as worker:
        yield worker, record


def test_proc_readings_are_sane() -> None:
    busy, total = read_cpu_times()
    assert 0 <= busy <= total
    used, memory_total = read_memory()
    assert 0 < used < memory_total
    received, sent = read_network()
    assert received >= 0 and sent >= 0


def test_every_collector_streams_samples(gpu_worker: tuple[WorkerProcess, Path], tmp_path: Path) -> None:
    worker, record = gpu_worker
    client = Client(worker.port)
    assert client.hello()["t"] == "welcome"
    value_file = tmp_path / "queue-depth"
    value_file.write_text("17.5\n")
    client.cluster(metrics=[
        collector("cpu"), collector("memory"), collector("memory_used"), collector("memory_total", 0.5),
        collector("disk", path=str(tmp_path)), collector("network_rx"), collector("network_tx"),
        collector("gpu"), collector("gpu_memory"), collector("gpu_memory_total", 0.5), collector("gpu_temp", 0.5),
        collector("custom", 0.3, name="queue_depth", command=f"cat {value_file}"),
    ])
    samples = metrics_for(client, 2.0)
    client.close()
    by_name: Dict[str, List[Dict[str, Any]]] = {}
    for sample in samples:
        by_name.setdefault(sample["name"], []).append(sample)
        assert sample["node"] == 0 and isinstance(sample["ts"], float)
    assert set(by_name) == {
        "cpu", "memory", "memory_used", "memory_total", "disk", "network_rx", "network_tx",
        "gpu", "gpu_memory", "gpu_memory_total", "gpu_temp", "queue_depth",
    }
    for name in ("cpu", "memory", "disk"):
        assert all(0 <= sample["value"] <= 100 and sample["unit"] == "%" for sample in by_name[name]), name
    # several samples at 0.2 s in 2 s (cpu's first one needs two readings)
    assert len(by_name["cpu"]) >= 4
    total = by_name["memory_total"][0]["value"]
    assert by_name["memory_total"][0]["unit"] == "B"
    assert all(0 < sample["value"] < total for sample in by_name["memory_used"])
    assert all(sample["value"] >= 0 and sample["unit"] == "B/s" for sample in by_name["network_rx"])
    assert {sample["value"] for sample in by_name["queue_depth"]} == {17.5}
    assert by_name["queue_depth"][0]["unit"] is None and "gpu" not in by_name["queue_depth"][0]
    # GPU metrics: one sample per GPU index, with the fake's values, memory in bytes
    gpu = {(sample["gpu"], sample["value"]) for sample in by_name["gpu"]}
    assert gpu == {(0, 37.0), (1, 88.0)}
    assert {(s["gpu"], s["value"]) for s in by_name["gpu_memory"]} == {(0, 1024 * 2**20), (1, 40960 * 2**20)}
    assert {(s["gpu"], s["value"]) for s in by_name["gpu_temp"]} == {(0, 45.0), (1, 61.0)}
    assert by_name["gpu_temp"][0]["unit"] == "°C" and by_name["gpu_memory_total"][0]["unit"] == "B"
    # one long-running nvidia-smi per interval, each asking for the fields of its collectors
    calls = sorted(json.loads(line) for line in record.read_text().splitlines())
    assert calls == sorted([
        ["--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits", "--loop-ms=200"],
        ["--query-gpu=index,memory.total,temperature.gpu", "--format=csv,noheader,nounits", "--loop-ms=500"],
    ])


def test_no_metrics_without_collectors(gpu_worker: tuple[WorkerProcess, Path]) -> None:
    worker, record = gpu_worker
    client = Client(worker.port)
    client.hello()
    client.cluster(metrics=None)
    assert metrics_for(client, 1.0) == []
    client.close()
    assert not record.exists()


def test_gpu_collectors_report_nothing_without_nvidia_smi(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    with WorkerProcess("--executor", "thread", env={"PATH": str(empty)}) as worker:
        client = Client(worker.port)
        client.hello()
        client.cluster(metrics=[collector("gpu"), collector("memory")])
        names = {sample["name"] for sample in metrics_for(client, 1.0)}
        client.close()
    assert names == {"memory"}


def test_a_failing_collector_is_reported_once_and_the_others_go_on(tmp_path: Path) -> None:
    with WorkerProcess("--executor", "thread") as worker:
        client = Client(worker.port)
        client.hello()
        client.cluster(metrics=[
            collector("disk", path=str(tmp_path / "missing")),
            collector("custom", 0.2, name="broken", command="echo not-a-number"),
            collector("memory"),
        ])
        names = {sample["name"] for sample in metrics_for(client, 1.5)}
        client.close()
        worker.stop()
        log = "".join(worker.stderr_lines)
    assert names == {"memory"}
    assert log.count("metric disk") == 1 and "missing" in log
    assert log.count("custom metric 'broken'") == 1 and "'not-a-number', not a number" in log


def test_a_new_cluster_message_replaces_the_collectors(gpu_worker: tuple[WorkerProcess, Path]) -> None:
    worker, _record = gpu_worker
    client = Client(worker.port)
    client.hello()
    client.cluster(metrics=[collector("memory")])
    assert {sample["name"] for sample in metrics_for(client, 0.8)} == {"memory"}
    client.inbox.clear()
    client.cluster(metrics=[collector("memory_total")])
    time.sleep(0.3)
    client.inbox.clear()
    assert {sample["name"] for sample in metrics_for(client, 0.8)} == {"memory_total"}
    client.close()


def _children(pid: int) -> List[int]:
    """``pid``'s child processes, its keeper (keeper.py, one per worker) apart."""
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        children = [int(child) for child in handle.read().split()]
    return [child for child in children if not _is_keeper(child)]


def _is_keeper(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return any(part.endswith(b"/skyward/keeper.py") for part in handle.read().split(b"\0"))
    except FileNotFoundError:
        return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how", ["shutdown", "SIGKILL"])
def test_no_nvidia_smi_outlives_its_worker(gpu_worker: tuple[WorkerProcess, Path], how: str) -> None:
    worker, _record = gpu_worker
    client = Client(worker.port)
    client.hello()
    client.cluster(metrics=[collector("gpu", 0.1)])
    assert any(sample["name"] == "gpu" for sample in metrics_for(client, 1.0))
    loops = _children(worker.process.pid)
    assert len(loops) == 1
    if how == "shutdown":
        client.send({"t": "shutdown"})
        worker.wait(10)
    else:
        worker.process.kill()  # the loop dies at its next write, into a pipe nobody reads
        worker.wait(10)
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in loops) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in loops)
    client.close()


def test_a_collector_below_the_minimum_interval_is_not_run() -> None:
    # The client refuses such an interval; a worker told one anyway does not sample in a busy loop.
    with WorkerProcess("--executor", "thread") as worker:
        client = Client(worker.port)
        client.hello()
        client.cluster(metrics=[
            collector("cpu", 0.001),
            collector("custom", 0.0001, name="busy", command="echo 1"),
            collector("memory", 0.1),
        ])
        names = {sample["name"] for sample in metrics_for(client, 1.0)}
        client.close()
    assert names == {"memory"}
