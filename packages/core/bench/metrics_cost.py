"""What sampling metrics costs a worker: its CPU time, with and without collectors (bench helper).

Usage: python metrics_cost.py COLLECTORS_JSON SECONDS [FAKE_BIN]

Starts three workers on loopback in turn, each connected and sent a ``cluster`` message: one without
collectors (the idle worker: pings and timers), one with the collectors given, and — when FAKE_BIN
(a directory holding a fake ``nvidia-smi``) is given — one with them and that ``nvidia-smi`` on PATH,
so the GPU collectors run too. Each is watched for SECONDS while its client reads the metric messages;
its CPU time (user + system, ``/proc/PID/stat``) over the wall time is reported, in percent of one
core. The nvidia-smi process's own CPU is not the worker's and is not counted (a fake's says nothing
about the real one's). Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "python" / "tests"
sys.path.insert(0, str(TESTS))

from worker_client import Client, WorkerProcess  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def measure(collectors: list, seconds: float, env: dict) -> dict:
    with WorkerProcess("--executor", "thread", env=env) as worker:
        client = Client(worker.port)
        client.hello()
        client.cluster(metrics=collectors)
        time.sleep(1.0)  # past start-up (imports, the first readings)
        client.inbox.clear()
        pid = worker.process.pid
        start_cpu, start = cpu_seconds(pid), time.monotonic()
        samples = 0
        pinged = start
        while time.monotonic() - start < seconds:
            client._receive_once(0.2)
            samples += sum(1 for message in client.inbox if message["t"] == "metric")
            client.inbox.clear()
            if time.monotonic() - pinged >= 5:  # as a real client does: a silent one is dropped after 30 s
                client.send({"t": "ping", "ts": time.time()})
                pinged = time.monotonic()
        used, wall = cpu_seconds(pid) - start_cpu, time.monotonic() - start
        client.close()
    return {"cpu_percent": 100.0 * used / wall, "cpu_seconds": used, "wall_seconds": wall, "samples": samples}


def main() -> None:
    collectors = json.loads(sys.argv[1])
    seconds = float(sys.argv[2])
    fake_bin = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
    plain_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not os.path.exists(os.path.join(p, "nvidia-smi")))
    result = {
        "idle": measure([], seconds, {"PATH": plain_path}),
        "collectors": measure(collectors, seconds, {"PATH": plain_path}),
    }
    if fake_bin:
        result["collectors_with_gpus"] = measure(
            collectors, seconds, {"PATH": f"{fake_bin}{os.pathsep}{plain_path}"}
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
