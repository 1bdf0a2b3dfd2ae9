"""Tasks for stopping running tasks on the thread executor (shared state: one worker process)."""

from __future__ import annotations

import threading
import time

_progress: dict[str, dict[str, float]] = {}


def spin(key: str, seconds: float = 30.0) -> str:
    """A pure-Python loop: counts until stopped, records its thread's CPU time, and when it ended."""
    state = _progress.setdefault(key, {"count": 0, "ended": 0.0})
    state["thread"] = threading.get_ident()
    deadline = time.monotonic() + seconds
    started = time.thread_time()
    try:
        while time.monotonic() < deadline:
            state["count"] += 1
            state["cpu"] = time.thread_time() - started
        return "finished"
    finally:
        state["ended"] = time.monotonic()


def progress(key: str) -> dict[str, float]:
    """How far ``spin(key)`` got, and ``ended`` (monotonic; 0 while it runs) — read at ``now``."""
    return {**_progress.get(key, {}), "now": time.monotonic()}


def swallow_exception(key: str) -> str:
    """A loop whose ``except Exception`` must not swallow the interrupt."""
    state = _progress.setdefault(key, {"count": 0, "ended": 0.0})
    try:
        while True:
            try:
                state["count"] += 1
            except Exception:
                pass
    finally:
        state["ended"] = time.monotonic()


def busy(seconds: float) -> dict[str, object]:
    """Runs Python code for ``seconds``, then says which thread ran it."""
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
    return {"thread": threading.current_thread().name, "ident": threading.get_ident()}


def sleep_then_mark(key: str, seconds: float) -> str:
    """Inside a C call (``time.sleep``) an interrupt waits until the call returns."""
    state = _progress.setdefault(key, {"count": 0, "ended": 0.0})
    try:
        time.sleep(seconds)
        state["count"] += 1  # never reached when interrupted
        return "slept"
    finally:
        state["ended"] = time.monotonic()


def slot_threads() -> list[str]:
    """The names of the live slot threads (a stopped task's thread must not linger)."""
    return sorted(thread.name for thread in threading.enumerate() if thread.name.startswith("skyward-slot-"))

