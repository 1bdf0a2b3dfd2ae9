"""The collections' second copy: the head replicates every acknowledged write to one other node
before it answers, so losing the head loses nothing acknowledged (docs/protocol.md, "Distributed
collections").

Replication is by state: each operation that changes a collection marks it and notes what it
changed, and at the end of the head's loop turn what changed in the marked collections goes to the
replica in one ``replicate`` frame (``{"t": "replicate", "epoch", "seq", "full", "states": [...]}``;
the keys written, not the whole dict: :mod:`skyward.collection_delta`); the answers of that turn
are held until the replica's ``{"t": "acked", "seq"}`` (or its ``{"t": "superseded", "epoch",
"addr"?, "port"?}``: it knows a newer holder, and this one stops acknowledging). A replica that
comes gets everything first (``full``). Barriers are not replicated (a round in progress is
waiters, not data), nor waits.

The frames travel on the copy channel (:mod:`skyward.collection_channel`), whose threads call
``acked`` and ``gone``; task threads apply their own operations here too. So every entry point
takes the store's lock, an operation applied off the loop queues its frame at once (the loop's
wait for the end of its turn, to send one frame for many, is the loop's; the channel's sender
thread writes the queue outside the lock, so a replica that stopped reading never blocks the
head), and an answer whose caller lives on the loop is handed to the loop (``threadsafe`` callers
are answered where the ack is read).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, List, Set, Tuple

from . import deferred_interrupts
from .collection_channel import writing_here
from .collection_frames import one_replicate, pack
from .collection_delta import Changes, everything, load, state_of
from .collection_mailbox import answer_message
from .collection_store import Answer, CollectionStore, ended, on_loop

#: the operations that change a collection (what a write is)
WRITES = {
    "dict": {"set", "pop", "update", "clear"},
    "set": {"add", "discard"},
    "counter": {"increment", "decrement", "reset"},
    "queue": {"put", "get"},
    "lock": {"acquire", "release"},
}

#: the writes :meth:`Replication._fast` may take, by operation: the kind they are of
_FAST_OPS = {"increment": "counter", "decrement": "counter", "reset": "counter", "acquire": "lock",
             "release": "lock"}

Send = Callable[[Dict[str, Any]], None]


class _Delivery:
    """The answer of an operation :meth:`Replication.apply_here` applies: ``reply`` gets it (or the
    copy gave it: :meth:`settle`), and the thread reading the copy's acks for it is woken."""

    __slots__ = ("reply", "forward", "answered", "channels")

    def __init__(self, reply: Callable[[Answer], None], forward: Tuple[str, Any] | None) -> None:
        self.reply = reply
        #: the caller's mailbox and request id, when the copy may answer it
        self.forward = forward
        self.answered = False
        self.channels: List[Any] = []

    def __call__(self, answer: Answer) -> None:
        self.reply(answer)
        self.settle()

    def settle(self) -> None:
        self.answered = True
        for channel in self.channels:
            channel.wake()


class _Forwarded:
    """A held answer that went with the copy's frame ``via``: the copy gives it once it took the
    frame; called (the answer sent the usual way) only when that frame may not have been taken."""

    __slots__ = ("delivery", "via")

    def __init__(self, delivery: _Delivery, via: Send) -> None:
        self.delivery = delivery
        self.via = via

    def __call__(self, answer: Answer) -> None:
        self.delivery(answer)


def _is_write(request: Any) -> bool:
    return (type(request) is list and len(request) >= 3 and type(request[0]) is str and type(request[1]) is str
            and request[2] in WRITES.get(request[0], ()))


class Replication:
    """The head's store with its copy: operations are applied to ``store``, and their answers held
    until what they changed is on the replica (which node that is, and what waits for its ack).

    ``epoch`` is the authority's term: the pool's first head holds epoch 0, each promotion raises it,
    and every ``replicate`` frame carries it, so a node that knows a newer holder refuses an older
    one's frames (answered ``superseded``). A superseded head acknowledges nothing from then on:
    what it held is answered with an error saying where the collections are now.

    Once a node held the copy, the head never acknowledges alone on a hunch: a replica whose
    connection closed may be alive and promoted by the client, so what waits on it stays unanswered
    until its node's loss is confirmed (:meth:`node_lost`, the client's verdict) or another node
    has everything (its ack of a ``full`` frame)."""

    def __init__(self, store: CollectionStore, loop: asyncio.AbstractEventLoop, epoch: int = 0) -> None:
        self.store = store
        self._store = store
        self._loop = loop
        self.lock = store.lock
        self.epoch = epoch
        self._replica: Send | None = None
        self._replica_node: str | None = None
        #: nodes that offered to be the replica, in the order they came (the next one if it goes)
        self._candidates: List[Tuple[Send, str | None]] = []
        #: nodes whose copy went with their connection, their loss not confirmed yet
        self._unconfirmed: Set[str | None] = set()
        #: nodes the client said are lost (a node of that rank that offers again is a new one)
        self._lost: Set[str] = set()
        self._dirty: Set[Tuple[str, str]] = set()
        #: what the writes since the last frame changed (the next ``replicate`` frame carries it)
        self._changes = Changes(store)
        self._held: List[Tuple[Callable[[Answer], None], Answer]] = []
        self._waiting: Dict[int, List[Tuple[Callable[[Answer], None], Answer]]] = {}
        self._seq = 0
        self._full_seq = 0
        self._flush_scheduled = False
        #: store calls in progress on this thread (the lock is held), and whether a frame is owed after them
        self._store_calls = 0
        self._flush_owed = False
        #: answers released off the loop for callers on it, and whether the loop was woken for them
        self._to_loop: List[Tuple[Callable[[Answer], None], Answer]] = []
        self._loop_woken = False
        #: the error every operation gets once a newer holder superseded this one (None: not superseded)
        self.superseded: str | None = None
        #: answers sent with the copy's frames for the copy's node to give (collection_mailbox.py)
        self.forwarded = 0

    def offer(self, send: Send, node: str | None = None) -> None:
        """A node connected and can hold the copy."""
        with self.lock:
            if node is not None:
                self._lost.discard(node)
            self._candidates.append((send, node))
            if self._replica is None:
                self._choose()

    def gone(self, send: Send) -> None:
        """A node's connection closed: if it held the copy, what waits on it waits for its loss to
        be confirmed or for the next replica to have everything."""
        with self.lock:
            self._candidates = [each for each in self._candidates if each[0] is not send]
            if send is self._replica:
                self._replica = None
                if self._replica_node not in self._lost:
                    self._unconfirmed.add(self._replica_node)
                self._choose()
                self._release_if_alone()

    def expect(self, nodes: List[str]) -> None:
        """The pool's other ``nodes``, as this head starts: until one of them holds the copy (or the
        client says it is lost, or :meth:`stop_expecting`), writes are not answered alone, so a head
        lost in the pool's first moments, before any node connected, loses nothing acknowledged."""
        with self.lock:
            if self._replica is None and self.superseded is None:
                self._unconfirmed.update(node for node in nodes if node not in self._lost)

    def stop_expecting(self, nodes: List[str]) -> bool:
        """``nodes`` were expected and none came to hold the copy in time: they no longer count.
        Whether writes were being held for them (they are answered now, by this node alone)."""
        with self.lock:
            late = self._unconfirmed & set(nodes)
            self._unconfirmed -= late
            held = bool(late) and self._replica is None
            self._release_if_alone()
            return held

    def node_lost(self, node: str) -> None:
        """The client's verdict: ``node`` is gone (its worker's connection to the client was lost).
        Its copy no longer counts; if no node holds one, this node answers alone until one does."""
        with self.lock:
            self._lost.add(node)
            self._unconfirmed.discard(node)
            self._candidates = [each for each in self._candidates if each[1] != node]
            if self._replica is not None and self._replica_node == node:
                self._replica = None
                self._choose()
            self._release_if_alone()

    def supersede(self, epoch: Any, where: str) -> bool:
        """A holder of a newer epoch has the collections (``where`` says how to reach it): every
        pending and later operation is refused. Whether it was not superseded before (the same epoch
        again only says where better)."""
        with self.lock:
            if type(epoch) is not int or epoch < self.epoch or (epoch == self.epoch and self.superseded is None):
                return False
            first = self.superseded is None
            self.epoch = epoch
            self.superseded = (f"the collections moved: a newer holder (epoch {epoch}) {where}; this node's "
                               "copy is superseded and did not acknowledge this operation")
            if not first:
                return False
            self._replica = None
            self._candidates.clear()
            pending = [each for seq in sorted(self._waiting) for each in self._waiting[seq]] + self._held
            self._waiting.clear()
            self._held = []
            for reply, _answer in pending:
                reply(("error", "RuntimeError", self.superseded))
            for owner in self._store.owners():  # blocked waits are answered (through answer(): refused)
                self._store.owner_ended(owner)
            return True

    def _choose(self) -> None:
        if self._candidates and self.superseded is None:
            self._replica, self._replica_node = self._candidates[0]
            self._send(full=True)

    def _alone(self) -> bool:
        """Whether an answer may go out with no replica's ack: none holds a copy that may count."""
        return self._replica is None and not self._unconfirmed

    def _release_if_alone(self) -> None:
        if not self._alone():
            return
        pending = [each for seq in sorted(self._waiting) for each in self._waiting[seq]] + self._held
        self._waiting.clear()
        self._held = []
        for reply, answer in pending:
            reply(answer)

    def apply(self, owner: str, request: Any, reply: Callable[[Answer], None], request_id: Any,
              threadsafe: bool = False) -> None:
        """Applies ``request``; ``reply`` gets the answer once the replica holds what it changed (on
        the loop, unless ``threadsafe``: then on whichever thread has it).

        On a task's thread (the head node's tasks apply their operations themselves) a stopped
        task's interrupt waits until the operation is applied and noted for the copy
        (:mod:`skyward.deferred_interrupts`): landing between the two, the replica would miss a
        write the head holds."""
        with deferred_interrupts.held():
            with self.lock:
                if self.superseded is not None or self._store.has_ended(owner):  # nothing to copy either
                    refusal = ended(owner) if self.superseded is None else ("error", "RuntimeError", self.superseded)
                    (reply if threadsafe else self._on_loop(reply))(refusal)
                    return
                write = _is_write(request)
                if write:
                    self._dirty.add((request[0], request[1]))
                # While no node holds the copy, the next one gets everything: no change is owed.
                noting = write and self._replica is not None
                before = self._changes.before(request) if noting else None
                self._store_call_starts()
                try:
                    self._store.apply(owner, request, self.answer(reply, threadsafe), request_id)
                    if noting:
                        self._changes.after(request, before)
                finally:
                    self._store_call_ends()

    def apply_here(self, owner: str, request: Any, reply: Callable[[Answer], None], request_id: Any,
                   forward: Tuple[str, Any] | None = None) -> None:
        """:meth:`apply` (``threadsafe``) for a thread that waits for the answer anyway (a task's, or
        the one serving another node's task): the copy's frame is written from this thread once the
        store's lock is let go, and the copy's ack read by this thread while no other does, so the
        answer costs no hand-off between threads; returns once ``reply`` has it, or once there is no
        ack to read for it (a wait for a lock held by another, a copy's connection that ended:
        ``reply`` then gets it where it comes, as with :meth:`apply`).

        ``forward``: the caller's mailbox and request id (collection_mailbox.py): when that mailbox's
        process holds the copy, the answer goes with the copy's frame and the copy gives it; ``reply``
        gets it only if that frame may not have been taken (its channel ended, a newer holder)."""
        if self._fast(owner, request, reply, request_id, forward):
            return
        delivery = _Delivery(reply, forward)
        claimed = False
        with writing_here():
            self.apply(owner, request, delivery, request_id, threadsafe=True)
            channel = getattr(self._replica, "__self__", None)  # HeadChannel.send is its bound method
            if delivery.answered or not hasattr(channel, "wait_acks"):
                return
            delivery.channels.append(channel)
            # Before the frame is written: the ack may come back before the write returns.
            claimed = channel.claim_reading()
        channel.wait_acks(lambda: delivery.answered, claimed)

    def _fast(self, owner: str, request: Any, reply: Callable[[Answer], None], request_id: Any,
              forward: Tuple[str, Any] | None) -> bool:
        """A counter's write, a free lock's acquire or a release no task waits on, by the only writer
        on an idle copy channel, the lean way: applied under the store's lock, its compact frame
        packed and written here, its ack read by this thread with no decoder; the replication's
        bookkeeping (``_seq``, ``_waiting``) is the general path's, so a copy lost or replaced, a
        newer holder, an ack read by another way answer it as they answer any write. ``forward``
        naming the copy's mailbox: the answer goes with the frame, as :meth:`_forward` sends it (a
        task of the node holding the copy). False (nothing done) when it does not apply: the
        general path takes it."""
        if (type(request) is not list or not 3 <= len(request) <= 4 or type(request[2]) is not str
                or request[0] != _FAST_OPS.get(request[2]) or type(request[1]) is not str
                or len(request[1]) > 16000 or type(owner) is not str or len(owner) > 16000):
            return False
        channel = getattr(self._replica, "__self__", None)
        if not hasattr(channel, "take_idle"):
            return False
        kind, name, op = request[0], request[1], request[2]
        answers: List[Answer] = []
        with deferred_interrupts.held():
            with self.lock:
                if (self.superseded is not None or getattr(self._replica, "__self__", None) is not channel
                        or self._waiting or self._held or self._dirty or self._store_calls
                        or self._store.has_ended(owner) or not self._lock_at_once(kind, name, op, owner)
                        or (forward is not None and forward[0] != channel.mailbox) or not channel.take_idle()):
                    return False
                try:
                    self._store.apply(owner, request, answers.append, request_id)
                    answer = answers[0]  # answered at once: no wait (``_lock_at_once``)
                except BaseException:
                    channel.let_go()
                    raise
                if kind == "counter":
                    value = self._store.counters.get(name, 0)
                    fits = -(1 << 63) <= value < 1 << 63
                else:
                    value, fits = self._store.locks[name].holder, True
                if answer[0] != "value" or not fits:
                    # Refused (a bad amount: nothing changed), or a value no compact frame carries.
                    channel.let_go()
                    if answer[0] == "value":
                        self._dirty.add((kind, name))
                        self.answer(reply, threadsafe=True)(answer)  # the general path sends it
                    else:
                        reply(answer)
                    return True
                self._seq += 1
                seq = self._seq
                delivery = _Delivery(reply, forward)
                delivery.channels.append(channel)
                if forward is None:
                    self._waiting[seq] = [(delivery, answer)]
                    channel.write_now(one_replicate(self.epoch, seq, kind, name, value))
                else:  # the bytes _send packs for this write and its answer
                    state = {"kind": kind, "name": name, "value" if kind == "counter" else "holder": value}
                    self._waiting[seq] = [(_Forwarded(delivery, self._replica), answer)]  # type: ignore[list-item]
                    self.forwarded += 1
                    channel.write_now(pack({"t": "replicate", "epoch": self.epoch, "seq": seq, "full": False,
                                            "states": [state], "answers": [answer_message(forward[1], answer)]}))
        channel.wait_acks(lambda: delivery.answered, claimed=True, seq=seq)
        return True

    def _lock_at_once(self, kind: str, name: str, op: str, owner: str) -> bool:
        """Whether a lock's ``op`` answers at once and changes only that lock (a counter's always
        does): an acquire of a free lock, a release by its holder with nobody waiting — anything
        else (a wait, a hand-over to a waiter, a refusal) is the general path's."""
        if kind != "lock":
            return True
        lock = self._store.locks.get(name)
        if op == "acquire":
            return lock is None or lock.holder is None
        return lock is not None and lock.holder == owner and not lock.waiters

    def cancel(self, owner: str, request_id: Any, reason: str) -> None:
        with self.lock:
            self._store.cancel(owner, request_id, reason)

    def owner_ended(self, owner: str, then: Callable[[], None] | None = None) -> None:
        """``owner`` ended: its locks are released; ``then()`` once that is on the replica."""
        with self.lock:
            released = self._store.held_by(owner)
            self._dirty.update(("lock", name) for name in released)
            self._store_call_starts()
            try:
                self._store.owner_ended(owner)
            finally:
                self._store_call_ends()
            if then is not None:
                self.answer(lambda _answer: then())(("value", None))
            elif released:  # nobody waits on it, but the copy must not keep the locks held
                self.answer(lambda _answer: None, threadsafe=True)(("value", None))

    def answer(self, reply: Callable[[Answer], None], threadsafe: bool = False) -> Callable[[Answer], None]:
        """``reply`` held until what changed before it is on the replica."""
        deliver = reply if threadsafe else self._on_loop(reply)

        def held(answer: Answer) -> None:
            if self.superseded is not None:
                deliver(("error", "RuntimeError", self.superseded))
                return
            # Nothing changed and nothing waits for the replica (a read): there is nothing to copy.
            if self._alone() or not (self._dirty or self._waiting or self._held):
                deliver(answer)
                return
            self._held.append((deliver, answer))
            if not on_loop(self._loop):
                # A task's thread: its frame goes now, no loop on the way — once the store's call
                # that answered is done (an ended owner's waits are answered before its locks go).
                if self._store_calls:
                    self._flush_owed = True
                else:
                    self._flush()
            elif not self._flush_scheduled:
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)
        return held

    def _store_call_starts(self) -> None:
        self._store_calls += 1

    def _store_call_ends(self) -> None:
        self._store_calls -= 1
        if not self._store_calls and self._flush_owed:
            self._flush_owed = False
            self._flush()

    def _on_loop(self, reply: Callable[[Answer], None]) -> Callable[[Answer], None]:
        def deliver(answer: Answer) -> None:
            if on_loop(self._loop):
                reply(answer)
                return
            # One wake-up of the loop for all the answers one ack releases.
            self._to_loop.append((reply, answer))
            if not self._loop_woken:
                self._loop_woken = True
                self._loop.call_soon_threadsafe(self._answer_on_loop)
        return deliver

    def _answer_on_loop(self) -> None:
        with self.lock:
            self._loop_woken = False
            answers, self._to_loop = self._to_loop, []
        for reply, answer in answers:
            reply(answer)

    def _flush(self) -> None:
        with self.lock:
            self._flush_scheduled = False
            if not self._held and not self._dirty:
                return  # sent already (by a task's thread)
            if self._replica is None:
                self._release_if_alone()  # else held until the loss is confirmed or a replica has everything
                return
            self._send(full=False)

    def _send(self, full: bool) -> None:
        assert self._replica is not None
        self._seq += 1
        if full:
            self._full_seq = self._seq
        if full:
            states = everything(self._store)
            self._changes.forget()
        else:
            states = self._changes.states(self._dirty)
        self._dirty.clear()
        frame = {"t": "replicate", "epoch": self.epoch, "seq": self._seq, "full": full, "states": states}
        answers = self._forward(self._held)
        if answers:
            frame["answers"] = answers
        self._waiting[self._seq], self._held = self._held, []
        self._replica(frame)

    def _forward(self, held: List[Tuple[Callable[[Answer], None], Answer]]) -> List[Dict[str, Any]]:
        """The answers in ``held`` the copy's node gives its own tasks (marked :class:`_Forwarded`)."""
        assert self._replica is not None
        mailbox = getattr(getattr(self._replica, "__self__", None), "mailbox", None)
        if mailbox is None:
            return []
        answers = []
        for index, (reply, answer) in enumerate(held):
            forward = reply.forward if type(reply) is _Delivery else None
            if forward is not None and forward[0] == mailbox:
                answers.append(answer_message(forward[1], answer))
                held[index] = (_Forwarded(reply, self._replica), answer)  # type: ignore[arg-type]
        self.forwarded += len(answers)
        return answers

    def acked(self, send: Send, seq: Any) -> None:
        with self.lock:
            if send is not self._replica or type(seq) is not int:
                return
            if seq >= self._full_seq:
                # The replica holds everything: the copies that went with their connections no longer count.
                self._unconfirmed.clear()
            for done in [each for each in sorted(self._waiting) if each <= seq]:
                for reply, answer in self._waiting.pop(done):
                    if type(reply) is _Forwarded and reply.via is send:
                        reply.delivery.settle()  # the copy took the frame and gave the answer
                    else:
                        reply(answer)


__all__ = ["Replication", "WRITES", "everything", "load", "state_of"]
