"""Where a stopped task's interrupt must not land: a thread-executor task is stopped by an exception
raised in its thread at its next bytecode (:class:`skyward.executors.TaskInterrupted`), wherever that
is. A task thread that does work for others while it waits for a collection's answer — reads the
copy channel and takes the head's frames (:mod:`skyward.collection_copy_node`) — must not be cut
off half-way through a frame (the copy would hold half a write, and the rest of the stream would
be lost). Inside :class:`held`, an interrupt sent to the thread waits, and is raised as the thread
leaves the outermost block. An interrupt is raised at most once: one that has landed (an
:class:`Interrupt` says so as it is made, in its thread) is not raised again, so a task that catches
it and carries on is not stopped a second time by its next ``held`` block.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Dict

_lock = threading.Lock()
#: threads inside a :class:`held` block: how deep
_inside: Dict[int, int] = {}
#: interrupts held for those threads (raised as they leave)
_owed: Dict[int, type[BaseException]] = {}
#: threads sent an interrupt that may not have been raised yet (until :func:`forget`), and its kind
_sent: Dict[int, type[BaseException]] = {}


class Interrupt(BaseException):
    """The base of interrupts sent with :func:`send`: made in the thread it lands in, it marks the
    interrupt raised (so a later :class:`held` block does not raise it again)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        _sent.pop(threading.get_ident(), None)  # one dict operation: atomic, no lock (it may be held here)


def _set_async_exception(thread_id: int, exception: type[BaseException] | None) -> int:
    """Raise ``exception`` in the thread at its next bytecode (``None`` withdraws a pending one);
    returns how many threads it reached."""
    exception_object = ctypes.py_object(exception) if exception is not None else None
    return ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), exception_object)


def send(thread_id: int, exception: type[BaseException]) -> bool:
    """Raises ``exception`` in the thread ``thread_id`` at its next bytecode, or as it leaves the
    :class:`held` block it is in; whether the thread was reached."""
    with _lock:
        if thread_id in _inside:
            _owed[thread_id] = _sent[thread_id] = exception
            return True
        # Noted before it is sent: it may land (and say so) before this call returns.
        _sent[thread_id] = exception
        if _set_async_exception(thread_id, exception) != 1:
            _set_async_exception(thread_id, None)
            _sent.pop(thread_id, None)
            return False
        return True


def forget(thread_id: int) -> None:
    """The thread's task is over: an interrupt sent and not raised yet is withdrawn, never to land in
    what the thread runs next."""
    with _lock:
        _owed.pop(thread_id, None)
        if _sent.pop(thread_id, None) is not None:
            _set_async_exception(thread_id, None)


class held:
    """Interrupts sent to this thread inside the block are raised as it leaves the outermost one.
    One sent before the block and not raised yet is withdrawn as the block starts and raised as it
    ends (one raised already, an :class:`Interrupt` the task caught, is not raised again; another
    kind of exception cannot say it was raised, and is raised once more)."""

    __slots__ = ()

    def __enter__(self) -> None:
        me = threading.get_ident()
        with _lock:
            depth = _inside.get(me, 0)
            _inside[me] = depth + 1
            if not depth and me in _sent and me not in _owed:
                _set_async_exception(me, None)
                _owed[me] = _sent[me]

    def __exit__(self, *_: Any) -> None:
        me = threading.get_ident()
        with _lock:
            depth = _inside[me] - 1
            if depth:
                _inside[me] = depth
                return
            del _inside[me]
            owed = _owed.pop(me, None)
            if owed is not None:
                _set_async_exception(me, owed)  # raised at the thread's next bytecode: outside the block


__all__ = ["Interrupt", "forget", "held", "send"]
