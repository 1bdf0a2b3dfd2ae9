"""The pool's secrets on a real worker: given in the ``cluster`` message, read by tasks from
``os.environ`` (thread and process executors), masked in output and errors, never told back, and in
no process's command line."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Iterator, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import Client, WorkerProcess, connect  # noqa: E402

from skyward.secrets import REDACTED, SecretMask, secrets_of  # noqa: E402

SECRETS = {"SKYTEST_HF_TOKEN": "hf_planted_value_4d2a", "SKYTEST_DB_PASSWORD": "pw-planted-77"}


@pytest.fixture(params=["thread", "process"])
def worker(request: pytest.FixtureRequest) -> Iterator[WorkerProcess]:
    with WorkerProcess("--executor", request.param, "--concurrency", "2") as process:
        yield process


def _outputs(client: Client, task_id: str) -> str:
    return "".join(m["data"] for m in client.by_id[task_id] if m["t"] == "out")


def _cmdlines(pid: int) -> List[bytes]:
    """The command lines of ``pid`` and its descendants (Linux ``/proc``)."""
    found: List[bytes] = []
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            found.append(Path(f"/proc/{current}/cmdline").read_bytes())
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        pending.extend(int(child) for child in children)
    return found


def test_tasks_read_each_secret_from_the_environment(worker: WorkerProcess) -> None:
    client = connect(worker, secrets=SECRETS)
    for name, value in SECRETS.items():
        assert client.value("demo_tasks:env", name) == value
    client.close()


def test_a_printed_or_raised_secret_is_masked(worker: WorkerProcess) -> None:
    client = connect(worker, secrets=SECRETS)
    value = SECRETS["SKYTEST_HF_TOKEN"]
    client.call("demo_tasks:say", f"token={value}", task_id="printed")
    assert _outputs(client, "printed") == f"token={REDACTED}\n"
    error = client.call("demo_tasks:boom", f"bad token {value}", task_id="raised")
    assert error["t"] == "error"
    assert value not in error["message"] and value not in error["traceback"]
    assert REDACTED in error["message"]
    client.close()


def test_the_secrets_are_never_told_back_and_in_no_command_line(worker: WorkerProcess) -> None:
    client = connect(worker, secrets=SECRETS)
    assert client.value("demo_tasks:env", "SKYTEST_DB_PASSWORD") == SECRETS["SKYTEST_DB_PASSWORD"]
    client.close()
    again = Client(worker.port)
    welcome = again.hello()
    assert welcome["cluster"] is not None and "secrets" not in welcome["cluster"]
    assert "env" not in welcome["cluster"]
    for cmdline in _cmdlines(worker.process.pid):
        for value in SECRETS.values():
            assert value.encode() not in cmdline
    again.close()


def test_a_later_cluster_replaces_the_values(worker: WorkerProcess) -> None:
    client = connect(worker, secrets=SECRETS)
    client.close()
    rotated = {**SECRETS, "SKYTEST_HF_TOKEN": "hf_rotated_value_91"}
    client = connect(worker, secrets=rotated)
    assert client.value("demo_tasks:env", "SKYTEST_HF_TOKEN") == "hf_rotated_value_91"
    client.close()


def test_secrets_of_reads_string_values_only() -> None:
    assert secrets_of({"secrets": {"A": "1", "B": 2, "C": ""}}) == {"A": "1"}
    assert secrets_of({"secrets": ["A"]}) == {}
    assert secrets_of({}) == {}


def test_the_mask_hides_every_value_longest_first() -> None:
    mask = SecretMask()
    mask.add({"SHORT": "abc", "LONG": "abcdef"})
    assert mask.mask("x abcdef y abc") == f"x {REDACTED} y {REDACTED}"
    mask.add({"LONG": "rotated"})
    assert mask.mask("abcdef rotated") == f"{REDACTED} {REDACTED}"


def test_a_secret_in_the_workers_own_log_is_masked() -> None:
    value = SECRETS["SKYTEST_DB_PASSWORD"]
    # A custom metric whose command fails, its stderr showing a secret it was given: the worker's
    # log line quoted that stderr as it was (the worker's stderr is its log file on a node).
    failing = {"collector": "custom", "name": "probe", "interval": 0.1,
               "command": 'echo "login failed for $SKYTEST_DB_PASSWORD" >&2; exit 3'}
    with WorkerProcess("--concurrency", "1") as process:
        client = connect(process, secrets=SECRETS, metrics=[failing])
        try:
            deadline = time.monotonic() + 60
            while not any("custom metric 'probe'" in line for line in process.stderr_lines):
                assert time.monotonic() < deadline, process.stderr_lines
                time.sleep(0.05)
        finally:
            client.close()
        [line] = [line for line in process.stderr_lines if "custom metric 'probe'" in line]
        assert f"login failed for {REDACTED}" in line and value not in "".join(process.stderr_lines)
