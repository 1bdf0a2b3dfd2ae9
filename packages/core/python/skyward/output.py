"""Per-task stdout/stderr capture and the in-task output controls.

A worker replaces ``sys.stdout``/``sys.stderr`` with :class:`TaskStream` proxies. A write goes to
the :class:`OutputChannel` of the task running in the writing thread (found through the
``current_task`` context variable), or to the process's untracked channel outside any task.
Channels pass complete lines on at once and hold a partial line for at most ``FLUSH_INTERVAL``.
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import functools
import inspect
import io
import sys
import threading
import time
from typing import Any, Callable, Iterator, TextIO, TypeVar, Union

from .context import TaskContext, current_task, in_worker, instance_info
from .info import InstanceInfo

FLUSH_INTERVAL = 0.05
STREAMS = ("stdout", "stderr")

Sink = Callable[[Any, str, str], None]
F = TypeVar("F", bound=Callable[..., Any])
Only = Union[str, Callable[[InstanceInfo], bool]]


class _Flusher:
    """One daemon thread per process that sends partial lines left waiting for FLUSH_INTERVAL."""

    def __init__(self) -> None:
        # Task threads take the plain lock directly: a stopped task's interrupt (an asynchronous
        # exception) cannot land between acquiring it and the ``with`` block, as it can inside
        # ``Condition.__enter__``, and leave it held for every other task.
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._due: list[OutputChannel] = []
        self._thread: threading.Thread | None = None

    def schedule(self, channel: OutputChannel) -> None:
        with self._lock:
            self._due.append(channel)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="skyward-output-flusher", daemon=True)
                self._thread.start()
            self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._due:
                    self._condition.wait()
            time.sleep(FLUSH_INTERVAL)
            with self._condition:
                due, self._due = self._due, []
            for channel in due:
                channel.flush_scheduled()


_flusher = _Flusher()


class OutputChannel:
    """Buffered text of one stream of one task, passed to ``sink(key, stream, text)``."""

    __slots__ = ("key", "stream", "sink", "_lock", "_pending", "_scheduled", "_decoder")

    def __init__(self, key: Any, stream: str, sink: Sink) -> None:
        self.key = key
        self.stream = stream
        self.sink = sink
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._scheduled = False
        self._decoder: codecs.IncrementalDecoder | None = None

    def write_bytes(self, data: bytes) -> None:
        """Bytes written to ``sys.stdout.buffer``: a character split between two writes waits here
        for its last bytes (one decoder per channel, so no other task's bytes complete it)."""
        with self._lock:
            if self._decoder is None:
                self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
            text = self._decoder.decode(data)
        self.write(text)

    def write(self, text: str) -> None:
        if not text:
            return
        newline = text.rfind("\n")
        with self._lock:
            if newline < 0:
                self._pending.append(text)
                if not self._scheduled:
                    self._scheduled = True
                    _flusher.schedule(self)
                return
            if self._pending:
                self._pending.append(text[: newline + 1])
                data = "".join(self._pending)
                self._pending.clear()
            else:
                data = text[: newline + 1]
            if newline + 1 < len(text):
                self._pending.append(text[newline + 1 :])
                if not self._scheduled:
                    self._scheduled = True
                    _flusher.schedule(self)
            # Sent under the lock so concurrent writers and the flusher keep the text in order.
            self.sink(self.key, self.stream, data)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                data = "".join(self._pending)
                self._pending.clear()
                self.sink(self.key, self.stream, data)

    def flush_scheduled(self) -> None:
        with self._lock:
            self._scheduled = False
            if self._pending:
                data = "".join(self._pending)
                self._pending.clear()
                self.sink(self.key, self.stream, data)


class OutputRouter:
    """Where a process's captured output goes: one sink, and channels for output outside tasks."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.untracked = (OutputChannel(None, "stdout", sink), OutputChannel(None, "stderr", sink))

    def task_channels(self, key: Any) -> tuple[OutputChannel, OutputChannel]:
        return (OutputChannel(key, "stdout", self.sink), OutputChannel(key, "stderr", self.sink))

    def new_context(self, key: Any, slot: int) -> TaskContext:
        return TaskContext(key, slot, self.task_channels(key))

    def install(self) -> None:
        """Replace ``sys.stdout``/``sys.stderr`` with proxies routing to this router."""
        sys.stdout = TaskStream(0, self, sys.stdout)
        sys.stderr = TaskStream(1, self, sys.stderr)

    def flush(self) -> None:
        for channel in self.untracked:
            channel.flush()


class _BinaryStream(io.RawIOBase):
    """``sys.stdout.buffer`` of a proxy: bytes are decoded as UTF-8 and routed like text."""

    def __init__(self, text: TaskStream) -> None:
        super().__init__()
        self._text = text

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        payload = bytes(data)
        self._text.write_bytes(payload)
        return len(payload)


class TaskStream(io.TextIOBase):
    """The ``sys.stdout``/``sys.stderr`` of a worker: routes each write to the current task."""

    def __init__(self, index: int, router: OutputRouter, original: TextIO | None) -> None:
        super().__init__()
        self._index = index
        self._router = router
        self._original = original
        self._binary: _BinaryStream | None = None

    @property
    def name(self) -> str:
        return f"<skyward {STREAMS[self._index]}>"

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "strict"

    @property
    def buffer(self) -> _BinaryStream:
        if self._binary is None:
            self._binary = _BinaryStream(self)
        return self._binary

    @property
    def original(self) -> TextIO | None:
        return self._original

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        if self._original is None:
            raise io.UnsupportedOperation("fileno")
        return self._original.fileno()

    def write(self, text: str) -> int:
        if type(text) is not str:
            if not isinstance(text, str):
                raise TypeError(f"write() argument must be str, not {type(text).__name__}")
            text = str.__str__(text)
        redirect = _redirect.get()
        if redirect is not None:
            return redirect[self._index].write(text)
        task = current_task.get()
        if task is None:
            self._router.untracked[self._index].write(text)
        elif not task.muted[self._index]:
            task.channels[self._index].write(text)
        return len(text)

    def write_bytes(self, data: bytes) -> None:
        """What ``buffer.write`` was given: decoded by the channel it goes to (see
        :meth:`OutputChannel.write_bytes`), at once where there is none."""
        task = current_task.get()
        channel = None
        if _redirect.get() is None:
            if task is None:
                channel = self._router.untracked[self._index]
            elif not task.muted[self._index]:
                channel = task.channels[self._index]
        if isinstance(channel, OutputChannel):
            channel.write_bytes(data)
        else:
            self.write(data.decode("utf-8", "replace"))

    def flush(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------
# In-task output controls: sky.stdout(only=...), sky.stderr(only=...), sky.silent,
# sky.redirect_output(callback)
# ---------------------------------------------------------------------------------------------


class CallbackWriter(io.TextIOBase):
    """A text stream that hands each raw ``write()`` to ``callback`` (as the Python project does:
    ``print("x")`` gives ``"x"`` then ``"\\n"``) and keeps everything written for :meth:`getvalue`."""

    def __init__(self, callback: Callable[[str], Any]) -> None:
        super().__init__()
        self.callback = callback
        self._written: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            self._written.append(text)
            self.callback(text)
        return len(text)

    def getvalue(self) -> str:
        """Everything written so far."""
        return "".join(self._written)


_redirect: contextvars.ContextVar[tuple[CallbackWriter, CallbackWriter] | None] = contextvars.ContextVar(
    "skyward_redirect_output", default=None
)


@contextlib.contextmanager
def redirect_output(callback: Callable[[str], Any]) -> Iterator[tuple[CallbackWriter, CallbackWriter]]:
    """Route stdout and stderr to ``callback(text)`` (each raw write) inside the block; yields the two writers.

    Inside a worker only the current task's output is redirected (other tasks running at the same
    time are not affected); elsewhere ``sys.stdout``/``sys.stderr`` are swapped for the block.
    """
    writers = (CallbackWriter(callback), CallbackWriter(callback))
    if isinstance(sys.stdout, TaskStream) or isinstance(sys.stderr, TaskStream):
        token = _redirect.set(writers)
        try:
            yield writers
        finally:
            _redirect.reset(token)
            for writer in writers:
                writer.flush()
    else:
        with contextlib.redirect_stdout(writers[0]), contextlib.redirect_stderr(writers[1]):
            try:
                yield writers
            finally:
                for writer in writers:
                    writer.flush()


def _allowed(only: Only) -> bool:
    if only == "head":
        return instance_info().is_head
    if callable(only):
        return bool(only(instance_info()))
    raise ValueError(f'only= must be "head" or a callable taking an InstanceInfo, not {only!r}')


@contextlib.contextmanager
def _muted(streams: tuple[int, ...], only: Only | None) -> Iterator[None]:
    """Drop the given streams for the block when ``only`` says this worker must not print."""
    if only is not None:
        if not in_worker() or _allowed(only):
            yield
            return
    task: TaskContext | None = current_task.get()
    if task is not None:
        for index in streams:
            task.muted[index] += 1
        try:
            yield
        finally:
            for index in streams:
                task.muted[index] -= 1
        return
    if isinstance(sys.stdout, TaskStream) or isinstance(sys.stderr, TaskStream):
        # A thread the task started itself: its output cannot be told apart, so it is kept.
        yield
        return
    # Outside a worker: swap the process streams for a sink (only `silent` gets here).
    with contextlib.ExitStack() as stack:
        sink = io.StringIO()
        if 0 in streams:
            stack.enter_context(contextlib.redirect_stdout(sink))
        if 1 in streams:
            stack.enter_context(contextlib.redirect_stderr(sink))
        yield


def _filtering(fn: F, streams: tuple[int, ...], only: Only | None) -> F:
    # An async function returns its coroutine (or async generator) before any of it runs: the
    # filter has to be around the awaiting, not the call.
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def coroutine_wrapper(*args: Any, **kwargs: Any) -> Any:
            with _muted(streams, only):
                return await fn(*args, **kwargs)

        return coroutine_wrapper  # type: ignore[return-value]

    if inspect.isasyncgenfunction(fn):

        @functools.wraps(fn)
        async def async_generator_wrapper(*args: Any, **kwargs: Any) -> Any:
            inner = fn(*args, **kwargs)
            with _muted(streams, only):
                try:
                    async for item in inner:
                        yield item
                finally:
                    await inner.aclose()  # a stream stopped early: the task's own finally blocks run now

        return async_generator_wrapper  # type: ignore[return-value]

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator_wrapper(*args: Any, **kwargs: Any) -> Any:
            with _muted(streams, only):
                return (yield from fn(*args, **kwargs))

        return generator_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _muted(streams, only):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def stdout(only: Only = "head") -> Callable[[F], F]:
    """Decorator factory: keep the function's stdout only where ``only`` allows.

    ``only`` is ``"head"`` or a predicate ``Callable[[InstanceInfo], bool]``; elsewhere the output is
    dropped on the worker and never sent.
    """

    def decorate(fn: F) -> F:
        return _filtering(fn, (0,), only)

    return decorate


def stderr(only: Only = "head") -> Callable[[F], F]:
    """Decorator factory: keep the function's stderr only where ``only`` allows."""

    def decorate(fn: F) -> F:
        return _filtering(fn, (1,), only)

    return decorate


def silent(fn: F) -> F:
    """Bare decorator: drop all of the function's stdout and stderr."""
    return _filtering(fn, (0, 1), None)
