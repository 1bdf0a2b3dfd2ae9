"""Running a pool's health checker (``options.healthChecker``) on a node.

The client runs ``skyward.health:run_check(ref)`` on each node as a nested task (so it never waits
for the task slots): it calls the user's function — with the node's ``instance_info()`` if it takes
an argument, as in the Python project, or with none — and answers ``True`` for a healthy node or a
string saying what is wrong. Anything else the function returns is a failure, named.
"""

from __future__ import annotations

import inspect
from typing import Any

from .execution import TaskRunner
from .context import instance_info


def _takes_an_argument(fn: Any) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    return bool(positional)


def _plain_bool(answer: Any) -> Any:
    """A numpy bool or a one-element boolean tensor as the Python bool it holds; anything else as is.
    A check written with numpy or torch (``(temperatures < 85).all()``) answers one of those."""
    module = type(answer).__module__.split(".", 1)[0]
    if module == "numpy" and type(answer).__name__ == "bool_":
        return bool(answer)
    if module == "torch" and type(answer).__name__ == "Tensor" and str(getattr(answer, "dtype", "")) == "torch.bool":
        if answer.numel() == 1:
            return bool(answer.item())
    return answer


def run_check(ref: str) -> "bool | str":
    """Calls the health checker ``ref``: ``True`` when the node is healthy, else the reason."""
    fn = TaskRunner._find(ref)
    answer = _plain_bool(fn(instance_info()) if _takes_an_argument(fn) else fn())
    if answer is True:
        return True
    if isinstance(answer, str) and answer:
        return answer
    if answer is False or answer is None:
        return f"{ref} returned {answer!r}"
    return f"{ref} returned {type(answer).__name__} {answer!r} (expected True or a reason)"
