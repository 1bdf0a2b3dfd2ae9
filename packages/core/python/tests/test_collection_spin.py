"""The short spin before a blocking wait for an answer due within microseconds
(``skyward.collection_spin``): what it returns, its budget, and how it pauses after misses so a far
link costs a spin only now and then. The waits it serves (the head's ack, a node's answer) are
tested with real sockets in test_collection_head_fast.py."""

from __future__ import annotations

import time
from typing import List

import pytest

import worker_client  # noqa: F401  (puts the runtime on sys.path)
from skyward.collection_spin import MISSES, PAUSE_FIRST, PAUSE_MOST, Spinner, spin_budget_ns


def _never(calls: List[int]):
    def attempt() -> None:
        calls.append(1)
        return None

    return attempt


def test_what_the_attempt_gives_is_returned_as_soon_as_it_gives_it() -> None:
    spinner = Spinner(10_000_000)
    results = iter([None, None, 0, 5])  # 0 is an answer (a read of no bytes: the end), not "nothing yet"
    assert spinner.look(lambda: next(results)) == 0
    assert next(results) == 5  # not called again after the answer
    assert (spinner.caught, spinner.missed, spinner.paused) == (1, 0, 0)


def test_a_spin_ends_at_its_budget_and_the_caller_blocks() -> None:
    spinner = Spinner(2_000_000)  # 2 ms: long enough to tell from a single look
    calls: List[int] = []
    started = time.perf_counter_ns()
    assert spinner.look(_never(calls)) is None
    assert time.perf_counter_ns() - started >= 2_000_000
    assert len(calls) > 1
    assert (spinner.caught, spinner.missed) == (0, 1)


def test_a_zero_budget_never_spins() -> None:
    spinner = Spinner(0)
    calls: List[int] = []
    for _ in range(50):
        assert spinner.look(_never(calls)) is None
    assert calls == []
    assert (spinner.caught, spinner.missed, spinner.paused) == (0, 0, 0)


def test_misses_in_a_row_pause_the_spin_longer_each_time_and_an_answer_ends_the_pause() -> None:
    spinner = Spinner(1_000)
    calls: List[int] = []
    for _ in range(MISSES):
        spinner.look(_never(calls))
    assert spinner.missed == MISSES
    spun = len(calls)
    for _ in range(PAUSE_FIRST):  # paused: no look at all
        assert spinner.look(_never(calls)) is None
    assert (len(calls), spinner.paused) == (spun, PAUSE_FIRST)
    for _ in range(MISSES):  # it spins again, misses again: a pause twice as long
        spinner.look(_never(calls))
    assert len(calls) > spun
    for _ in range(2 * PAUSE_FIRST):
        spinner.look(_never(calls))
    assert spinner.paused == 3 * PAUSE_FIRST
    assert spinner.look(lambda: "answer") == "answer"  # caught: the pause starts short again
    for _ in range(MISSES):
        spinner.look(_never(calls))
    for _ in range(PAUSE_FIRST):
        spinner.look(_never(calls))
    assert spinner.paused == 4 * PAUSE_FIRST
    before = len(calls)
    spinner.look(_never(calls))
    assert len(calls) > before  # the short pause is over


def test_the_pause_stops_growing_at_its_most() -> None:
    spinner = Spinner(1)
    calls: List[int] = []
    pauses: List[int] = []
    while len(pauses) < 8:
        spinner.look(_never(calls))
        if spinner._skip:  # a run of misses just ended: the pause set
            pauses.append(spinner._skip)
            for _ in range(spinner._skip):
                spinner.look(_never(calls))
    assert pauses == [min(PAUSE_FIRST << step, PAUSE_MOST) for step in range(8)]


@pytest.mark.parametrize(("value", "expected"), [
    (None, 200_000), ("0", 0), ("20", 20_000), ("2.5", 2_500), ("-3", 0), ("5000", 1_000_000),
    ("fast", 200_000), ("nan", 200_000),
])
def test_the_budget_comes_from_SKYWARD_COLLECTIONS_SPIN_US(monkeypatch: pytest.MonkeyPatch, value: str | None,
                                                            expected: int) -> None:
    if value is None:
        monkeypatch.delenv("SKYWARD_COLLECTIONS_SPIN_US", raising=False)
    else:
        monkeypatch.setenv("SKYWARD_COLLECTIONS_SPIN_US", value)
    assert spin_budget_ns() == expected
    assert Spinner()._budget == expected
