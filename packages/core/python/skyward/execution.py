"""Running one task: find the function, call it, turn what happens into the task's outcome.

Both executors use :class:`TaskRunner` (the thread executor in its slot threads, the process
executor in its children), so there is one task pipeline: prepare (enter the plugins'
``around_app``/``around_process`` hooks the first time) → resolve ``module:qualname`` → wrap it
with the plugins' ``decorate`` chain → :func:`run_task` → settle the value (await a coroutine,
collect or stream a generator) → encode it.

An outcome is a tuple: ``("result", wire_value)``, ``("end",)`` after streamed items, or
``("error", kind, type, message, traceback)``.
"""

from __future__ import annotations

import asyncio
import collections
import importlib
import inspect
import os
import sys
import threading
import traceback
from types import TracebackType
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

from .context import TaskContext
from .functions import declared_timeout, unwrap
from .values import Kept, pickled_size, restore, type_name
from .protocol import SerializationError, to_wire

Outcome = Tuple[Any, ...]
TaskFunction = Callable[..., Any]
Decorator = Callable[[TaskFunction], TaskFunction]
Prepare = Callable[[], "Outcome | None"]
EmitItem = Callable[[int, Any], None]

INPUT_WINDOW = 16
_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))


class TaskNotFound(LookupError):
    """The module or the function named by a task's ``fn`` does not exist."""

    def __init__(self, message: str, type_name: str = "LookupError") -> None:
        super().__init__(message)
        self.type_name = type_name


class InputStreamError(RuntimeError):
    """Raised inside a task reading an input stream when the client's iterable failed."""


class PluginError(RuntimeError):
    """A plugin's hook failed; the task fails with ``type`` ``"PluginError"`` and this message."""

    def __init__(self, plugin: str, hook: str, cause: BaseException) -> None:
        super().__init__(f'plugin "{plugin}" {hook} failed: {exception_type_name(cause)}: {describe(cause)}')
        self.plugin = plugin
        self.hook = hook
        self.cause = cause

    def outcome(self) -> Outcome:
        return error_outcome("exception", "PluginError", str(self), format_traceback(self.cause))


def exception_type_name(error: BaseException) -> str:
    cls = type(error)
    if cls.__module__ in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def describe(error: BaseException) -> str:
    """``str(error)``, or what went wrong making it: an exception whose ``__str__`` raises must still
    fail its task with a message (unguarded, it took the task's thread or process down with it)."""
    try:
        return str(error)
    except BaseException as failure:
        try:
            reason = f"{type(failure).__name__}: {failure}"
        except BaseException:
            reason = type(failure).__name__
        return f"<exception str() failed: {reason}>"


def format_traceback(error: BaseException) -> str:
    """The traceback text, without the runtime's own frames at its top."""
    tb: TracebackType | None = error.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(_RUNTIME_DIR):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


def error_outcome(kind: str, type_name: str, message: str, traceback_text: str = "") -> Outcome:
    return ("error", kind, type_name, message, traceback_text)


def exception_outcome(error: BaseException) -> Outcome:
    return error_outcome("exception", exception_type_name(error), describe(error), format_traceback(error))


def run_task(fn: TaskFunction, args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
    """The one place a task function is called."""
    return fn(*args, **kwargs)


def _iterate_async(agen: Any) -> Iterator[Any]:
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                item = loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                return
            yield item
    finally:
        try:
            loop.run_until_complete(agen.aclose())
        finally:
            loop.close()


def _settle(value: Any) -> Any:
    """Await a coroutine; collect a generator (sync or async) into a list."""
    if inspect.iscoroutine(value):
        value = asyncio.run(value)
    if inspect.isgenerator(value):
        return list(value)
    if inspect.isasyncgen(value):
        return list(_iterate_async(value))
    return value


class TaskRunner:
    """Resolves and runs tasks. ``decorators`` wrap every task function, the first outermost;
    ``prepare`` runs before each task (it enters the plugins' lifecycle hooks once) and fails the
    task when it returns an outcome; ``finish`` runs after each task that ``prepare`` let through
    (the task is out of those hooks).
    """

    def __init__(self, decorators: Sequence[Decorator] = (), prepare: Prepare | None = None,
                 finish: Callable[[], None] | None = None) -> None:
        self._decorators: List[Decorator] = list(decorators)
        self._functions: Dict[str, TaskFunction] = {}
        self._timeouts: Dict[str, float | None] = {}
        self._lock = threading.Lock()
        self.prepare = prepare
        self.finish = finish
        #: called as ``(task, seconds)`` when a task's function declares ``@sky.function(timeout=…)``
        #: (the executor applies it when the client gave none)
        self.on_declared_timeout: Callable[[TaskContext, float], None] | None = None

    def set_decorators(self, decorators: Sequence[Decorator]) -> None:
        self._decorators = list(decorators)
        self._functions = {}

    def resolve(self, ref: str) -> TaskFunction:
        """The decorated function for ``module:qualname`` (cached; built once even when several
        threads ask at the same time, so each plugin's ``decorate`` runs once per function)."""
        fn = self._functions.get(ref)
        if fn is None:
            with self._lock:
                fn = self._functions.get(ref)
                if fn is None:
                    fn = self._find(ref)
                    self._timeouts[ref] = self._declared(ref)
                    for decorate in reversed(self._decorators):
                        fn = decorate(fn)
                    self._functions[ref] = fn
        return fn

    def declared_timeout(self, ref: str) -> float | None:
        """``@sky.function(timeout=…)`` of the task ``ref``, or None (also when it cannot be found:
        running it reports that)."""
        if ref not in self._timeouts:
            try:
                self.resolve(ref)
            except BaseException:
                return None
        return self._timeouts.get(ref)

    @staticmethod
    def _declared(ref: str) -> float | None:
        module_name, _, qualname = ref.partition(":")
        target: Any = sys.modules.get(module_name)
        try:
            for part in qualname.split("."):
                target = getattr(target, part)
        except AttributeError:
            return None
        return declared_timeout(target)

    @staticmethod
    def _find(ref: str) -> TaskFunction:
        if not isinstance(ref, str):
            raise TaskNotFound(f"fn must be a 'module:qualname' string, not {type(ref).__name__}")
        module_name, separator, qualname = ref.partition(":")
        if not separator or not module_name or not qualname:
            raise TaskNotFound(f"fn {ref!r} is not of the form 'module:qualname'")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            missing = error.name or ""
            if missing and (module_name == missing or module_name.startswith(missing + ".")):
                raise TaskNotFound(
                    f"module {module_name!r} not found (working directory {os.getcwd()!r})",
                    "ModuleNotFoundError",
                ) from None
            raise  # the task's module imports something that is missing: an exception
        target: Any = module
        walked = []
        for part in qualname.split("."):
            walked.append(part)
            try:
                target = getattr(target, part)
            except AttributeError:
                where = module_name if len(walked) == 1 else f"{module_name}:{'.'.join(walked[:-1])}"
                raise TaskNotFound(f"{where!r} has no attribute {part!r}", "AttributeError") from None
        target = unwrap(target)  # a @sky.function runs as itself, not as a pending call
        if not callable(target):
            raise TaskNotFound(f"{ref!r} is not callable (it is a {type(target).__name__})", "TypeError")
        function: TaskFunction = target
        return function

    def run(
        self,
        ref: str,
        args: Sequence[Any],
        kwargs: Dict[str, Any],
        stream: bool,
        emit_item: EmitItem,
        task: TaskContext,
        keep: bool = False,
    ) -> Outcome:
        """Run one task to its outcome; streamed items go to ``emit_item(seq, wire_value)``. With
        ``keep`` the outcome is ``("kept", Kept)``: the result stays on this node."""
        if self.prepare is not None:
            failure = self.prepare()
            if failure is not None:
                return failure
        try:
            return self._run(ref, args, kwargs, stream, emit_item, task, keep)
        finally:
            if self.prepare is not None and self.finish is not None:
                self.finish()

    def _run(self, ref: str, args: Sequence[Any], kwargs: Dict[str, Any], stream: bool, emit_item: EmitItem,
             task: TaskContext, keep: bool) -> Outcome:
        try:
            fn = self.resolve(ref)
        except TaskNotFound as error:
            return error_outcome("not_found", error.type_name, str(error))
        except PluginError as error:
            return error.outcome()
        except BaseException as error:  # the module raised while being imported
            return exception_outcome(error)
        declared = self._timeouts.get(ref)
        if declared is not None and self.on_declared_timeout is not None:
            self.on_declared_timeout(task, declared)
        try:
            # Objects sent pickled ($o) are unpickled here, when a task of an accepted client runs.
            args, kwargs = restore(args), restore(kwargs)
        except BaseException as error:
            return error_outcome("serialization", "SerializationError", f"cannot unpickle an argument: {type(error).__name__}: {describe(error)}")
        try:
            value = run_task(fn, args, kwargs)
            if stream:
                return self._stream(value, emit_item, task)
            value = _settle(value)
        except BaseException as error:
            return exception_outcome(error)
        if keep:
            return _kept(value)
        try:
            return ("result", to_wire(value, "result"))
        except SerializationError as error:
            return error_outcome("serialization", "SerializationError", str(error))
        except BaseException as error:  # a RecursionError from a value nested too deep, a __reduce__ that exits…
            return _unsendable("result", error)

    @staticmethod
    def _stream(value: Any, emit_item: EmitItem, task: TaskContext) -> Outcome:
        if inspect.iscoroutine(value):
            value = asyncio.run(value)
        if inspect.isasyncgen(value):
            value = _iterate_async(value)
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            return error_outcome(
                "exception",
                "TypeError",
                f"a stream task must return an iterable (a generator), not {type(value).__name__}",
            )
        iterator = iter(value)
        seq = 0
        try:
            while not task.abandoned:
                try:
                    item = next(iterator)
                except StopIteration:
                    break
                except BaseException as error:
                    return exception_outcome(error)
                try:
                    wire = to_wire(item, f"item[{seq}]")
                except SerializationError as error:
                    return error_outcome("serialization", "SerializationError", str(error))
                except BaseException as error:
                    return _unsendable(f"item[{seq}]", error)
                emit_item(seq, wire)
                seq += 1
        finally:
            close = getattr(iterator, "close", None)
            if callable(close):
                try:
                    close()
                except BaseException:
                    pass
        return ("end",)


def _unsendable(path: str, error: BaseException) -> Outcome:
    """A value whose encoding failed otherwise than a :class:`SerializationError` says (a list nested
    deeper than the recursion limit, a ``__reduce__`` raising ``SystemExit``): its task fails naming
    why, where it would have died with its thread (or its executor process), never answered."""
    return error_outcome(
        "serialization", "SerializationError", f"{path}: cannot send this value: {type(error).__name__}: {describe(error)}"
    )


def _kept(value: Any) -> Outcome:
    """The outcome of a result kept on its node: measured by its pickle (what moving it to another
    node carries), so it must be picklable, as every value that may leave its process."""
    try:
        size = pickled_size(value)
    except BaseException as error:
        return error_outcome(
            "serialization", "SerializationError",
            f"result: cannot keep a value of type {type_name(value)} as a remote reference (it must be picklable): "
            f"{type(error).__name__}: {describe(error)}",
        )
    return ("kept", Kept(type_name(value), size, value, True))


class InputStream:
    """An argument stream (``{"$s": k}``) as a lazy iterator inside the task.

    Items are requested from the client in credit (``request(n)``): the first ``window`` when the
    task first reads, then more whenever fewer than half a window are requested-but-unread, so at
    most ``window`` items are ever ahead of the reader.
    """

    def __init__(self, index: int, request: Callable[[int], None], window: int = INPUT_WINDOW) -> None:
        self.index = index
        self._request = request
        self._window = window
        self._condition = threading.Condition()
        self._items: collections.deque[Any] = collections.deque()
        self._granted = 0
        self._consumed = 0
        self._ended = False
        self._error: str | None = None

    def __iter__(self) -> InputStream:
        return self

    def __next__(self) -> Any:
        # Credit is asked for outside the lock: the request may block (a child's send to a worker
        # that reads slowly), and the thread that pushes items must never wait behind it.
        with self._condition:
            credit = self._top_up()
        if credit:
            self._request(credit)
        with self._condition:
            while not self._items and not self._ended and self._error is None:
                self._condition.wait()
            if self._items:
                self._consumed += 1
                item = self._items.popleft()
                credit = self._top_up()
            elif self._error is not None:
                raise InputStreamError(self._error)
            else:
                raise StopIteration
        if credit:
            self._request(credit)
        return item

    def _top_up(self) -> int:
        """The credit to ask for now (counted as granted), or 0: enough is asked for already."""
        if self._ended or self._error is not None:
            return 0
        ahead = self._granted - self._consumed
        if ahead > self._window // 2:
            return 0
        credit = self._window - ahead
        self._granted += credit
        return credit

    def push(self, value: Any) -> None:
        with self._condition:
            self._items.append(value)
            self._condition.notify()

    def finish(self) -> None:
        with self._condition:
            self._ended = True
            self._condition.notify_all()

    def fail(self, message: str) -> None:
        with self._condition:
            if not self._ended:
                self._error = message
            self._condition.notify_all()

    def __repr__(self) -> str:
        return f"<skyward input stream {self.index}>"
