"""Skyward's in-task API: ``import skyward as sky`` inside functions that run on a Skyward worker.

The same names and meanings as the Python project, so existing task code runs unchanged:
``instance_info``, ``is_head``, ``shard``, ``stdout``, ``stderr``, ``silent``, ``redirect_output``,
``function``, ``gather`` and ``time``; and the distributed collections ``dict``, ``set``, ``counter``,
``queue``, ``barrier`` and ``lock`` (:mod:`skyward.collections`). Beyond the Python project:
``report_metric``, a task's own values (a training step's loss) sent to the client as metrics.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, overload

from . import durations as time
from . import storage
from .collections import barrier, counter, dict, lock, queue, set
from .context import instance_info
from .execution import InputStreamError
from .functions import PendingFunction, PendingGroup, SkyFunction, gather, unwrap
from .info import AcceleratorInfo, InstanceInfo, NetworkInfo, PeerInfo
from .output import CallbackWriter, redirect_output, silent, stderr, stdout
from .reporting import report_metric
from .sharding import shard

__version__ = "0.1.0"

F = TypeVar("F", bound=Callable[..., Any])


def is_head(info: InstanceInfo | None = None) -> bool:
    """True on the pool's single head worker (``info.is_head``); ``info`` defaults to this one."""
    return (info if info is not None else instance_info()).is_head


@overload
def function(fn: F, *, timeout: float | None = None) -> F: ...
@overload
def function(fn: None = None, *, timeout: float | None = None) -> Callable[[F], F]: ...


def function(fn: Callable[..., Any] | None = None, *, timeout: float | None = None) -> Any:
    """``@sky.function`` and ``@sky.function(timeout=600)``, as in the Python project.

    Inside a task, calling the function gives a pending function for ``>> sky``, ``@ sky``,
    ``> sky``, ``&`` and :func:`gather` (see :mod:`skyward.functions`); outside a task it is called
    directly. When the client runs it as a task with no timeout of its own, the worker applies
    ``timeout`` (seconds).
    """

    def mark(target: Callable[..., Any]) -> Callable[..., Any]:
        return SkyFunction(unwrap(target), timeout)

    if fn is None:
        return mark
    return mark(fn)


__all__ = [
    "AcceleratorInfo",
    "barrier",
    "counter",
    "dict",
    "lock",
    "queue",
    "set",
    "CallbackWriter",
    "InputStreamError",
    "InstanceInfo",
    "NetworkInfo",
    "PeerInfo",
    "function",
    "gather",
    "PendingFunction",
    "PendingGroup",
    "instance_info",
    "is_head",
    "redirect_output",
    "report_metric",
    "shard",
    "silent",
    "stderr",
    "stdout",
    "storage",
    "time",
]
