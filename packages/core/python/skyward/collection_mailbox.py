"""Answers a node's own tasks get from the copy of the collections it holds, one round trip
between nodes instead of two (docs/protocol.md, "Answered by the copy").

A strong write from a task on a node that does not hold the collections went task → head (which
applies it) → the copy's node (which takes it) → head (its ack) → task: two round trips between
nodes. In a pool of two nodes the copy's node is the task's own. So a task thread whose process
holds the copy channel to the same head marks its ``op`` ``"copy": true``; the head, when that node
holds its copy, puts the answer in the ``replicate`` frame that carries the write
(``"answers": [{"t": "answer", "id", "value"}, …]``, the ids of the task thread's connection) instead
of sending it on the task's connection once acked; the copy's thread takes the frame, acks it, and
hands each answer to the thread waiting for it here. The write is on both nodes before the task
learns of it, as before.

If the frame never arrives (the copy channel broke and was made again, or another node took the
copy), the head answers on the task's connection as it did before — once the answer may count as
acknowledged — so a task thread that marked its ``op`` waits on both: its connection to the head
and this mailbox (a socket pair's end it polls beside it). The copy may have answered already: a
thread keeps only the answer to the request it waits for now, so one that comes twice is taken once.
While it waits, the task thread reads the copy channel itself when no other thread does
(:mod:`skyward.collection_copy_node`): it takes the frame with its answer, and no other thread of
this process wakes (nor does the socket pair: the answer it delivers itself is in its place already).
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any, Dict, List, Tuple

from .collection_store import Answer


def answer_message(request_id: Any, answer: Answer) -> Dict[str, Any]:
    """``answer`` (``("value", v)`` or ``("error", type, message)``) as the link's frame."""
    if answer[0] == "value":
        return {"t": "answer", "id": request_id, "value": answer[1]}
    return {"t": "refused", "id": request_id, "type": answer[1], "message": answer[2]}


def message_answer(message: Dict[str, Any]) -> Answer:
    """An ``answer``/``refused`` message as the answer it carries."""
    if message.get("t") == "answer":
        return ("value", message.get("value"))
    return ("error", str(message.get("type") or "RuntimeError"), str(message.get("message") or ""))


class Waiting:
    """One task thread's place in the mailbox: the answers delivered to it and the socket pair that
    wakes it (its thread reads ``wakes``; the copy's thread writes ``waker``)."""

    __slots__ = ("answers", "wakes", "waker", "thread")

    def __init__(self) -> None:
        self.answers: Dict[Any, Answer] = {}
        #: the waiting thread (it needs no wake-up for an answer it delivers itself, reading the copy)
        self.thread = threading.get_ident()
        self.wakes, self.waker = socket.socketpair()
        self.wakes.setblocking(False)
        self.waker.setblocking(False)

    def drain(self) -> None:
        """Takes the wake-ups sent (a byte each, one per answer: one read takes them all)."""
        try:
            self.wakes.recv(64)
        except (BlockingIOError, InterruptedError):  # a wake-up with nothing sent: the loop looks again
            pass

    def close(self) -> None:
        self.wakes.close()
        self.waker.close()


class Mailbox:
    """This process's end of answers given by the copy (one per collections service: its copy
    channel and its task threads' connections name it by ``key`` in their handshakes, so the head
    gives the copy only answers for this process's threads)."""

    def __init__(self) -> None:
        #: names this process to the head (a worker started again on the same node is another)
        self.key = os.urandom(8).hex()
        #: the process whose copy channel delivers here (a process forked from it has no such thread)
        self.pid = os.getpid()
        #: the head the copy channel is connected to now (None: not connected), and the node's end
        #: of that connection (a ``collection_copy_node.NodeEnd``: a waiting task thread reads it)
        self.copy_address: Tuple[str, int] | None = None
        self.copy_end: Any = None
        self._lock = threading.Lock()
        self._waiting: Dict[Any, Waiting] = {}
        #: answers handed to a waiting thread (what the tests observe of this path)
        self.delivered = 0

    def copy_connected(self, address: Tuple[str, int] | None, end: Any = None) -> None:
        """The copy channel connected to the head at ``address`` (None: it ended); ``end`` is its
        node's end (``NodeEnd``)."""
        self.copy_address = address
        self.copy_end = end if address is not None else None

    def answers_from(self, address: Tuple[str, int]) -> bool:
        """Whether the copy channel of this process is connected to the head at ``address`` (so a task
        thread's operation may be answered by it)."""
        return self.copy_address == address and self.pid == os.getpid()

    def wait(self, request_id: Any, place: Waiting) -> None:
        with self._lock:
            self._waiting[request_id] = place

    def done(self, request_id: Any) -> None:
        with self._lock:
            self._waiting.pop(request_id, None)

    def deliver(self, answers: List[Any]) -> None:
        """The copy took the frame carrying ``answers`` (``answer``/``refused`` messages): each goes
        to the thread waiting for its request; one nobody waits for any more is dropped."""
        for message in answers:
            if type(message) is not dict:
                continue
            request_id = message.get("id")
            with self._lock:
                place = self._waiting.pop(request_id, None)
            if place is None:
                continue
            place.answers[request_id] = message_answer(message)
            self.delivered += 1
            if place.thread == threading.get_ident():
                continue  # the waiting thread reads the copy itself: it looks at its answers next
            try:
                place.waker.send(b"\0")
            except OSError:  # full: a wake-up is pending already; closed: the thread gave up
                pass


__all__ = ["Mailbox", "Waiting", "answer_message", "message_answer"]
