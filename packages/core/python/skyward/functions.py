"""``@sky.function`` inside a task: pending functions and their operators, as in the Python project.

Inside a running task, calling a ``@sky.function`` gives a :class:`PendingFunction` that runs
nothing until it is dispatched to the pool through the worker's nested dispatch
(:mod:`skyward.dispatch`):

- ``f(x) >> sky`` runs it on one node and returns its result;
- ``f(x) @ sky`` runs it on every node and returns the results by node index;
- ``f(x) > sky`` runs it in the background and returns a ``concurrent.futures.Future``;
- ``f(x) & g(y) >> sky`` and ``sky.gather(f(x), g(y)) >> sky`` run a group in parallel and return
  a tuple (with ``gather(..., stream=True)`` a generator of the results as they finish, in order or
  with ``ordered=False`` as they come).

``sky`` is the ``skyward`` module itself (``import skyward as sky``): inside a task the pool is the
one running it. Outside a task a ``@sky.function`` is called directly, so it can be tested locally.
The worker runs a ``@sky.function`` given as a task's ``module:qualname`` directly (never as a
pending function) and honours its ``timeout`` when the client set none.
"""

from __future__ import annotations

import concurrent.futures
import functools
import sys
from typing import Any, Callable, Dict, Iterator, List, Tuple

from .context import current_task


class SkyFunction:
    """What ``@sky.function`` returns: the function, its ``timeout``, and the pending-call factory."""

    __skyward_function__ = True

    def __init__(self, fn: Callable[..., Any], timeout: float | None) -> None:
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0):
            raise ValueError(f"sky.function(timeout=...) must be a positive number of seconds or None, not {timeout!r}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.timeout = timeout
        self.__skyward_timeout__ = timeout

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current_task.get() is None:
            return self.fn(*args, **kwargs)
        return PendingFunction(self, args, kwargs)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        return functools.partial(self.__call__, instance)

    def __reduce__(self) -> Any:
        # By reference, as a module-level function is.
        return (_find, (self.__module__, self.__qualname__))

    def __repr__(self) -> str:
        return f"<sky.function {self.__module__}.{self.__qualname__}>"


def _find(module: str, qualname: str) -> Any:
    __import__(module)
    target: Any = sys.modules[module]
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def unwrap(target: Any) -> Any:
    """The plain function behind a ``@sky.function`` (``target`` itself otherwise)."""
    return target.fn if isinstance(target, SkyFunction) else target


def declared_timeout(target: Any) -> float | None:
    """The ``timeout`` a function was declared with (``@sky.function(timeout=…)``), or None."""
    value = getattr(target, "__skyward_timeout__", None)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return float(value)


def _check_target(target: Any, operator: str) -> None:
    if getattr(target, "__name__", None) == "skyward" and type(target).__name__ == "module":
        return
    raise TypeError(
        f"inside a task, dispatch with `pending {operator} sky` (the skyward module: the pool running "
        f"this task), not {type(target).__name__}"
    )


class PendingFunction:
    """A ``@sky.function`` call that runs nothing until it is dispatched (``>>``, ``@``, ``>``)."""

    __slots__ = ("function", "args", "kwargs")

    def __init__(self, function: SkyFunction, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        self.function = function
        self.args = args
        self.kwargs = kwargs

    def _submit(self, node: int | None = None) -> concurrent.futures.Future[Any]:
        from .dispatch import submit

        return submit(self.function.fn, self.args, self.kwargs, node=node)

    def __rshift__(self, target: Any) -> Any:
        _check_target(target, ">>")
        return self._submit().result()

    def __matmul__(self, target: Any) -> List[Any]:
        _check_target(target, "@")
        from .context import runtime

        from .dispatch import node_indices

        futures = [self._submit(node) for node in node_indices(runtime.cluster)]
        return [future.result() for future in futures]

    def __gt__(self, target: Any) -> concurrent.futures.Future[Any]:
        _check_target(target, ">")
        return self._submit()

    def __and__(self, other: Any) -> PendingGroup:
        return PendingGroup([self]) & other

    def __repr__(self) -> str:
        return f"<pending {self.function.__qualname__}(…)>"


class PendingGroup:
    """Pending functions run in parallel by ``>>`` (``&`` and :func:`gather` build it)."""

    __slots__ = ("pendings", "stream", "ordered")

    def __init__(self, pendings: List[PendingFunction], stream: bool = False, ordered: bool = True) -> None:
        for pending in pendings:
            if not isinstance(pending, PendingFunction):
                raise TypeError(f"only pending @sky.function calls can be grouped, not {type(pending).__name__}")
        self.pendings = pendings
        self.stream = stream
        self.ordered = ordered

    def __and__(self, other: Any) -> PendingGroup:
        more = other.pendings if isinstance(other, PendingGroup) else [other]
        return PendingGroup([*self.pendings, *more], self.stream, self.ordered)

    def __rshift__(self, target: Any) -> Any:
        _check_target(target, ">>")
        futures = [pending._submit() for pending in self.pendings]
        if not self.stream:
            return tuple(future.result() for future in futures)
        return self._results(futures)

    def _results(self, futures: List[concurrent.futures.Future[Any]]) -> Iterator[Any]:
        if self.ordered:
            for future in futures:
                yield future.result()
        else:
            for future in concurrent.futures.as_completed(futures):
                yield future.result()


def gather(*pendings: PendingFunction, stream: bool = False, ordered: bool = True) -> PendingGroup:
    """A group run in parallel by ``>> sky``: a tuple of results, or with ``stream=True`` a generator
    of them (``ordered=False``: as they finish)."""
    return PendingGroup(list(pendings), stream, ordered)


__all__ = ["PendingFunction", "PendingGroup", "SkyFunction", "declared_timeout", "gather", "unwrap"]
