"""``skyward.commands``: commands and scripts as tasks (``sky.shell``/``sky.script``)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import Client, WorkerProcess, connect  # noqa: E402

from skyward.commands import OUTPUT_MARKER, CommandFailedError, run_script, run_shell  # noqa: E402

ARGV_SCRIPT = "import json, sys\nprint(json.dumps(sys.argv[1:]))\n"
TRICKY = ["a b", "$HOME", "'q'", '"dq"', "`id`", "; rm -rf /", "", "ünï"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


# -- in this process ---------------------------------------------------------------------------------


def test_shell_result_holds_exit_code_and_output(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_shell("echo hi; echo err >&2")
    assert result == {"exitCode": 0, "signal": None, "stdout": "hi\n", "stderr": "err\n"}
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("hi\n", "err\n")  # streamed to the task's own output


def test_shell_non_zero_exit_raises_with_code_and_tail(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(CommandFailedError) as caught:
        run_shell("echo before; echo oops >&2; exit 3")
    error = caught.value
    assert (error.exit_code, error.signal) == (3, None)
    assert str(error).startswith("`echo before; echo oops >&2; exit 3` exited with code 3" + OUTPUT_MARKER)
    assert "before\n" in error.output_tail and "oops\n" in error.output_tail
    assert error.stdout == "before\n" and error.stderr == "oops\n"


def test_shell_killed_by_a_signal() -> None:
    with pytest.raises(CommandFailedError) as caught:
        run_shell("kill -KILL $$")
    assert (caught.value.exit_code, caught.value.signal) == (137, "SIGKILL")
    assert str(caught.value) == "`kill -KILL $$` was killed by SIGKILL (exit code 137)"


def test_shell_env_and_cwd(tmp_path: Path) -> None:
    result = run_shell('echo "$GREETING"; pwd', env={"GREETING": "a b $c"}, cwd=str(tmp_path))
    assert result["stdout"] == f"a b $c\n{tmp_path.resolve()}\n"


def test_output_streams_in_order_as_it_arrives(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_shell("for i in 1 2 3 4 5; do echo line$i; done")
    assert result["stdout"] == "".join(f"line{i}\n" for i in range(1, 6))
    assert capsys.readouterr().out == result["stdout"]


def test_result_keeps_only_the_tail_of_long_output() -> None:
    result = run_shell(f"{sys.executable} -c \"print('x' * 200000)\"")
    assert len(result["stdout"]) == 64 * 1024 and result["stdout"].endswith("x\n")


def test_script_receives_its_argv_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tool.py").write_text(ARGV_SCRIPT)
    monkeypatch.chdir(tmp_path)
    result = run_script("tool.py", TRICKY)
    import json

    assert json.loads(result["stdout"]) == TRICKY


def test_script_executable_runs_directly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "tool.sh"
    tool.write_text('#!/bin/sh\nfor a in "$@"; do echo "[$a]"; done\n')
    tool.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    assert run_script("tool.sh", ["a b", "$HOME"])["stdout"] == "[a b]\n[$HOME]\n"


def test_script_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="is it in the image's includes"):
        run_script("missing.py")
    (tmp_path / "plain.sh").write_text("echo hi\n")
    with pytest.raises(PermissionError, match="not executable"):
        run_script("plain.sh")
    (tmp_path / "fail.py").write_text("import sys\nsys.exit(4)\n")
    with pytest.raises(CommandFailedError, match=r"^script fail.py exited with code 4$"):
        run_script("fail.py")
    with pytest.raises(TypeError, match=r"args\[1\]"):
        run_script("fail.py", ["ok", 3])  # type: ignore[list-item]


# -- on a real worker ----------------------------------------------------------------------------------


@pytest.fixture(params=["thread", "process"], scope="module")
def worker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    workdir = tmp_path_factory.mktemp("work")
    (workdir / "tool.py").write_text(ARGV_SCRIPT)
    with WorkerProcess("--executor", request.param, "--concurrency", "2", cwd=workdir) as process:
        yield process


@pytest.fixture()
def client(worker: WorkerProcess) -> Iterator[Client]:
    client = connect(worker)
    yield client
    client.close()


def _outputs(client: Client, task_id: str) -> List[Dict[str, Any]]:
    return [m for m in client.by_id[task_id] if m["t"] == "out"]


def test_worker_streams_output_before_the_result(client: Client) -> None:
    message = client.call("skyward.commands:run_shell", "echo hi; sleep 0.2; echo err >&2", task_id="sh")
    assert message["t"] == "result" and message["value"]["exitCode"] == 0
    out = _outputs(client, "sh")
    assert [(m["stream"], m["data"]) for m in out] == [("stdout", "hi\n"), ("stderr", "err\n")]
    assert [m["t"] for m in client.by_id["sh"]][-1] == "result"


def test_worker_failure_is_a_command_failed_error(client: Client) -> None:
    message = client.call("skyward.commands:run_shell", "echo nope >&2; exit 2")
    assert message["t"] == "error" and message["kind"] == "exception"
    assert message["type"] == "skyward.commands.CommandFailedError"
    assert message["message"] == "`echo nope >&2; exit 2` exited with code 2" + OUTPUT_MARKER + "nope\n"


def test_worker_script_argv_from_the_working_directory(client: Client) -> None:
    import json

    value = client.value("skyward.commands:run_script", "tool.py", TRICKY)
    assert json.loads(value["stdout"]) == TRICKY


@pytest.mark.parametrize("how", ["cancel", "timeout"])
def test_stopping_the_task_kills_the_command(client: Client, tmp_path: Path, how: str) -> None:
    pid_file = tmp_path / "pid"
    command = f"sleep 30 & echo $! > {pid_file}; wait"
    client.submit(f"long-{how}", "skyward.commands:run_shell", command, timeout=0.5 if how == "timeout" else None)
    deadline = time.monotonic() + 5
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = int(pid_file.read_text())
    assert _alive(pid)
    if how == "cancel":
        client.send({"t": "cancel", "id": f"long-{how}"})
    assert client.terminal(f"long-{how}")["kind"] == ("cancelled" if how == "cancel" else "timeout")
    assert _wait_gone(pid)
