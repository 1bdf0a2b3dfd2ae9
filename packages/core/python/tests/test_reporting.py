"""``sky.report_metric``: what it refuses, and what it hands to the host for a running task."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import skyward as sky  # noqa: E402
from skyward.context import TaskContext, current_task, runtime  # noqa: E402


class _Channel:
    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass


@pytest.fixture()
def sent() -> Iterator[List[Tuple[Any, str, float, Any]]]:
    """A task running in this process, with a sender that records what reaches the host."""
    calls: List[Tuple[Any, str, float, Any]] = []
    previous = runtime.metric_sender
    runtime.metric_sender = lambda context, name, value, step: calls.append((context.key, name, value, step))
    token = current_task.set(TaskContext("t1", 0, (_Channel(), _Channel())))
    yield calls
    current_task.reset(token)
    runtime.metric_sender = previous


def test_outside_a_task_raises() -> None:
    with pytest.raises(RuntimeError, match="only available inside a task"):
        sky.report_metric("loss", 0.5)


def test_hands_name_value_and_step_to_the_host(sent: List[Tuple[Any, str, float, Any]]) -> None:
    sky.report_metric("loss", 0.25, step=3)
    sky.report_metric("score", 7)

    class Scalar:  # what numpy scalars and 0-d tensors look like to it
        def __float__(self) -> float:
            return 1.5

    sky.report_metric("accuracy", Scalar())  # type: ignore[arg-type]
    assert sent == [("t1", "loss", 0.25, 3), ("t1", "score", 7.0, None), ("t1", "accuracy", 1.5, None)]
    assert all(type(value) is float for _, _, value, _ in sent)


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        (("", 1.0), TypeError, "name must be a non-empty string"),
        ((3, 1.0), TypeError, "name must be a non-empty string"),
        (("loss", "0.5"), TypeError, "value must be a real number, not str"),
        (("loss", True), TypeError, "value must be a real number, not bool"),
        (("loss", float("inf")), ValueError, "must be finite"),
        (("loss", 1.0, -1), ValueError, "step must be a whole number >= 0"),
        (("loss", 1.0, 2.5), ValueError, "step must be a whole number >= 0"),
    ],
)
def test_refuses_what_it_cannot_send(sent: List[Any], arguments: Tuple[Any, ...], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        sky.report_metric(*arguments)
    assert sent == []
