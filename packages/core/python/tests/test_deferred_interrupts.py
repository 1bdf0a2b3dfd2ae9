"""A stopped thread task's interrupt (skyward.deferred_interrupts with the executor's TaskInterrupted):
held inside a ``held`` block, raised as the thread leaves it, and never more than once — code that
catches it and carries on runs on (docs/protocol.md, "Cancellation")."""

from __future__ import annotations

import threading
import time
from typing import Any, List

from skyward import deferred_interrupts
from skyward.executors import TaskInterrupted


def in_a_thread(body: Any) -> List[str]:
    """Runs ``body(events)`` on a thread of its own (as a slot's), its turn closed after it."""
    events: List[str] = []

    def run() -> None:
        try:
            body(events)
        except TaskInterrupted:
            events.append("raised at the end")
        finally:
            deferred_interrupts.forget(threading.get_ident())

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return events


def stop(thread_id: int) -> None:
    """Sends the interrupt from another thread, as the worker's loop does."""
    sent: List[bool] = []
    sender = threading.Thread(target=lambda: sent.append(deferred_interrupts.send(thread_id, TaskInterrupted)))
    sender.start()
    sender.join(30)
    assert sent == [True]


def spin(seconds: float) -> None:
    """Python bytecodes for a while (where an interrupt owed to the thread would land)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_an_interrupt_sent_inside_a_held_block_is_raised_as_the_thread_leaves_it() -> None:
    def body(events: List[str]) -> None:
        try:
            with deferred_interrupts.held():
                stop(threading.get_ident())
                spin(0.05)
                events.append("held block finished")
            spin(0.5)
            events.append("not raised")
        except TaskInterrupted:
            events.append("raised after the block")

    assert in_a_thread(body) == ["held block finished", "raised after the block"]


def test_an_interrupt_caught_by_the_task_is_not_raised_again_by_its_next_held_block() -> None:
    def body(events: List[str]) -> None:
        try:
            stop(threading.get_ident())
            spin(0.5)
            events.append("not raised")
        except TaskInterrupted:
            events.append("caught")
        # The task carries on, and uses a collection (whose operations hold interrupts).
        with deferred_interrupts.held():
            spin(0.05)
        spin(0.5)
        events.append("carried on")

    assert in_a_thread(body) == ["caught", "carried on"]
