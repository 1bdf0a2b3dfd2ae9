"""The root-owner check behind the self-destruct, as the pure function it is: every case from what
was read (the end-to-end runs are in test_worker.py, ``test_ttl_self_destruct_*``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyward.lifecycle import RootVerdict, judge_root_owner, read_root_owner, root_owner_pid  # noqa: E402

PATH = "/srv/skyward/root-owner"
OWN = (100, 99)


def test_a_missing_record_means_a_launcher_is_taking_the_root_over() -> None:
    assert judge_root_owner(PATH, None, None, OWN, None) == RootVerdict(None, True)


def test_an_unreadable_record_lets_the_self_destruct_run_and_says_why() -> None:
    verdict = judge_root_owner(PATH, None, PermissionError(13, "denied"), OWN, None)
    assert verdict.successor is None and not verdict.missing
    assert verdict.note is not None and verdict.note.startswith(f"{PATH} could not be read (PermissionError")


def test_a_record_that_names_no_pid_lets_it_run_and_says_what_it_holds() -> None:
    verdict = judge_root_owner(PATH, "  not-a-pid\n", None, OWN, None)
    assert verdict == RootVerdict(None, False, f"{PATH} does not name a pid ('not-a-pid'): the self-destruct runs")


def test_this_worker_its_parent_or_no_real_pid_lets_it_run() -> None:
    for record in ("100\n", "99", "0", "-5"):
        assert judge_root_owner(PATH, record, None, OWN, b"python -m skyward.worker") == RootVerdict(None, False)


def test_a_dead_owner_or_a_pid_reused_by_another_program_lets_it_run() -> None:
    assert judge_root_owner(PATH, "4242", None, OWN, None) == RootVerdict(None, False)
    assert judge_root_owner(PATH, "4242", None, OWN, b"/usr/sbin/sshd -D ") == RootVerdict(None, False)


def test_another_live_skyward_worker_owning_the_root_skips_the_self_destruct() -> None:
    verdict = judge_root_owner(PATH, "4242\n", None, OWN, b"python -m skyward.worker --node 0 ")
    assert verdict == RootVerdict(f"the root now belongs to the live worker pid 4242 ({PATH})", False)


def test_the_pid_is_read_from_the_record_with_its_whitespace() -> None:
    assert root_owner_pid(" 4242\n") == 4242
    assert root_owner_pid("4242 4243") is None


def test_reading_a_record_that_names_this_process_lets_it_run(tmp_path: Path) -> None:
    record = tmp_path / "owner"
    assert read_root_owner(str(record)) == RootVerdict(None, True)
    record.write_text(f"{os.getpid()}\n")
    assert read_root_owner(str(record)) == RootVerdict(None, False)
