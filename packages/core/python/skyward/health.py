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


def run_check(ref: str) -> "bool | str":
    """Calls the health checker ``ref``: ``True`` when the node is healthy, else the reason."""
    fn = TaskRunner._find(ref)
    answer = fn(instance_info()) if _takes_an_argument(fn) else fn()
    if answer is True:
        return True
    if isinstance(answer, str) and answer:
        return answer
    if answer is False or answer is None:
        return f"{ref} returned {answer!r}"
    return f"{ref} returned {type(answer).__name__} {answer!r} (expected True or a reason)"
