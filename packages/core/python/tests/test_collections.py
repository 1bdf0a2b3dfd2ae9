"""Distributed collections on a real worker, the wire side: the test client plays the authority's
part and answers each ``subtask`` for ``skyward.collections:op`` (docs/protocol.md, "Distributed
collections"), so these tests see exactly the operations the task's proxies send and how the
proxies read the answers. The semantics themselves (the TypeScript authority) are tested end to end
in packages/core/test/collections.test.ts."""

from __future__ import annotations

import os
import subprocess
import time
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import PYTHON_ROOT, Client, WorkerProcess, connect  # noqa: E402

REF = "skyward.collections:op"


class Authority:
    """Answers each collection operation with ``answer(args)``: a value, or an exception for a suberror."""

    def __init__(self, client: Client, answer: Callable[[List[Any]], Any]) -> None:
        self.client = client
        self.answer = answer
        self.ops: List[List[Any]] = []
        client.on_message = self._on_message

    def _on_message(self, message: Dict[str, Any]) -> None:
        if message["t"] != "subtask" or message["fn"] != REF:
            return
        self.ops.append(message["args"])
        try:
            value = self.answer(message["args"])
        except Exception as error:  # noqa: BLE001 - a refusal, sent as the task's exception type
            self.client.send({"t": "suberror", "id": message["id"], "sub": message["sub"], "kind": "exception",
                              "type": type(error).__name__, "message": str(error), "traceback": "", "node": -1})
            return
        self.client.send({"t": "subresult", "id": message["id"], "sub": message["sub"], "value": value})


@pytest.fixture(scope="module", params=["thread", "process"])
def worker(request: pytest.FixtureRequest) -> Iterator[WorkerProcess]:
    with WorkerProcess("--executor", request.param, "--concurrency", "2") as running:
        yield running


def run(client: Client, fn: str, *args: Any) -> Any:
    task_id = f"t-{fn}"
    client.submit(task_id, fn, *args)
    message = client.terminal(task_id, timeout=20)
    assert message["t"] == "result", message
    return message["value"]


def test_counter_operations_on_the_wire(worker: WorkerProcess) -> None:
    client = connect(worker)
    state = {"value": 0}

    def answer(args: List[Any]) -> Any:
        kind, name, op, *rest = args
        assert (kind, name) == ("counter", "hits")
        if op == "increment":
            state["value"] += rest[0]
        elif op == "decrement":
            state["value"] -= rest[0]
        elif op == "reset":
            state["value"] = rest[0]
        return state["value"]

    authority = Authority(client, answer)
    assert run(client, "collection_wire_tasks:counter_ops") == [3, 2, 7, 7, 7]
    assert authority.ops == [
        ["counter", "hits", "increment", 3], ["counter", "hits", "decrement", 1], ["counter", "hits", "reset", 7],
        ["counter", "hits", "value"], ["counter", "hits", "value"],
    ]
    client.close()


def test_none_is_a_value_and_found_flags_tell_missing_keys(worker: WorkerProcess) -> None:
    client = connect(worker)
    store: Dict[str, Any] = {}

    def answer(args: List[Any]) -> Any:
        _, _, op, *rest = args
        if op == "set":
            store[rest[0]] = rest[1]
            return None
        if op == "get":
            return [True, store[rest[0]]] if rest[0] in store else [False, None]
        if op == "has":
            return rest[0] in store
        raise AssertionError(op)

    Authority(client, answer)
    assert run(client, "collection_wire_tasks:dict_ops") == {"get": None, "missing": "default", "in": True}
    client.close()


def test_a_refusal_raises_the_named_exception(worker: WorkerProcess) -> None:
    client = connect(worker)

    def answer(args: List[Any]) -> Any:
        raise ValueError("barrier 'b' is waiting for 3 callers; this caller asked for 2")

    Authority(client, answer)
    assert run(client, "collection_wire_tasks:refused") == (
        "ValueError: barrier 'b' is waiting for 3 callers; this caller asked for 2"
    )
    client.close()


def test_a_lock_not_acquired_in_time(worker: WorkerProcess) -> None:
    client = connect(worker)
    authority = Authority(client, lambda args: False)  # the lock is always taken
    got, text = run(client, "collection_wire_tasks:lock_timeout")
    assert got is False
    assert "not acquired within 0.5 s" in text
    assert authority.ops == [["lock", "l", "acquire", 0.5], ["lock", "l", "acquire", 0.5]]
    client.close()


def test_eventual_reads_answer_from_the_replica(worker: WorkerProcess) -> None:
    client = connect(worker)
    authority = Authority(client, lambda args: [True, "v"])
    assert run(client, "collection_wire_tasks:eventual_reads", 50) == ["v"] * 50
    # One fetch; with a 600 s bound the replica answered the other 49 reads.
    assert authority.ops == [["dict", "ev", "get", "k"]]
    client.close()


def test_outside_a_task_collections_refuse() -> None:
    script = (
        "import skyward as sky\n"
        "try:\n    sky.counter('c').increment()\nexcept RuntimeError as error:\n    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(PYTHON_ROOT)},
                          capture_output=True, text=True, timeout=20)
    assert done.stdout.strip() == (
        "sky.counter() is only available inside a task running on a Skyward worker (no active pool)"
    ), done.stderr


def test_a_blocked_queue_get_sends_one_request_and_waits_for_the_answer(worker: WorkerProcess) -> None:
    """No polling: the task's get is one message; the task waits until the authority answers it."""
    client = connect(worker)
    held: List[Dict[str, Any]] = []
    client.on_message = lambda message: held.append(message) if message["t"] == "subtask" else None
    client.submit("t-blocking", "collection_wire_tasks:blocking_get")
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # a second in which a polling get would ask again and again
        client._receive_once(0.05)
    assert [message["args"] for message in held] == [["queue", "q", "get", None]]
    assert not any(message.get("id") == "t-blocking" and message["t"] in ("result", "error") for message in client.inbox)
    client.send({"t": "subresult", "id": "t-blocking", "sub": held[0]["sub"], "value": [True, None]})
    message = client.terminal("t-blocking", timeout=20)
    assert (message["t"], message["value"]) == ("result", None)
    client.close()


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_detached_workers_collection_operations_wait_for_the_next_client(
    executor: str, tmp_path: Path
) -> None:
    # docs/sessions.md, "Collections across detach": from a `release` with `keep` until the next
    # client's hello, a task's collection operations wait on its worker — the wait that was open when
    # the client left, and a call made while nobody is attached — and go to the next client in order.
    # (its own lines go to skyward-worker-0.log in its work directory once detached)
    with WorkerProcess("--executor", executor, "--concurrency", "3", "--workdir", str(tmp_path)) as worker:
        first = connect(worker)
        seen_first: List[List[Any]] = []
        first.on_message = lambda m: seen_first.append(m["args"]) if m["t"] == "subtask" else None
        first.submit("getter", "collection_wire_tasks:blocking_get")
        first.submit("late", "collection_wire_tasks:late_increment", 1.5)
        first.submit("eventual", "collection_wire_tasks:late_eventual_write", 1.5)
        first.wait_for(lambda m: m["t"] == "subtask", timeout=20)  # the get: never answered by this client
        first.send({"t": "release", "ttl": 60, "keep": True}, {"t": "ping", "ts": 1.0})
        first.wait_for(lambda m: m["t"] == "pong")
        first.close()
        time.sleep(3.0)  # `late` and `eventual` call the counters while nobody is attached
        assert seen_first == [["queue", "q", "get", None]]

        second = Client(worker.port)
        authority = Authority(second, lambda args: [True, "item"] if args[2] == "get" else 41)
        welcome = second.hello()
        assert sorted(welcome["running"]) == ["getter", "late"]
        # `eventual` did not wait for its write, and ended while nobody was attached.
        assert welcome["results"] == ["eventual"]
        assert second.terminal("getter", timeout=20)["value"] == "item"
        assert second.terminal("late", timeout=20)["value"] == 41
        # Each asked once of this client: the get again (its answer never came), the increment once,
        # and the ended task's eventual write.
        assert sorted(authority.ops) == [
            ["counter", "c", "increment", 1], ["counter", "ev", "increment", 5], ["queue", "q", "get", None],
        ]
        second.close()


def test_without_a_detach_a_lost_connection_still_fails_the_open_operation() -> None:
    with WorkerProcess("--concurrency", "1") as worker:
        first = connect(worker)
        first.submit("getter", "collection_wire_tasks:blocking_get")
        first.wait_for(lambda m: m["t"] == "subtask", timeout=20)
        first.close()  # no `release` with `keep`: the client was lost, not detached
        # The next client adopts the task (the loss was seen) or collects its outcome (it ended first);
        # a hello that comes before the worker has seen the loss finds neither: try again.
        deadline = time.monotonic() + 20
        while True:
            second = Client(worker.port)
            welcome = second.hello()
            if "getter" in welcome["results"]:
                second.send({"t": "collect", "ids": ["getter"]})
            if "getter" in welcome["results"] or "getter" in welcome["running"]:
                break
            second.close()
            assert time.monotonic() < deadline, welcome
            time.sleep(0.05)
        message = second.terminal("getter", timeout=20)
        assert message["t"] == "error" and "connection to the client was lost" in message["message"], message
        second.close()


def test_a_detached_worker_keeps_a_bounded_number_of_calls(tmp_path: Path) -> None:
    # Past SKYWARD_DETACHED_CALLS_MAX waiting calls, a new one fails at once, naming the collection.
    env = {"SKYWARD_DETACHED_CALLS_MAX": "1"}
    with WorkerProcess("--concurrency", "2", "--workdir", str(tmp_path), env=env) as worker:
        first = connect(worker)
        first.submit("getter", "collection_wire_tasks:blocking_get")
        first.submit("late", "collection_wire_tasks:late_increment", 1.0)
        first.wait_for(lambda m: m["t"] == "subtask", timeout=20)
        first.send({"t": "release", "ttl": 60, "keep": True}, {"t": "ping", "ts": 1.0})
        first.wait_for(lambda m: m["t"] == "pong")
        first.close()  # the get is kept for the next client: the one call allowed
        time.sleep(2.5)
        second = Client(worker.port)
        authority = Authority(second, lambda args: [True, "item"])
        welcome = second.hello()
        assert welcome["results"] == ["late"]
        second.send({"t": "collect", "ids": ["late"]})
        message = second.terminal("late", timeout=20)
        assert message["t"] == "error" and message["type"] == "RuntimeError", message
        assert "counter 'c': the pool is detached, and 1 collection calls already wait" in message["message"]
        assert second.terminal("getter", timeout=20)["value"] == "item"
        assert authority.ops == [["queue", "q", "get", None]]
        second.close()


def test_the_eventual_replica_makes_keys_python_holds_equal_one_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replica's slots compare keys as a Python dict does (and as the store's ``keyOf`` does)."""
    monkeypatch.syspath_prepend(str(PYTHON_ROOT))
    from skyward.collections import _canon

    assert _canon(True) == _canon(1) == _canon(1.0)
    assert _canon(False) == _canon(0) == _canon(-0.0)
    assert _canon(2**60) == _canon(2.0**60)
    assert _canon(10**300) != _canon(1e300)
    assert _canon((True, 2)) == _canon([1, 2.0])
    assert _canon(float("nan")) == _canon(float("nan"))
    assert len({_canon(key) for key in (1, "1", b"1", 0.5, None, float("inf"))}) == 6
