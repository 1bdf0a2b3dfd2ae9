"""Plugin worker modules on a real worker: hook order, environment, failures naming the plugin."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import PLUGIN_ENV, Client, WorkerProcess, connect  # noqa: E402

EXECUTORS = ["thread", "process"]


def plugin(name: str, module: str = "recording_plugin", **config: Any) -> Dict[str, Any]:
    return {"name": name, "module": module, "config": config}


def recording(log: Path, *labels: str, **extra: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Recording plugins named by ``labels``; ``extra[label]`` adds to that plugin's config."""
    return [plugin(label, log=str(log), label=label, **extra.get(label, {})) for label in labels]


def read_log(log: Path) -> List[List[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def stop(client: Client, worker: WorkerProcess) -> None:
    """Stop the worker the way a client does, so it exits its hooks."""
    client.send({"t": "shutdown"})
    assert worker.wait(timeout=20) == 0


def test_thread_executor_hook_order(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"
    with WorkerProcess("--executor", "thread", "--concurrency", "3", env=PLUGIN_ENV) as worker:
        client = connect(worker, plugins=recording(log, "first", "second"))
        for i in range(6):
            client.submit(f"t{i}", "plugin_tasks:record", str(log), 0.05, tag=f"task{i}")
        pids = {client.terminal(f"t{i}")["value"] for i in range(6)}
        assert pids == {worker.process.pid}
        stop(client, worker)
    lines = read_log(log)
    pid = str(worker.process.pid)
    assert all(line[0] == pid for line in lines)
    lifecycle = [line[1:4] for line in lines if line[2] == "around_app"]
    # once per worker, in plugin order, exited in reverse when the worker stops
    assert lifecycle == [
        ["first", "around_app", "enter"], ["second", "around_app", "enter"],
        ["second", "around_app", "exit"], ["first", "around_app", "exit"],
    ]
    assert ["first", "around_app", "enter", "node=0"] == lines[0][1:]
    # around_app before decorate; the chain is built once: the last plugin wraps the function first
    decorations = [index for index, line in enumerate(lines) if line[2] == "decorate"]
    assert [lines[index][1] for index in decorations] == ["second", "first"]
    assert decorations[0] > 1
    for i in range(6):
        calls = [line[1:] for line in lines if line[-1] == f"task{i}"]
        assert calls == [
            ["first", "call", "before", f"task{i}"], ["second", "call", "before", f"task{i}"],
            ["task", "task", f"task{i}"],
            ["second", "call", "after", f"task{i}"], ["first", "call", "after", f"task{i}"],
        ]


def test_process_executor_hook_order(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"
    with WorkerProcess("--executor", "process", "--concurrency", "2", env=PLUGIN_ENV) as worker:
        client = connect(worker, plugins=recording(log, "first", "second"))
        child_pids = [client.value("plugin_tasks:record", str(log), worker=slot % 2, tag=f"task{slot}")
                      for slot in range(4)]
        stop(client, worker)
    lines = read_log(log)
    worker_pid = str(worker.process.pid)
    children = {str(pid) for pid in child_pids}
    assert len(children) == 2 and worker_pid not in children
    # around_app: once, in the worker process, and exited in reverse at the end
    assert [line[:4] for line in lines if line[2] == "around_app"] == [
        [worker_pid, "first", "around_app", "enter"], [worker_pid, "second", "around_app", "enter"],
        [worker_pid, "second", "around_app", "exit"], [worker_pid, "first", "around_app", "exit"],
    ]
    # around_process: once per child, in order; exited in reverse when the child is told to exit
    for child in children:
        assert [line[1:4] for line in lines if line[0] == child and line[2] == "around_process"] == [
            ["first", "around_process", "enter"], ["second", "around_process", "enter"],
            ["second", "around_process", "exit"], ["first", "around_process", "exit"],
        ]
        first_process = next(i for i, line in enumerate(lines) if line[0] == child and line[2] == "around_process")
        first_call = next(i for i, line in enumerate(lines) if line[0] == child and line[2] == "call")
        assert first_process < first_call
    app_entered = max(i for i, line in enumerate(lines) if line[2:4] == ["around_app", "enter"])
    assert all(i > app_entered for i, line in enumerate(lines) if line[2] in ("around_process", "decorate"))
    for slot in range(4):
        calls = [line[1:] for line in lines if line[-1] == f"task{slot}"]
        assert calls == [
            ["first", "call", "before", f"task{slot}"], ["second", "call", "before", f"task{slot}"],
            ["task", "task", f"task{slot}"],
            ["second", "call", "after", f"task{slot}"], ["first", "call", "after", f"task{slot}"],
        ]


def test_process_executor_without_reuse_enters_around_process_in_each_child(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"
    with WorkerProcess("--executor", "process", "--no-reuse-processes", env=PLUGIN_ENV) as worker:
        client = connect(worker, plugins=recording(log, "only"))
        pids = [str(client.value("plugin_tasks:record", str(log), tag=f"task{i}")) for i in range(3)]
        stop(client, worker)
    lines = read_log(log)
    assert len(set(pids)) == 3
    assert [line[0] for line in lines if line[2:4] == ["around_app", "enter"]] == [str(worker.process.pid)]
    for pid in pids:
        assert [line[2:4] for line in lines if line[0] == pid and line[2] == "around_process"] == [
            ["around_process", "enter"], ["around_process", "exit"],
        ]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_environment_set_by_around_app_reaches_the_tasks(executor: str) -> None:
    with WorkerProcess("--executor", executor, "--concurrency", "2",
                       env={**PLUGIN_ENV, "SKYWARD_TEST_REMOVED": "yes"}) as worker:
        client = connect(worker, node=1, total_nodes=2, plugins=[plugin("env", "env_plugin", addr="10.1.2.3")])
        for slot in (0, 1):
            assert client.value("demo_tasks:env", "MASTER_ADDR", worker=slot) == "10.1.2.3"
            assert client.value("demo_tasks:env", "SKYWARD_TEST_APP_INFO", worker=slot) == "1/2"
            assert client.value("demo_tasks:env", "SKYWARD_TEST_REMOVED", worker=slot) is None
            # decorate ran after around_app (it saw MASTER_ADDR)
            assert client.value("demo_tasks:env", "SKYWARD_TEST_DECORATED_WITH", worker=slot) == "10.1.2.3"


@pytest.mark.parametrize("executor", EXECUTORS)
def test_around_app_failure_fails_every_task_naming_the_plugin(tmp_path: Path, executor: str) -> None:
    log = tmp_path / "hooks.log"
    plugins = recording(log, "good", "bad", bad={"fail": "around_app"})
    with WorkerProcess("--executor", executor, "--concurrency", "2", env=PLUGIN_ENV) as worker:
        client = connect(worker, plugins=plugins)
        errors = [client.call("demo_tasks:add", 1, 2) for _ in range(3)]
    for error in errors:
        assert error["t"] == "error" and error["kind"] == "exception" and error["type"] == "PluginError", error
        assert error["message"] == 'plugin "bad" around_app failed: RuntimeError: bad cannot start'
        assert "bad cannot start" in error["traceback"] and "recording_plugin.py" in error["traceback"]
    lines = read_log(log)
    # tried once; the plugin entered before it is exited again
    assert [line[1:4] for line in lines] == [
        ["good", "around_app", "enter"], ["bad", "around_app", "fail"], ["good", "around_app", "exit"],
    ]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_task_waiting_on_a_hung_around_app_ends_at_its_timeout(tmp_path: Path, executor: str) -> None:
    # The clock of a task counts from when it starts running; a task whose first run enters the
    # plugins' around_app has started (under the thread executor it runs the hook in its own thread).
    log = tmp_path / "hooks.log"
    with WorkerProcess("--executor", executor, env=PLUGIN_ENV) as worker:
        client = connect(worker, plugins=recording(log, "stuck", stuck={"fail": "hang"}))
        client.submit("t1", "demo_tasks:add", 1, 2, timeout=1)
        error = client.terminal("t1", timeout=20)
    assert error["t"] == "error" and error["kind"] == "timeout" and error["type"] == "TimeoutError", error
    assert [line[1:4] for line in read_log(log)] == [["stuck", "around_app", "hang"]]


def test_a_task_stopped_while_around_app_is_entered_does_not_fail_the_plugin_for_good(tmp_path: Path) -> None:
    # The first task enters the hooks in its own thread (thread executor) and times out meanwhile:
    # the task ends, but the hook is let finish (not cut off and kept as the plugin's failure), so
    # the tasks after it run.
    log = tmp_path / "hooks.log"
    with WorkerProcess("--executor", "thread", env=PLUGIN_ENV) as worker:
        client = connect(worker, plugins=recording(log, "slow", slow={"slow": 2}))
        client.submit("first", "demo_tasks:add", 1, 2, timeout=0.5)
        first = client.terminal("first", timeout=20)
        second = client.call("demo_tasks:add", 2, 3)
        stop(client, worker)
    assert (first["t"], first.get("kind")) == ("error", "timeout"), first
    assert (second["t"], second.get("value")) == ("result", 5), second
    assert [line[1:4] for line in read_log(log) if line[2] == "around_app"] == [
        ["slow", "around_app", "enter"], ["slow", "around_app", "exit"],
    ]


def test_around_app_that_returns_no_context_manager() -> None:
    with WorkerProcess(env=PLUGIN_ENV) as worker:
        client = connect(worker, plugins=[plugin("odd", log="/dev/null", label="odd", fail="bad_return")])
        error = client.call("demo_tasks:add", 1, 2)
    assert error["type"] == "PluginError"
    assert error["message"] == 'plugin "odd" around_app failed: TypeError: around_app returned int, not a context manager or None'


def test_around_process_failure_names_the_plugin(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"
    with WorkerProcess("--executor", "process", env=PLUGIN_ENV) as worker:
        client = connect(worker, plugins=recording(log, "proc", proc={"fail": "around_process"}))
        errors = [client.call("demo_tasks:add", 1, 2) for _ in range(2)]
    for error in errors:
        assert (error["kind"], error["type"]) == ("exception", "PluginError")
        assert error["message"] == 'plugin "proc" around_process failed: RuntimeError: proc cannot start a process'
    assert [line[2:4] for line in read_log(log) if line[2] == "around_process"] == [["around_process", "fail"]]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_decorate_failure_names_the_plugin(tmp_path: Path, executor: str) -> None:
    with WorkerProcess("--executor", executor, env=PLUGIN_ENV) as worker:
        client = connect(worker, plugins=recording(tmp_path / "hooks.log", "deco", deco={"fail": "decorate"}))
        error = client.call("demo_tasks:add", 1, 2)
    assert (error["kind"], error["type"]) == ("exception", "PluginError")
    assert error["message"] == 'plugin "deco" decorate failed: ValueError: no decorating today'


@pytest.mark.parametrize(
    ("module", "detail"),
    [
        ("broken_plugin", "ImportError: this plugin needs a library that is not installed"),
        ("no_such_plugin_module", "ModuleNotFoundError: No module named 'no_such_plugin_module'"),
    ],
)
def test_a_plugin_module_that_cannot_be_imported_rejects_the_cluster(module: str, detail: str) -> None:
    with WorkerProcess(env=PLUGIN_ENV) as worker:
        client = Client(worker.port)
        assert client.hello()["t"] == "welcome"
        client.send({
            "t": "cluster", "node": 0, "total_nodes": 1, "workers_per_node": 1, "head_addr": "127.0.0.1",
            "head_port": 0, "job_id": "j", "peers": [], "accelerators": 0, "accelerator": None, "network": None,
            "env": {}, "plugins": [plugin("fine", "env_plugin", addr="x"), plugin("torch", module)],
        })
        reply = client.wait_for(lambda m: m["t"] in ("ready", "reject"))
        assert reply == {
            "t": "reject",
            "reason": f'plugin "torch": cannot import its worker module {module!r}: {detail}',
        }
        client.wait_closed()
