"""A real worker subprocess on loopback, driven by a small protocol client."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import PYTHON_ROOT, TASKS_DIR, Client, WorkerProcess, connect  # noqa: E402

from skyward.protocol import StreamRef, encode_frame  # noqa: E402


@pytest.fixture(scope="module")
def thread_worker() -> Iterator[WorkerProcess]:
    with WorkerProcess("--executor", "thread", "--concurrency", "4", "--buffer", "2") as worker:
        yield worker


@pytest.fixture(scope="module")
def process_worker() -> Iterator[WorkerProcess]:
    with WorkerProcess("--executor", "process", "--concurrency", "2") as worker:
        yield worker


@pytest.fixture()
def thread_client(thread_worker: WorkerProcess) -> Iterator[Client]:
    client = connect(thread_worker)
    yield client
    client.close()


@pytest.fixture()
def process_client(process_worker: WorkerProcess) -> Iterator[Client]:
    client = connect(process_worker)
    yield client
    client.close()


@pytest.fixture(params=["thread", "process"])
def any_client(request: pytest.FixtureRequest) -> Client:
    return request.getfixturevalue(f"{request.param}_client")


def outputs(client: Client, task_id: str) -> List[Dict[str, Any]]:
    return [m for m in client.by_id[task_id] if m["t"] == "out"]


# -- handshake -------------------------------------------------------------------------------------


def test_welcome_fields(thread_worker: WorkerProcess) -> None:
    client = Client(thread_worker.port)
    welcome = client.hello()
    assert welcome["t"] == "welcome"
    assert welcome["version"] == 1
    assert welcome["node"] == 0
    assert welcome["pid"] == thread_worker.ready["pid"] == thread_worker.process.pid
    assert welcome["hostname"]
    assert welcome["python"] == ".".join(map(str, sys.version_info[:3]))
    assert (welcome["executor"], welcome["concurrency"], welcome["buffer"]) == ("thread", 4, 2)
    assert isinstance(welcome["results"], list) and isinstance(welcome["running"], list)
    assert thread_worker.ready["node"] == 0
    client.close()


def test_bad_token_is_rejected(thread_worker: WorkerProcess) -> None:
    client = Client(thread_worker.port)
    reply = client.hello(token="wrong")
    assert reply == {"t": "reject", "reason": "bad token"}
    client.wait_closed()


def test_bad_version_is_rejected(thread_worker: WorkerProcess) -> None:
    client = Client(thread_worker.port)
    reply = client.hello(version=2)
    assert reply["t"] == "reject" and "version" in reply["reason"]
    client.wait_closed()


def test_messages_before_hello_are_rejected(thread_worker: WorkerProcess) -> None:
    client = Client(thread_worker.port)
    client.submit("early", "demo_tasks:noop")
    reply = client.wait_for(lambda m: m["t"] == "reject")
    assert "hello" in reply["reason"]
    client.wait_closed()


def test_malformed_frame_closes_the_connection(thread_worker: WorkerProcess) -> None:
    client = Client(thread_worker.port)
    client.hello()
    client.send_raw(b"\x00\x00\x00\x05\x00\x00\x00\x00{bad}")
    client.wait_closed()
    deadline = time.monotonic() + 5
    while not any("protocol error" in line for line in thread_worker.stderr_lines):
        assert time.monotonic() < deadline, thread_worker.stderr_lines
        time.sleep(0.02)


def test_garbage_before_the_handshake_closes_the_connection(thread_worker: WorkerProcess) -> None:
    client = Client(thread_worker.port)
    client.send_raw(os.urandom(256 * 1024))
    client.wait_closed(timeout=5)


def test_a_first_frame_over_the_pre_handshake_limit_closes_the_connection(thread_worker: WorkerProcess) -> None:
    client = Client(thread_worker.port)
    # A well-formed hello, but padded past the 16 KiB a stranger may send before the handshake.
    client.send({"t": "hello", "version": 1, "token": "x", "client": "padding", "pad": "x" * (32 * 1024)})
    client.wait_closed(timeout=5)
    assert not any(message.get("t") == "reject" for message in client.inbox)
    # After a good hello, large frames are fine.
    trusted = connect(thread_worker)
    assert trusted.value("demo_tasks:add", "y" * (256 * 1024), "z") == "y" * (256 * 1024) + "z"
    trusted.close()


def test_a_connection_silent_before_the_handshake_is_closed() -> None:
    with WorkerProcess("--executor", "thread", "--handshake-timeout", "0.5") as worker:
        idle = Client(worker.port)
        started = time.monotonic()
        idle.wait_closed(timeout=10)
        assert time.monotonic() - started >= 0.4
        # The worker's stderr is read by a thread: the line may land a moment after the close.
        logged = time.monotonic() + 5
        while time.monotonic() < logged and not any(
            "did not complete the handshake within 0.5 s" in line for line in worker.stderr_lines
        ):
            time.sleep(0.05)
        assert any("did not complete the handshake within 0.5 s" in line for line in worker.stderr_lines)
        # A client that says hello in time keeps its connection past the deadline.
        client = connect(worker)
        time.sleep(1.0)
        assert client.value("demo_tasks:add", 2, 3) == 5
        client.close()


def test_worker_refuses_to_start_without_a_token() -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "SKYWARD_TOKEN"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-m", "skyward.worker"], env=env, capture_output=True, timeout=20)
    assert done.returncode == 2 and b"SKYWARD_TOKEN" in done.stderr


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_workdir_is_first_on_sys_path(tmp_path: Path, executor: str) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "shipped_module.py").write_text("import os\ndef where():\n    return os.getcwd()\n")
    with WorkerProcess("--workdir", str(workdir), "--executor", executor, cwd=tmp_path) as worker:
        client = connect(worker)
        assert client.value("shipped_module:where") == str(workdir)


def test_tasks_wait_for_the_cluster_message() -> None:
    with WorkerProcess() as worker:
        client = Client(worker.port)
        assert client.hello()["ready"] is False
        client.submit("early", "demo_tasks:add", 1, 2)
        with pytest.raises(TimeoutError):
            client.terminal("early", timeout=0.3)
        client.cluster()
        assert client.terminal("early")["value"] == 3
        assert client.hello()["ready"] is True  # a second hello on the same connection is answered too


def test_cluster_env_and_instance_info(any_client: Client) -> None:
    any_client.cluster(node=0, total_nodes=2, env={"SKYWARD_TEST_VAR": "from-cluster"},
                       accelerator={"type": "A100", "count": 2, "memory_gb": 80}, accelerators=2)
    assert any_client.value("demo_tasks:env", "SKYWARD_TEST_VAR") == "from-cluster"
    assert any_client.value("demo_tasks:env", "SKYWARD_TOKEN") is None  # the secret is not passed on
    info = any_client.value("demo_tasks:info")
    assert info["node"] == 0 and info["total_nodes"] == 2 and info["total_workers"] == 2
    assert info["is_head"] is True and info["is_head_fn"] is True and info["global_worker_index"] == 0
    assert info["peers"] == [[0, "127.0.0.1", None], [1, "127.0.0.1", None]]
    assert info["accelerator"] == ["A100", 2]
    assert info["head_port"] == 29500 and info["job_id"] == "job-1"


def test_ping_pong(thread_client: Client) -> None:
    thread_client.send({"t": "ping", "ts": 12345})
    assert thread_client.wait_for(lambda m: m["t"] == "pong")["ts"] == 12345


def test_unknown_messages_are_ignored(thread_client: Client) -> None:
    thread_client.send({"t": "something_new", "id": "x"})
    assert thread_client.value("demo_tasks:add", 1, 1) == 2


# -- results and errors ----------------------------------------------------------------------------


def test_results_of_all_value_types(any_client: Client) -> None:
    assert any_client.value("demo_tasks:add", 2, 3) == 5
    value = any_client.value("demo_tasks:types")
    assert value["tuple"] == [1, 2] and value["bytes"] == b"\x00\x01" and value["bytearray"] == b"ab"
    assert value["nan"] != value["nan"] and value["big"] == 2**70 and value["$escaped"] is True
    assert any_client.value("demo_tasks:echo", b"\xff", [1.5], k={"$d": 1}) == {
        "args": [b"\xff", [1.5]], "kwargs": {"k": {"$d": 1}}
    }
    assert any_client.value("demo_tasks:Holder.method", 7) == "method 7"
    assert any_client.value("demo_tasks:async_add", 2, 2) == 4
    assert any_client.value("demo_tasks:decorated", 4) == 8
    assert any_client.value("demo_tasks:decorated_with_timeout", 4) == 12
    assert any_client.value("demo_tasks:collected", 4) == [0, 1, 4, 9]  # generator without stream


def test_exception_errors(any_client: Client) -> None:
    error = any_client.call("demo_tasks:boom", "kaput")
    assert error["t"] == "error" and error["kind"] == "exception"
    assert error["type"] == "ValueError" and error["message"] == "kaput"
    assert error["traceback"].startswith("Traceback (most recent call last):")
    assert 'raise ValueError(message)' in error["traceback"]
    # The runtime's own frames are left out: no frame from a file of the skyward package (a test
    # checkout may itself sit in a folder named skyward, so the frames' folders are compared).
    frames = re.findall(r'File "([^"]+)"', error["traceback"])
    assert frames and not [path for path in frames if Path(path).parent.name == "skyward"], frames
    assert error["node"] == 0 and error["worker"] in range(4)
    custom = any_client.call("demo_tasks:custom_boom")
    assert custom["type"] == "demo_tasks.TaskFailure" and custom["message"] == "custom failure"


def test_not_found_errors(any_client: Client) -> None:
    missing_module = any_client.call("no_such_module_here:fn")
    assert missing_module["kind"] == "not_found" and "no_such_module_here" in missing_module["message"]
    missing_function = any_client.call("demo_tasks:no_such_function")
    assert missing_function["kind"] == "not_found" and "no_such_function" in missing_function["message"]
    missing_attribute = any_client.call("demo_tasks:Holder.nope")
    assert missing_attribute["kind"] == "not_found" and "nope" in missing_attribute["message"]
    malformed = any_client.call("demo_tasks.add")
    assert malformed["kind"] == "not_found" and "module:qualname" in malformed["message"]
    # A module that exists but fails to import is the module's exception, not "not found".
    broken = any_client.call("broken_import:fn")
    assert broken["kind"] == "exception" and broken["type"] == "ModuleNotFoundError"
    assert "module_that_does_not_exist_anywhere" in broken["message"]


def test_serialization_errors(any_client: Client) -> None:
    error = any_client.call("demo_tasks:unsendable")
    assert error["kind"] == "serialization"
    assert error["message"].startswith('result[2]["model"]: cannot send a value of type demo_tasks.Model: ')
    any_client.send({"t": "submit", "id": "bad-args", "fn": "demo_tasks:add", "args": {"a": 1}, "kwargs": {}})
    assert any_client.terminal("bad-args")["kind"] == "serialization"


def test_invalid_worker_pin_and_timeout(thread_client: Client) -> None:
    assert thread_client.call("demo_tasks:noop", worker=9)["kind"] == "exception"
    assert thread_client.call("demo_tasks:noop", timeout=-1)["kind"] == "exception"


def test_pinned_tasks_run_on_their_worker_slot(thread_client: Client) -> None:
    for slot in (2, 3):
        thread_client.submit(f"pin-{slot}", "demo_tasks:say", "pinned", worker=slot)
        assert thread_client.terminal(f"pin-{slot}")["value"] == "said"
        (out,) = outputs(thread_client, f"pin-{slot}")
        assert out["worker"] == slot


def test_timeout_thread(thread_client: Client) -> None:
    start = time.monotonic()
    error = thread_client.call("demo_tasks:slow_then_value", 1.5, "late", timeout=0.3)
    assert error["kind"] == "timeout" and time.monotonic() - start < 1.2
    assert thread_client.value("demo_tasks:add", 1, 1) == 2


def test_timeouts_share_one_clock_and_each_fires_on_time() -> None:
    # One timer at the earliest deadline: a shorter timeout submitted after a longer one still fires
    # first, tasks that finish in time are never timed out, and thousands of finished tasks' entries
    # (swept from the heap) do not delay or lose a later deadline.
    with WorkerProcess("--executor", "thread", "--concurrency", "4") as worker:
        client = connect(worker)
        start = time.monotonic()
        client.submit("long", "demo_tasks:slow_then_value", 3, "a", timeout=1.2)
        client.submit("short", "demo_tasks:slow_then_value", 3, "b", timeout=0.3)
        client.submit("in-time", "demo_tasks:sleep", 0.1, "c", timeout=0.6)
        short = client.terminal("short")
        short_at = time.monotonic() - start
        assert short["kind"] == "timeout" and short_at < 1.0
        assert client.terminal("in-time")["value"] == "c"
        long = client.terminal("long")
        long_at = time.monotonic() - start
        assert long["kind"] == "timeout" and 1.1 < long_at < 2.5, long_at
        from skyward.protocol import encode_frame

        # A long task keeps its deadline while the burst's entries are swept from the heap around it.
        watch_start = time.monotonic()
        client.submit("watch", "demo_tasks:slow_then_value", 5, "late", timeout=2.5)
        count = 3000
        client.send_raw(encode_frame([
            {"t": "submit", "id": f"q-{i}", "fn": "demo_tasks:add", "args": [i, 1], "kwargs": {},
             "timeout": 30 + i % 7, "stream": False, "worker": None}
            for i in range(count)
        ]))
        assert [client.terminal(f"q-{i}")["value"] for i in range(count)] == [i + 1 for i in range(count)]
        watch = client.terminal("watch")
        assert watch["kind"] == "timeout" and 2.4 < time.monotonic() - watch_start < 4.5
        start = time.monotonic()
        error = client.call("demo_tasks:slow_then_value", 3, "late", timeout=0.3)
        assert error["kind"] == "timeout" and time.monotonic() - start < 1.0
        client.close()


def test_timeout_process_kills_the_child(process_client: Client) -> None:
    pids_before = {process_client.value("demo_tasks:pid", worker=0)}
    error = process_client.call("demo_tasks:sleep", 5, timeout=0.3, worker=0)
    assert error["kind"] == "timeout"
    pid_after = process_client.value("demo_tasks:pid", worker=0)
    assert pid_after not in pids_before


def test_process_reuse_keeps_one_child_per_slot(process_client: Client) -> None:
    pids = {process_client.value("demo_tasks:pid", worker=1) for _ in range(4)}
    assert len(pids) == 1 and os.getpid() not in pids
    assert pids.isdisjoint({process_client.welcome["pid"]})  # type: ignore[attr-defined]


def test_process_without_reuse_uses_a_fresh_child_per_task() -> None:
    with WorkerProcess("--executor", "process", "--no-reuse-processes") as worker:
        client = connect(worker)
        pids = [client.value("demo_tasks:pid") for _ in range(3)]
        assert len(set(pids)) == 3 and worker.process.pid not in pids


def test_worker_died_and_recovery(process_client: Client) -> None:
    error = process_client.call("demo_tasks:die", 3, worker=0)
    assert error["kind"] == "worker_died" and "exited with code 3" in error["message"]
    assert process_client.value("demo_tasks:add", 2, 2, worker=0) == 4  # a new child took the slot
    assert process_client.value("demo_tasks:add", 3, 3) == 6


# -- cancellation ------------------------------------------------------------------------------------


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_withdraw_hands_back_only_tasks_that_have_not_started(executor: str) -> None:
    with WorkerProcess("--executor", executor, "--concurrency", "1", "--buffer", "2") as worker:
        client = connect(worker)
        client.submit("running", "demo_tasks:say_then_value", "started", 1.0, "kept")
        client.submit("queued-1", "demo_tasks:add", 1, 2)
        client.submit("queued-2", "demo_tasks:add", 3, 4)
        # "running" has started once its output comes (a child process may take a while to start).
        client.wait_for(lambda m: m.get("id") == "running" and m["t"] == "out", timeout=20)
        client.send({"t": "withdraw", "ids": ["running", "queued-1", "queued-2", "unknown"]})
        assert client.wait_for(lambda m: m["t"] == "withdrawn")["id"] == "queued-1"
        assert client.wait_for(lambda m: m["t"] == "withdrawn")["id"] == "queued-2"
        # The started task carries on; the withdrawn ones never run nor answer.
        assert client.terminal("running", timeout=10)["value"] == "kept"
        assert [m["t"] for m in client.by_id["queued-1"]] == ["withdrawn"]
        # A withdrawn id may be submitted again (elsewhere, or here).
        assert client.call("demo_tasks:add", 1, 2, task_id="queued-1")["value"] == 3


def test_cancel_queued_and_running_thread_task() -> None:
    with WorkerProcess("--concurrency", "1") as worker:
        client = connect(worker)
        client.submit("long", "demo_tasks:slow_then_value", 1.0, "long-value")
        client.submit("queued", "demo_tasks:add", 1, 2)
        client.send({"t": "cancel", "id": "queued"})
        assert client.terminal("queued")["kind"] == "cancelled"
        start = time.monotonic()
        client.send({"t": "cancel", "id": "long"})
        assert client.terminal("long")["kind"] == "cancelled"
        assert time.monotonic() - start < 0.5  # reported at once, not when the thread returns
        # The slot got a fresh thread: new work runs while the abandoned one still sleeps.
        assert client.value("demo_tasks:add", 5, 5) == 10
        time.sleep(1.2)
        client.send({"t": "ping", "ts": 1})
        client.wait_for(lambda m: m["t"] == "pong")
        late = [m for m in client.by_id["long"] if m["t"] in ("result", "out")]
        assert late == []  # the abandoned task's result and output are discarded
        assert client.value("demo_tasks:add", 1, 1) == 2


def test_cancel_running_process_task_kills_the_child(process_client: Client) -> None:
    pid_before = process_client.value("demo_tasks:pid", worker=1)
    process_client.submit("doomed", "demo_tasks:sleep", 10, worker=1)
    time.sleep(0.2)
    start = time.monotonic()
    process_client.send({"t": "cancel", "id": "doomed"})
    assert process_client.terminal("doomed")["kind"] == "cancelled"
    assert time.monotonic() - start < 0.5
    assert process_client.value("demo_tasks:pid", worker=1) != pid_before


# -- streaming -----------------------------------------------------------------------------------------


def test_generator_streaming(any_client: Client) -> None:
    any_client.submit("gen", "demo_tasks:count", 5, stream=True)
    assert any_client.terminal("gen") == {"t": "end", "id": "gen"}
    items = [m for m in any_client.by_id["gen"] if m["t"] == "item"]
    assert [(m["seq"], m["value"]) for m in items] == [(i, i) for i in range(5)]


def test_generator_error_mid_stream(any_client: Client) -> None:
    any_client.submit("gen-fail", "demo_tasks:count_then_fail", 3, stream=True)
    error = any_client.terminal("gen-fail")
    assert error["kind"] == "exception" and error["message"] == "failed mid-stream"
    assert [m["value"] for m in any_client.by_id["gen-fail"] if m["t"] == "item"] == [0, 1, 2]


def test_stream_items_arrive_before_the_generator_finishes(thread_client: Client) -> None:
    thread_client.submit("slow-gen", "demo_tasks:count_slowly", 3, 0.3, stream=True)
    first = thread_client.wait_for(lambda m: m.get("id") == "slow-gen")
    assert first["t"] == "item" and first["value"] == 0
    assert not any(m["t"] == "end" for m in thread_client.by_id["slow-gen"])
    thread_client.terminal("slow-gen")


def serve_input_stream(client: Client, task_id: str, source: Iterator[Any], fail_with: str | None = None,
                       timeout: float = 10.0) -> Dict[str, Any]:
    """Answer the task's pull requests from ``source``; returns the terminal message."""
    deadline = time.monotonic() + timeout
    pulls: List[int] = []
    sent = 0
    client.pulls = pulls  # type: ignore[attr-defined]
    while time.monotonic() < deadline:
        message = client.wait_for(lambda m: m.get("id") == task_id and m["t"] in ("pull", "result", "error"),
                                  timeout=deadline - time.monotonic())
        if message["t"] != "pull":
            client.sent_items = sent  # type: ignore[attr-defined]
            return message
        pulls.append(message["n"])
        batch = []
        for _ in range(message["n"]):
            try:
                batch.append({"t": "in", "id": task_id, "stream": message["stream"], "value": next(source)})
            except StopIteration:
                batch.append({"t": "in_error", "id": task_id, "stream": message["stream"], "message": fail_with}
                             if fail_with else {"t": "in_end", "id": task_id, "stream": message["stream"]})
                break
        sent += sum(1 for m in batch if m["t"] == "in")
        client.send(*batch)
    raise TimeoutError(task_id)


def test_input_stream_is_read_lazily_in_credit(any_client: Client) -> None:
    import itertools

    any_client.submit("lazy", "demo_tasks:take", StreamRef(0), 5)
    result = serve_input_stream(any_client, "lazy", itertools.count())
    assert result["value"] == [0, 1, 2, 3, 4]
    # One credit of 16 was enough: the worker never asked for the (endless) rest.
    assert any_client.pulls == [16]  # type: ignore[attr-defined]
    assert any_client.sent_items == 16  # type: ignore[attr-defined]


def test_input_stream_to_the_end(any_client: Client) -> None:
    any_client.submit("sum", "demo_tasks:total", items=StreamRef(0))
    result = serve_input_stream(any_client, "sum", iter(range(100)))
    assert result["value"] == sum(range(100))
    pulls = any_client.pulls  # type: ignore[attr-defined]
    assert pulls[0] == 16 and all(0 < n <= 16 for n in pulls) and len(pulls) > 5


def test_input_stream_error_raises_inside_the_task(any_client: Client) -> None:
    any_client.submit("broken-input", "demo_tasks:total", StreamRef(0))
    error = serve_input_stream(any_client, "broken-input", iter([1, 2]), fail_with="source exploded")
    assert error["kind"] == "exception" and error["type"] == "skyward.execution.InputStreamError"
    assert error["message"] == "source exploded"


# -- output --------------------------------------------------------------------------------------------


def test_stdout_and_stderr_are_captured_and_tagged(any_client: Client) -> None:
    result = any_client.call("demo_tasks:say", "hello out", task_id="say-out")
    assert result["value"] == "said"
    (out,) = outputs(any_client, "say-out")
    assert out == {"t": "out", "id": "say-out", "stream": "stdout", "node": 0, "worker": out["worker"],
                   "data": "hello out\n"}
    any_client.call("demo_tasks:say", "hello err", err=True, task_id="say-err")
    (err,) = outputs(any_client, "say-err")
    assert err["stream"] == "stderr" and err["data"] == "hello err\n"
    # output comes before the task's result
    ids = [m["t"] for m in any_client.by_id["say-err"]]
    assert ids == ["out", "result"]


def test_partial_lines_are_flushed_within_50ms(any_client: Client) -> None:
    any_client.submit("partial", "demo_tasks:say_partial", "no newline yet")
    out = any_client.wait_for(lambda m: m.get("id") == "partial", timeout=5)
    assert out["t"] == "out" and out["data"] == "no newline yet"  # before the task's 0.3 s sleep ends
    assert any_client.terminal("partial")["value"] == "done"


def test_output_outside_a_task_has_no_id(thread_client: Client) -> None:
    assert thread_client.value("demo_tasks:print_from_thread", "from a bare thread") == "printed"
    out = thread_client.wait_for(lambda m: m["t"] == "out" and m["id"] is None)
    assert out["data"] == "from a bare thread\n" and out["node"] == 0


def test_output_filters_on_the_head(any_client: Client) -> None:
    any_client.call("demo_tasks:head_says", "head text", task_id="head-0")
    assert [(m["stream"], m["data"]) for m in outputs(any_client, "head-0")] == [
        ("stdout", "head text\n"), ("stderr", "to stderr\n")]
    any_client.call("demo_tasks:quiet", "shh", task_id="quiet-0")
    assert outputs(any_client, "quiet-0") == []
    any_client.call("demo_tasks:node_one_says", "node one only", task_id="n1-0")
    assert outputs(any_client, "n1-0") == []
    assert any_client.value("demo_tasks:redirected", task_id="redir-0") == ["captured one", "\n", "captured two", "\n"]
    assert [m["data"] for m in outputs(any_client, "redir-0")] == ["visible\n"]


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_output_filters_on_node_one(executor: str) -> None:
    with WorkerProcess("--node", "1", "--executor", executor) as worker:
        client = connect(worker, node=1, total_nodes=2)
        client.call("demo_tasks:head_says", "not on node 1", task_id="h1")
        assert [(m["stream"], m["data"]) for m in outputs(client, "h1")] == [("stderr", "to stderr\n")]
        client.call("demo_tasks:node_one_says", "node one", task_id="n1")
        assert [(m["node"], m["data"]) for m in outputs(client, "n1")] == [(1, "node one\n")]
        client.submit("hc", "demo_tasks:head_count", 3, stream=True)
        client.terminal("hc")
        assert [m["value"] for m in client.by_id["hc"] if m["t"] == "item"] == [0, 1, 2]
        assert outputs(client, "hc") == []
        info = client.value("demo_tasks:info")
        assert info["node"] == 1 and info["is_head"] is False and info["global_worker_index"] == 1


# -- throughput ----------------------------------------------------------------------------------------


def test_pipelined_tasks_are_batched(thread_client: Client) -> None:
    from skyward.protocol import encode_frame

    count = 500
    before = thread_client.frames_received
    thread_client.send_raw(encode_frame([
        {"t": "submit", "id": f"p-{i}", "fn": "demo_tasks:add", "args": [i, 1], "kwargs": {},
         "timeout": None, "stream": False, "worker": None}
        for i in range(count)
    ]))
    values = [thread_client.terminal(f"p-{i}")["value"] for i in range(count)]
    assert values == [i + 1 for i in range(count)]
    assert thread_client.frames_received - before < count  # several results share a frame


# -- release, TTL, reconnecting, stopping ---------------------------------------------------------------


def test_release_then_ttl_runs_self_destruct(tmp_path: Path) -> None:
    marker = tmp_path / "destroyed"
    with WorkerProcess("--self-destruct", f"touch {marker}") as worker:
        client = connect(worker)
        client.send({"t": "release", "ttl": 0.5})
        client.close()
        assert worker.wait(timeout=10) == 0
        assert marker.exists()


def test_lost_connection_starts_the_ttl_and_hello_cancels_it(tmp_path: Path) -> None:
    marker = tmp_path / "destroyed"
    with WorkerProcess("--ttl", "0.8", "--self-destruct", f"touch {marker}") as worker:
        client = connect(worker)
        client.close()
        time.sleep(0.4)
        again = connect(worker)  # within the TTL: cancels it
        time.sleep(0.8)
        assert worker.process.poll() is None and not marker.exists()
        assert again.value("demo_tasks:add", 1, 1) == 2
        again.close()  # lost again: the clock restarts and runs out
        assert worker.wait(timeout=10) == 0
        assert marker.exists()


def test_ttl_zero_stops_as_soon_as_the_client_lets_go(tmp_path: Path) -> None:
    marker = tmp_path / "destroyed"
    with WorkerProcess("--ttl", "0", "--self-destruct", f"touch {marker}") as worker:
        time.sleep(0.5)  # before the first client, the clock gives it time to come
        assert worker.process.poll() is None
        client = connect(worker)
        assert client.value("demo_tasks:add", 2, 2) == 4
        client.send({"t": "release", "ttl": 0})
        client.close()
        assert worker.wait(timeout=5) == 0
        assert marker.exists()


def _released_with_owner(
    tmp_path: Path, owner: Optional[str], takeover_wait: str = "0.5", write_later: Optional[str] = None
) -> Tuple[bool, List[str]]:
    """A worker started with SKYWARD_ROOT_OWNER, released with a short TTL: did it self-destruct?
    ``write_later``: the owner record appears (naming that pid) a moment after the TTL ran out."""
    marker = tmp_path / "destroyed"
    owner_file = tmp_path / "worker.pid"
    env = {"SKYWARD_ROOT_OWNER": str(owner_file), "SKYWARD_ROOT_TAKEOVER_WAIT": takeover_wait}
    with WorkerProcess("--self-destruct", f"touch {marker}", env=env) as worker:
        if owner is not None:
            owner_file.write_text(str(worker.process.pid) if owner == "self" else owner)
        client = connect(worker)
        client.send({"t": "release", "ttl": 0.3})
        client.close()
        if write_later is not None:
            time.sleep(1.0)
            owner_file.write_text(write_later)
        assert worker.wait(timeout=20) == 0
        return marker.exists(), worker.stderr_lines


def _stand_in_worker() -> "subprocess.Popen[bytes]":
    """A live process whose command line names Skyward, as a newer worker's does."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "skyward_worker.py"])


def test_ttl_self_destruct_runs_when_the_root_owner_is_this_worker(tmp_path: Path) -> None:
    destroyed, _ = _released_with_owner(tmp_path, "self")
    assert destroyed


def test_ttl_self_destruct_runs_when_the_root_owner_is_dead(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    destroyed, _ = _released_with_owner(tmp_path, str(gone.pid))
    assert destroyed


def test_ttl_self_destruct_runs_when_the_owner_pid_is_another_program(tmp_path: Path) -> None:
    # The owner died and its pid was reused by something that is not a Skyward worker: nothing of
    # ours uses the root, so the machine must still end (never left billing).
    other = subprocess.Popen(["sleep", "60"])
    try:
        destroyed, _ = _released_with_owner(tmp_path, str(other.pid))
        assert destroyed
    finally:
        other.kill()
        other.wait()


def test_ttl_self_destruct_runs_when_the_owner_record_is_garbage(tmp_path: Path) -> None:
    destroyed, stderr = _released_with_owner(tmp_path, "not-a-pid")
    assert destroyed
    assert any("does not name a pid" in line for line in stderr)


def test_ttl_self_destruct_is_skipped_while_a_successor_owns_the_root(tmp_path: Path) -> None:
    # A newer worker was started in the same root: the old worker's TTL stops it, but the cleanup is
    # the successor's.
    successor = _stand_in_worker()
    try:
        destroyed, stderr = _released_with_owner(tmp_path, str(successor.pid))
        assert not destroyed
        assert any(f"self-destruct skipped: the root now belongs to the live worker pid {successor.pid}" in line for line in stderr)
        assert successor.poll() is None
    finally:
        successor.kill()
        successor.wait()


def test_ttl_self_destruct_waits_out_a_launcher_taking_the_root(tmp_path: Path) -> None:
    # The record is missing (a launch under way) and then names the new worker: skipped.
    successor = _stand_in_worker()
    try:
        destroyed, stderr = _released_with_owner(tmp_path, None, takeover_wait="10", write_later=str(successor.pid))
        assert not destroyed
        assert any("self-destruct skipped" in line for line in stderr)
    finally:
        successor.kill()
        successor.wait()


def test_ttl_self_destruct_runs_when_a_takeover_never_finishes(tmp_path: Path) -> None:
    # The record stays missing (the launch died half way): the machine must not be left billing.
    destroyed, stderr = _released_with_owner(tmp_path, None, takeover_wait="0.5")
    assert destroyed
    assert any("still missing" in line for line in stderr)


def test_the_root_owner_variable_is_not_passed_to_tasks(tmp_path: Path) -> None:
    with WorkerProcess(env={"SKYWARD_ROOT_OWNER": str(tmp_path / "worker.pid")}) as worker:
        client = connect(worker)
        assert client.value("os:getenv", "SKYWARD_ROOT_OWNER") is None
        client.close()


def test_exit_on_stdin_eof() -> None:
    with WorkerProcess("--exit-on-stdin-eof") as worker:
        client = connect(worker)
        assert client.value("demo_tasks:add", 1, 1) == 2
        assert worker.process.stdin is not None
        worker.process.stdin.close()
        assert worker.wait(timeout=10) == 0


def test_shutdown_cancels_everything_and_exits() -> None:
    with WorkerProcess() as worker:
        client = connect(worker)
        client.submit("running", "demo_tasks:sleep", 5)
        time.sleep(0.1)
        client.send({"t": "shutdown"})
        assert client.terminal("running")["kind"] == "cancelled"
        client.wait_closed()
        assert worker.wait(timeout=10) == 0


def test_detached_client_results_are_kept_until_collected_once(tmp_path: Path) -> None:
    # A `release` with `keep`: the client detaches. The worker outlives the process that started it
    # (its stdin closes), keeps the results for the next client, and hands each over once.
    env = {"PYTHONPATH": f"{PYTHON_ROOT}{os.pathsep}{TASKS_DIR}"}
    with WorkerProcess("--concurrency", "2", "--exit-on-stdin-eof", "--workdir", str(tmp_path), env=env) as worker:
        first = connect(worker)
        first.submit("fast", "demo_tasks:sleep", 0.2, "fast-value")
        first.submit("slow", "demo_tasks:sleep", 1.0, "slow-value")
        first.send({"t": "release", "ttl": 60, "keep": True}, {"t": "ping", "ts": 1.0})
        first.wait_for(lambda m: m["t"] == "pong")  # the release was applied before this answer
        first.close()
        assert worker.process.stdin is not None
        worker.process.stdin.close()  # the process that started the worker is gone
        time.sleep(1.5)
        assert worker.process.poll() is None, "a detached worker must not stop when its stdin closes"
        second = Client(worker.port)
        welcome = second.hello()
        assert sorted(welcome["results"]) == ["fast", "slow"]
        second.send({"t": "collect", "ids": ["fast", "slow"]})
        assert second.terminal("fast") == {"t": "result", "id": "fast", "value": "fast-value"}
        assert second.terminal("slow") == {"t": "result", "id": "slow", "value": "slow-value"}
        second.close()
        third = Client(worker.port)
        assert third.hello()["results"] == []  # collected: not handed over again
        third.send({"t": "shutdown"})
        third.wait_closed()
        assert worker.wait(timeout=10) == 0
    # The worker's own lines went to a file once its reader could be gone.
    assert "detached, results kept" in (tmp_path / "skyward-worker-0.log").read_text()


def test_detached_stream_items_are_kept_up_to_the_cap_and_handed_over_before_the_end(tmp_path: Path) -> None:
    # Items yielded with no client attached wait for `collect`, in order, up to keep_items_bytes;
    # those over the cap are counted on the task's terminal message.
    with WorkerProcess("--concurrency", "2", "--workdir", str(tmp_path)) as worker:
        first = connect(worker)
        first.submit("s", "demo_tasks:count_slowly", 8, 0.1, stream=True)
        first.wait_for(lambda m: m["t"] == "item" and m["id"] == "s" and m["seq"] == 0)
        # Room for three item frames (single digits: all the same size), not four.
        size = len(encode_frame([{"t": "item", "id": "s", "seq": 1, "value": 1}]))
        cap = 3 * size + size // 2
        first.send({"t": "release", "ttl": 60, "keep": True, "keep_items_bytes": cap}, {"t": "ping", "ts": 1.0})
        first.wait_for(lambda m: m["t"] == "pong")
        first.close()
        time.sleep(1.5)  # the stream ends while nobody is attached
        second = Client(worker.port)
        welcome = second.hello()
        assert welcome["results"] == ["s"]
        second.send({"t": "collect", "ids": ["s"]})
        end = second.terminal("s")
        kinds = [m["t"] for m in second.by_id["s"]]
        assert kinds[-1] == "end" and set(kinds[:-1]) == {"item"}  # the kept items come first
        items = [m for m in second.by_id["s"] if m["t"] == "item"]
        assert end["t"] == "end" and end["dropped"] > 0
        seqs = [m["seq"] for m in items]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and seqs[0] >= 1
        assert len(seqs) == 3
        assert len(seqs) + end["dropped"] == 8 - seqs[0]
        assert [m["value"] for m in items] == seqs
        second.send({"t": "shutdown"})
        second.wait_closed()
        assert worker.wait(timeout=10) == 0


def test_a_detached_worker_stops_at_the_budget_deadline_unless_a_pool_attaches(tmp_path: Path) -> None:
    marker = tmp_path / "destroyed"
    with WorkerProcess("--self-destruct", f"touch {marker}", "--workdir", str(tmp_path)) as worker:
        client = connect(worker)
        client.send({"t": "release", "ttl": 600, "keep": True, "deadline": 0.8}, {"t": "ping", "ts": 1.0})
        client.wait_for(lambda m: m["t"] == "pong")
        client.close()
        started = time.monotonic()
        assert worker.wait(timeout=10) == 0
        assert time.monotonic() - started >= 0.6
        assert marker.exists()
    marker.unlink()
    with WorkerProcess("--self-destruct", f"touch {marker}", "--workdir", str(tmp_path)) as worker:
        client = connect(worker)
        client.send({"t": "release", "ttl": 600, "keep": True, "deadline": 0.8}, {"t": "ping", "ts": 1.0})
        client.wait_for(lambda m: m["t"] == "pong")
        client.close()
        again = connect(worker)  # a pool attaches (its cluster message): its own budget watch takes over
        time.sleep(1.5)
        assert worker.process.poll() is None and not marker.exists()
        assert again.value("demo_tasks:add", 1, 2) == 3
        again.send({"t": "shutdown"})
        again.wait_closed()


def test_collect_after_reconnect() -> None:
    with WorkerProcess("--concurrency", "2") as worker:
        first = connect(worker)
        first.submit("kept", "demo_tasks:sleep", 0.3, "kept-value")
        first.submit("adopted", "demo_tasks:sleep", 1.0, "adopted-value")
        time.sleep(0.1)
        first.close()
        time.sleep(0.5)  # "kept" finishes while nobody is connected
        second = Client(worker.port)
        welcome = second.hello()
        assert "kept" in welcome["results"]
        assert welcome["running"] == ["adopted"]  # still running: its result comes to this connection
        second.send({"t": "collect", "ids": ["kept", "unknown-id"]})
        assert second.terminal("kept") == {"t": "result", "id": "kept", "value": "kept-value"}
        assert second.terminal("adopted")["value"] == "adopted-value"
