"""``skyward.report_metric``: a task's own numbers (a training step's loss, an eval score) sent to the
client as ``metric`` messages, tagged with the node, the worker and the task, and shown by the
dashboard as a chart. The Python project has only shell-command metrics; this is the in-task way out.
"""

from __future__ import annotations

import math
import numbers

from .context import current_task, runtime


def report_metric(name: str, value: float, step: int | None = None) -> None:
    """Report ``value`` under ``name`` (optionally for training step ``step``) from inside a task.

    The client receives it as a ``metric`` event (node, worker, task, name, value, step). Raises
    ``TypeError``/``ValueError`` for a name that is not a non-empty string, a value that is not a finite
    real number (numpy scalars and 0-d tensors convert), or a step that is not a whole number >= 0; and
    ``RuntimeError`` outside a task running on a Skyward worker.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"report_metric: name must be a non-empty string, not {name!r}")
    if isinstance(value, bool) or not (isinstance(value, numbers.Real) or hasattr(value, "__float__")):
        raise TypeError(f"report_metric: value must be a real number, not {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"report_metric: value of {name!r} must be finite, not {number}")
    if step is not None and (isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0):
        raise ValueError(f"report_metric: step must be a whole number >= 0 or None, not {step!r}")
    context = current_task.get()
    sender = runtime.metric_sender
    if context is None or sender is None:
        raise RuntimeError("sky.report_metric() is only available inside a task running on a Skyward worker")
    sender(context, name, number, None if step is None else int(step))
