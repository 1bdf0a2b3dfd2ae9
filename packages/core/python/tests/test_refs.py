"""Remote references on a real worker: results kept on the node (``keep``), ``$r`` arguments
replaced by the kept object, objects carried in from another node, ``unref`` and ``release``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from worker_client import PYTHON_ROOT, TASKS_DIR, Client, WorkerProcess, connect  # noqa: E402

from skyward.protocol import pack_frame  # noqa: E402


@pytest.fixture(scope="module", params=["thread", "process"])
def worker(request: pytest.FixtureRequest) -> Iterator[WorkerProcess]:
    with WorkerProcess("--executor", request.param, "--concurrency", "2") as process:
        process.executor = request.param  # type: ignore[attr-defined]
        yield process


@pytest.fixture()
def client(worker: WorkerProcess) -> Iterator[Client]:
    connected = connect(worker)
    yield connected
    connected.close()


def submit_wire(client: Client, task_id: str, fn: str, args: list, **fields: Any) -> Dict[str, Any]:
    """Submits with arguments already in wire form (``$r`` tags are not escaped as ``$d``)."""
    client.send_raw(pack_frame([{"t": "submit", "id": task_id, "fn": fn, "args": args, "kwargs": {},
                                 "timeout": None, "stream": False, "worker": None, **fields}]))
    return client.terminal(task_id)


def ref(ref_id: str, **fields: Any) -> Dict[str, Any]:
    """A reference argument as a client sends it (its description; the worker goes by the id)."""
    return {"$r": {"id": ref_id, "node": 0, "type": "ref_tasks.Counter", "size": 1, **fields}}


def keep(client: Client, fn: str, *args: Any) -> Dict[str, Any]:
    task_id = f"keep-{time.monotonic_ns()}"
    message = submit_wire(client, task_id, fn, list(args), keep=True)
    assert message["t"] == "result", message
    return message["value"].info


def held(client: Client) -> Dict[str, Any]:
    return client.value("skyward.refs:held")


def test_a_kept_result_stays_on_the_node_and_is_described(client: Client) -> None:
    before = held(client)["count"]
    ref = keep(client, "ref_tasks:make_counter", 100_000)
    described = ref
    assert described["node"] == 0 and described["type"] == "ref_tasks.Counter"
    assert described["id"].startswith("r0-")
    # Its size is its pickle's: what moving it to another node carries.
    assert 100_000 < described["size"] < 100_400
    now = held(client)
    assert now["count"] == before + 1 and described["id"] in now["ids"]
    assert now["bytes"] >= described["size"]


def test_a_ref_argument_is_the_kept_object(client: Client, worker: WorkerProcess) -> None:
    ref_id = keep(client, "ref_tasks:make_counter", 10)["id"]
    first = submit_wire(client, "use-1", "ref_tasks:bump", [ref(ref_id)], refs=True)
    second = submit_wire(client, "use-2", "ref_tasks:bump", [ref(ref_id)], refs=True)
    assert first["t"] == "result" and second["t"] == "result", (first, second)
    assert first["value"]["payload"] == 10
    if worker.executor == "thread":  # type: ignore[attr-defined]
        # The very object: its state carries over from task to task.
        assert second["value"]["hits"] == 2 and second["value"]["object"] == first["value"]["object"]
    else:
        # A child process gets a copy each time; the kept object is unchanged.
        assert first["value"]["hits"] == second["value"]["hits"] == 1


def test_a_ref_in_nested_arguments_and_kwargs(client: Client) -> None:
    ref_id = keep(client, "ref_tasks:make_counter")["id"]
    client.send_raw(pack_frame([{"t": "submit", "id": "nested-ref", "fn": "demo_tasks:echo",
                                 "args": [[ref(ref_id)]], "kwargs": {"k": ref(ref_id)},
                                 "timeout": None, "stream": False, "worker": None, "refs": True}]))
    message = client.terminal("nested-ref")
    assert message["t"] == "result", message
    # echo returns them, pickled back as objects ($o) of the kept type.
    for echoed in (message["value"]["args"][0][0], message["value"]["kwargs"]["k"]):
        assert type(echoed).__name__ == "Pickled" and echoed.type_name == "ref_tasks.Counter"


def test_an_unknown_ref_fails_naming_it(client: Client) -> None:
    message = submit_wire(client, "unknown-ref", "ref_tasks:bump", [ref("r0-nothere")], refs=True)
    assert message["t"] == "error" and message["kind"] == "serialization"
    assert message["type"] == "RemoteRefError"
    assert "r0-nothere" in message["message"] and "not held on node 0" in message["message"]


def test_a_carried_object_is_kept_for_later_uses(client: Client, worker: WorkerProcess) -> None:
    # What the client sends to a node that does not hold the ref yet: the object's pickle along,
    # as the holder gave it (skyward.refs:pickled).
    source = keep(client, "ref_tasks:make_counter", 50)["id"]
    moved = submit_wire(client, "pickle-source", "skyward.refs:pickled", [ref(source)], refs=True)
    data = moved["value"].data
    assert len(data) > 50
    carried = ref("r1-carried", value={"$o": {"type": "ref_tasks.Counter", "data": data}})
    first = submit_wire(client, "carry-1", "ref_tasks:bump", [carried], refs=True)
    assert first["t"] == "result" and first["value"]["payload"] == 50, first
    status = held(client)
    assert "r1-carried" in status["ids"]
    second = submit_wire(client, "carry-2", "ref_tasks:bump", [ref("r1-carried")], refs=True)
    assert second["t"] == "result", second
    if worker.executor == "thread":  # type: ignore[attr-defined]
        assert second["value"]["hits"] == 2  # unpickled once, then the live object


def test_pickled_and_value_builtins(client: Client) -> None:
    ref_id = keep(client, "ref_tasks:make_counter", 7)["id"]
    moved = submit_wire(client, "pickled-1", "skyward.refs:pickled", [ref(ref_id)], refs=True)
    assert moved["t"] == "result", moved
    assert type(moved["value"]).__name__ == "Pickled" and moved["value"].type_name == "ref_tasks.Counter"
    plain = keep(client, "demo_tasks:add", 2, 3)["id"]
    assert submit_wire(client, "value-1", "skyward.refs:value", [ref(plain)], refs=True)["value"] == 5


def test_unref_frees_and_a_later_use_fails(client: Client) -> None:
    ref_id = keep(client, "ref_tasks:make_counter", 1000)["id"]
    assert ref_id in held(client)["ids"]
    client.send({"t": "unref", "ids": [ref_id, 42]})
    assert ref_id not in held(client)["ids"]
    message = submit_wire(client, "after-unref", "ref_tasks:bump", [ref(ref_id)], refs=True)
    assert message["t"] == "error" and message["type"] == "RemoteRefError" and ref_id in message["message"]


def test_an_unpicklable_result_cannot_be_kept(client: Client) -> None:
    message = submit_wire(client, "keep-lock", "ref_tasks:unpicklable", [], keep=True)
    assert message["t"] == "error" and message["kind"] == "serialization"
    assert "cannot keep a value of type _thread.lock" in message["message"]


def test_a_stream_is_never_kept(client: Client) -> None:
    client.send_raw(pack_frame([{"t": "submit", "id": "keep-stream", "fn": "demo_tasks:count", "args": [2],
                                 "kwargs": {}, "timeout": None, "stream": True, "worker": None, "keep": True}]))
    assert client.terminal("keep-stream")["t"] == "end"


def test_release_frees_every_ref_and_release_with_keep_does_not(tmp_path: Path) -> None:
    # A detached worker writes its log into its working directory: a temporary one here.
    env = {"PYTHONPATH": f"{PYTHON_ROOT}{os.pathsep}{TASKS_DIR}"}
    with WorkerProcess("--executor", "thread", "--ttl", "60", cwd=tmp_path, env=env) as process:
        client = connect(process)
        try:
            keep(client, "ref_tasks:make_counter")
            client.send({"t": "release", "ttl": 60, "keep": True})
            assert held(client)["count"] == 1  # a detached client comes back for them
            client.send({"t": "release", "ttl": 60})
            assert held(client)["count"] == 0
        finally:
            client.close()


def test_an_object_brought_along_by_a_stranger_is_never_kept(client: Client, worker: WorkerProcess) -> None:
    # Pickles reach a worker only from the pool's own client: before (or without) the handshake with
    # its token, a submit bringing an object is refused and nothing is kept or unpickled.
    stranger = Client(worker.port)
    assert stranger.hello(token="not-the-token")["t"] == "reject"
    stranger.close()
    stranger = Client(worker.port)
    payload = ref("r9-stranger", value={"$o": {"type": "os.system", "data": b"\x80\x05N."}})
    stranger.send_raw(pack_frame([{"t": "submit", "id": "s-1", "fn": "ref_tasks:bump", "args": [payload],
                                   "kwargs": {}, "timeout": None, "stream": False, "worker": None,
                                   "refs": True}]))
    assert "hello" in stranger.wait_for(lambda m: m["t"] == "reject")["reason"]
    stranger.wait_closed()
    assert "r9-stranger" not in held(client)["ids"]
