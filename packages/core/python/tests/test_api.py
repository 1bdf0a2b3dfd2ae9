"""The in-task API (`import skyward as sky`) used directly, in this process."""

from __future__ import annotations

import collections.abc
import io
import sys
import time
from pathlib import Path
from typing import Any, Iterator, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from prerequisites import require_module  # noqa: E402
import skyward as sky  # noqa: E402
from skyward.context import TaskContext, current_task, set_cluster  # noqa: E402
from skyward.info import instance_info_from_cluster  # noqa: E402
from skyward.output import OutputChannel, OutputRouter, TaskStream  # noqa: E402


@pytest.fixture()
def cluster() -> Iterator[Any]:
    def install(**fields: Any) -> sky.InstanceInfo:
        message = {"node": 0, "total_nodes": 1, "workers_per_node": 1, "head_addr": "10.0.0.1", "head_port": 29500,
                   "job_id": "j", "peers": [], "accelerators": 0}
        message.update(fields)
        info = instance_info_from_cluster(message)
        set_cluster(info)
        return info

    yield install
    set_cluster(None)


# -- instance_info -----------------------------------------------------------------------------------


def test_instance_info_outside_a_worker_raises() -> None:
    with pytest.raises(RuntimeError, match="only available inside a task"):
        sky.instance_info()
    with pytest.raises(RuntimeError):
        sky.is_head()


def test_instance_info_computed_fields(cluster: Any) -> None:
    cluster(node=2, total_nodes=4, workers_per_node=2, accelerators=8,
            peers=[{"node": i, "private_ip": f"10.0.0.{i}", "public_ip": None} for i in range(4)],
            accelerator={"type": "H100", "count": 8, "memory_gb": 80, "is_trainium": False},
            network={"interface": "eth0", "bandwidth_gbps": 100})
    info = sky.instance_info()
    assert (info.node, info.worker, info.total_nodes, info.workers_per_node) == (2, 0, 4, 2)
    assert info.global_worker_index == 4 and info.total_workers == 8
    assert info.is_head is False and sky.is_head() is False and sky.is_head(info) is False
    assert info.total_accelerators == 32
    assert info.peers[3] == sky.PeerInfo(node=3, private_ip="10.0.0.3", public_ip=None)
    assert info.accelerator == sky.AcceleratorInfo(type="H100", count=8, memory_gb=80, is_trainium=False)
    assert info.network == sky.NetworkInfo(interface="eth0", bandwidth_gbps=100)
    assert isinstance(info.hostname, str) and info.hostname
    dumped = info.model_dump()
    assert dumped["global_worker_index"] == 4 and dumped["peers"][0]["private_ip"] == "10.0.0.0"


def test_worker_index_follows_the_task_slot(cluster: Any) -> None:
    cluster(node=1, total_nodes=2, workers_per_node=2)
    router = OutputRouter(lambda *args: None)
    token = current_task.set(router.new_context("t", 3))
    try:
        info = sky.instance_info()
        assert info.worker == 1 and info.global_worker_index == 3
    finally:
        current_task.reset(token)
    head = instance_info_from_cluster({"node": 0, "total_nodes": 2})
    assert head.is_head and sky.is_head(head)


# -- shard ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 7, 10, 64, 101])
@pytest.mark.parametrize("total", [1, 2, 3, 8])
@pytest.mark.parametrize("shuffle", [False, True])
def test_shards_are_disjoint_and_complete(length: int, total: int, shuffle: bool) -> None:
    data = list(range(length))
    parts = [sky.shard(data, shuffle=shuffle, seed=7, node=n, total_nodes=total) for n in range(total)]
    flat = [x for part in parts for x in part]
    assert sorted(flat) == data
    assert len(set(flat)) == len(flat)
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("length,total", [(10, 3), (7, 7), (5, 8), (100, 6)])
def test_drop_last_gives_equal_counts(length: int, total: int) -> None:
    parts = [sky.shard(list(range(length)), drop_last=True, node=n, total_nodes=total) for n in range(total)]
    assert {len(part) for part in parts} == {length // total}
    flat = [x for part in parts for x in part]
    assert len(set(flat)) == len(flat)


def test_shuffle_is_seeded_and_the_same_on_every_node() -> None:
    data = list(range(50))
    a = sky.shard(data, shuffle=True, seed=1, node=0, total_nodes=2)
    assert a == sky.shard(data, shuffle=True, seed=1, node=0, total_nodes=2)
    assert a != sky.shard(data, shuffle=True, seed=2, node=0, total_nodes=2)
    assert a != data[:25]


def test_shard_stripes_as_the_python_project() -> None:
    # indices[node::total_nodes] by default; contiguous blocks only with drop_last.
    assert sky.shard(list(range(10)), node=1, total_nodes=3) == [1, 4, 7]
    assert sky.shard(list(range(10)), node=0, total_nodes=3) == [0, 3, 6, 9]
    assert sky.shard(list(range(10)), node=1, total_nodes=3, drop_last=True) == [3, 4, 5]
    order = list(range(10))
    import random

    random.Random(4).shuffle(order)
    assert sky.shard(list(range(10)), shuffle=True, seed=4, node=2, total_nodes=3) == order[2::3]


def test_shard_of_unequal_lengths_splits_each_on_its_own() -> None:
    a, b = sky.shard(list(range(6)), list(range(3)), node=1, total_nodes=2)
    assert a == [1, 3, 5] and b == [1]


def test_types_are_preserved() -> None:
    assert sky.shard([1, 2, 3, 4], node=1, total_nodes=2) == [2, 4]
    assert sky.shard((1, 2, 3, 4), node=0, total_nodes=2) == (1, 3)
    assert sky.shard("abcdef", node=2, total_nodes=3) == ["c", "f"]  # a string gives characters
    assert sky.shard(range(10), node=1, total_nodes=2) == range(1, 10, 2)
    assert sky.shard(b"abcd", node=1, total_nodes=2) == b"bd"
    shuffled_tuple = sky.shard((1, 2, 3, 4), shuffle=True, node=0, total_nodes=2)
    assert isinstance(shuffled_tuple, tuple) and len(shuffled_tuple) == 2
    shuffled_text = sky.shard("abcdef", shuffle=True, node=0, total_nodes=2)
    assert isinstance(shuffled_text, list) and len(shuffled_text) == 3


class Rows(collections.abc.Sequence):  # type: ignore[type-arg]
    """A Sequence that only supports integer indexing."""

    def __init__(self, rows: List[int]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            raise TypeError("no slices")
        return self.rows[index]


def test_any_sequence_via_indexing() -> None:
    part = sky.shard(Rows([10, 20, 30, 40]), node=1, total_nodes=2)
    assert list(part) == [20, 40]


def test_several_arrays_are_aligned() -> None:
    xs = list(range(20))
    ys = [x * 10 for x in xs]
    for node in range(3):
        x_part, y_part = sky.shard(xs, ys, shuffle=True, seed=3, node=node, total_nodes=3)
        assert [x * 10 for x in x_part] == y_part


def test_numpy_arrays() -> None:
    np = require_module("numpy", "numpy for the array tests (scripts/toolchain.sh installs it)")
    x = np.arange(20).reshape(10, 2)
    y = np.arange(10)
    parts = [sky.shard(x, y, shuffle=True, seed=5, node=n, total_nodes=3) for n in range(3)]
    for x_part, y_part in parts:
        assert isinstance(x_part, np.ndarray) and isinstance(y_part, np.ndarray)
        assert (x_part[:, 0] // 2 == y_part).all()
    assert sorted(np.concatenate([p[1] for p in parts]).tolist()) == list(range(10))
    plain = sky.shard(y, node=0, total_nodes=2)
    assert isinstance(plain, np.ndarray) and plain.tolist() == [0, 2, 4, 6, 8]


def test_shard_uses_the_worker_place_by_default(cluster: Any) -> None:
    cluster(node=1, total_nodes=2)
    assert sky.shard(list(range(4))) == [1, 3]
    assert sky.shard(list(range(4)), node=0) == [0, 2]


def test_shard_argument_errors() -> None:
    with pytest.raises(TypeError):
        sky.shard(node=0, total_nodes=1)
    with pytest.raises(ValueError):
        sky.shard([1], node=2, total_nodes=2)
    with pytest.raises(TypeError, match="no length"):
        sky.shard(iter([1, 2]), node=0, total_nodes=1)
    with pytest.raises(RuntimeError):
        sky.shard([1, 2])  # no worker and no override


# -- function and time ---------------------------------------------------------------------------------


def test_function_decorator_forms() -> None:
    @sky.function
    def double(x: int) -> int:
        return x * 2

    @sky.function(timeout=600)
    def triple(x: int) -> int:
        return x * 3

    def gen(n: int) -> Iterator[int]:
        yield from range(n)

    assert double(2) == 4 and triple(2) == 6
    assert triple.__skyward_timeout__ == 600  # type: ignore[attr-defined]
    assert list(sky.function(gen)(3)) == [0, 1, 2]
    import inspect

    # The worker runs the function behind it (a generator function stays one).
    assert inspect.isgeneratorfunction(sky.function(gen).fn)
    with pytest.raises(ValueError, match="timeout"):
        sky.function(timeout=-1)(gen)


def test_time_helpers_return_seconds() -> None:
    assert sky.time.seconds(5) == 5.0
    assert sky.time.minutes(10) == 600.0
    assert sky.time.hours(2) == 7200.0
    assert sky.time.days(1) == 86400.0
    assert isinstance(sky.time.minutes(1), float)


# -- output --------------------------------------------------------------------------------------------


def test_redirect_output_outside_a_worker() -> None:
    lines: List[str] = []
    with sky.redirect_output(lines.append) as (out, err):
        print("one")
        print("two", file=sys.stderr)
        sys.stdout.write("partial")
        assert isinstance(out, sky.CallbackWriter) and isinstance(err, sky.CallbackWriter)
    # Each raw write, as the Python project: print("x") writes "x" then "\n".
    assert lines == ["one", "\n", "two", "\n", "partial"]
    assert out.getvalue() == "one\npartial" and err.getvalue() == "two\n"


def test_silent_outside_a_worker(capsys: pytest.CaptureFixture[str]) -> None:
    @sky.silent
    def noisy() -> int:
        print("hidden")
        return 1

    assert noisy() == 1
    assert capsys.readouterr().out == ""


def test_filters_outside_a_worker_keep_output(capsys: pytest.CaptureFixture[str]) -> None:
    @sky.stdout(only="head")
    def talk() -> None:
        print("kept")

    talk()
    assert capsys.readouterr().out == "kept\n"


def test_output_channel_sends_lines_at_once_and_partials_within_the_interval() -> None:
    sent: List[tuple[Any, str, str]] = []
    channel = OutputChannel("task", "stdout", lambda key, stream, data: sent.append((key, stream, data)))
    channel.write("a")
    channel.write("b\nc")
    assert sent == [("task", "stdout", "ab\n")]
    time.sleep(0.2)
    assert sent[-1] == ("task", "stdout", "c")
    channel.write("tail")
    channel.flush()
    assert sent[-1] == ("task", "stdout", "tail")


def test_task_stream_routes_by_context_and_filters() -> None:
    sent: List[tuple[Any, str, str]] = []
    router = OutputRouter(lambda key, stream, data: sent.append((key, stream, data)))
    stream = TaskStream(0, router, io.StringIO())
    context = router.new_context("task-1", 0)
    token = current_task.set(context)
    try:
        stream.write("inside\n")
        context.muted[0] += 1
        stream.write("dropped\n")
        context.muted[0] -= 1
        stream.buffer.write("bytes\n".encode())
    finally:
        current_task.reset(token)
    stream.write("outside\n")
    assert sent == [("task-1", "stdout", "inside\n"), ("task-1", "stdout", "bytes\n"), (None, "stdout", "outside\n")]
    assert isinstance(TaskContext, type)


# -- InstanceInfo as the Python project's pydantic model ----------------------------------------------


def test_instance_info_reads_both_ways(cluster: Any) -> None:
    import json
    import pickle

    from skyward.protocol import decode_frame, encode_frame

    cluster(node=1, total_nodes=2, peers=[{"node": i, "private_ip": f"10.0.0.{i}", "public_ip": None} for i in range(2)],
            accelerator={"type": "H100", "count": 8, "memory_gb": 80, "is_trainium": False},
            network={"interface": "eth0", "bandwidth_gbps": 100})
    info = sky.InstanceInfo.current()
    assert info == sky.instance_info()
    assert info.peers[0]["private_ip"] == "10.0.0.0" and info.peers[0].private_ip == "10.0.0.0"
    assert info.peers[1].get("public_ip", "x") is None and "node" in info.peers[1]
    assert info.accelerator["type"] == "H100" and info.network["interface"] == "eth0"
    assert dict(info.peers[1]) == {"node": 1, "private_ip": "10.0.0.1", "public_ip": None}
    assert info["node"] == 1
    with pytest.raises(KeyError):
        info.peers[0]["nope"]
    dumped = json.loads(info.model_dump_json())
    assert dumped["node"] == 1 and dumped["peers"][1]["private_ip"] == "10.0.0.1" and dumped["is_head"] is False
    assert pickle.loads(pickle.dumps(info)) == info
    # Returnable as a value: it crosses the wire as its dump.
    [message] = decode_frame(encode_frame([{"t": "result", "id": "t", "value": info}]))
    assert message["value"]["peers"][0] == {"node": 0, "private_ip": "10.0.0.0", "public_ip": None}
    assert message["value"]["total_workers"] == 2


def test_instance_info_current_outside_a_task() -> None:
    with pytest.raises(RuntimeError):
        sky.InstanceInfo.current()
