"""The collections' second copy: the head replicates every acknowledged write to one other node
before it answers, so losing the head loses nothing acknowledged (docs/protocol.md, "Distributed
collections").

Replication is by state: each operation that changes a collection marks it, and at the end of the
head's loop turn the marked collections' whole contents go to the replica in one ``replicate``
frame (``{"t": "replicate", "seq", "full", "states": [...]}``); the answers of that turn are held
until the replica's ``{"t": "acked", "seq"}``. A replica that comes gets everything first
(``full``). Barriers are not replicated (a round in progress is waiters, not data), nor waits.

The frames travel on the copy channel (:mod:`skyward.collection_channel`), whose threads call
``acked`` and ``gone``; a task thread on the head applies its own operations here too. So every
entry point takes the store's lock, an operation applied off the loop sends its frame at once (the
loop's wait for the end of its turn, to send one frame for many, is the loop's), and an answer
whose caller lives on the loop is handed to the loop (``threadsafe`` callers are answered where the
ack is read).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Callable, Dict, List, Set, Tuple

from .collection_store import Answer, CollectionStore, key_of, on_loop

#: the operations that change a collection (what a write is)
WRITES = {
    "dict": {"set", "pop", "update", "clear"},
    "set": {"add", "discard"},
    "counter": {"increment", "decrement", "reset"},
    "queue": {"put", "get"},
    "lock": {"acquire", "release"},
}

Send = Callable[[Dict[str, Any]], None]


def state_of(store: CollectionStore, kind: str, name: str) -> Dict[str, Any]:
    """One collection's whole contents, as a ``replicate`` frame carries it."""
    state: Dict[str, Any] = {"kind": kind, "name": name}
    if kind == "dict":
        state["entries"] = [[key, value] for key, value in store.dicts.get(name, {}).values()]
    elif kind == "set":
        state["values"] = list(store.sets.get(name, {}).values())
    elif kind == "counter":
        state["value"] = store.counters.get(name, 0)
    elif kind == "queue":
        state["items"] = list(store.queues.get(name, ()))
    elif kind == "lock":
        lock = store.locks.get(name)
        state["holder"] = lock.holder if lock is not None else None
    return state


def everything(store: CollectionStore) -> List[Dict[str, Any]]:
    names: List[Tuple[str, str]] = [("dict", name) for name in store.dicts] + [("set", name) for name in store.sets]
    names += [("counter", name) for name in store.counters] + [("queue", name) for name in store.queues]
    names += [("lock", name) for name in store.locks]
    return [state_of(store, kind, name) for kind, name in names]


def load(store: CollectionStore, state: Dict[str, Any]) -> None:
    """Puts one collection's contents (a ``replicate`` state) into ``store``."""
    kind, name = state.get("kind"), state.get("name")
    if type(name) is not str:
        return
    if kind == "dict":
        store.dicts[name] = {key_of(key): (key, value) for key, value in state.get("entries") or []}
    elif kind == "set":
        store.sets[name] = {key_of(value): value for value in state.get("values") or []}
    elif kind == "counter":
        store.counters[name] = state.get("value") or 0
    elif kind == "queue":
        store.queues[name] = deque(state.get("items") or [])
    elif kind == "lock":
        store.set_holder(name, state.get("holder"))


class Replication:
    """The head's store with its copy: operations are applied to ``store``, and their answers held
    until what they changed is on the replica (which node that is, and what waits for its ack)."""

    def __init__(self, store: CollectionStore, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self._store = store
        self._loop = loop
        self.lock = store.lock
        self._replica: Send | None = None
        #: nodes that offered to be the replica, in the order they came (the next one if it goes)
        self._candidates: List[Send] = []
        self._dirty: Set[Tuple[str, str]] = set()
        self._held: List[Tuple[Callable[[Answer], None], Answer]] = []
        self._waiting: Dict[int, List[Tuple[Callable[[Answer], None], Answer]]] = {}
        self._seq = 0
        self._flush_scheduled = False
        #: answers released off the loop for callers on it, and whether the loop was woken for them
        self._to_loop: List[Tuple[Callable[[Answer], None], Answer]] = []
        self._loop_woken = False

    def offer(self, send: Send) -> None:
        """A node connected and can hold the copy."""
        with self.lock:
            self._candidates.append(send)
            if self._replica is None:
                self._choose()

    def gone(self, send: Send) -> None:
        """A node's connection closed."""
        with self.lock:
            self._gone(send)

    def _gone(self, send: Send) -> None:
        if send in self._candidates:
            self._candidates.remove(send)
        if send is self._replica:
            self._replica = None
            # Nothing can be acknowledged by it any more: what waited on it is answered now
            # (held by this node alone until the next replica has everything).
            for seq in sorted(self._waiting):
                for reply, answer in self._waiting.pop(seq):
                    reply(answer)
            self._choose()

    def _choose(self) -> None:
        if self._candidates:
            self._replica = self._candidates[0]
            self._send(full=True)

    def apply(self, owner: str, request: Any, reply: Callable[[Answer], None], request_id: Any,
              threadsafe: bool = False) -> None:
        """Applies ``request``; ``reply`` gets the answer once the replica holds what it changed (on
        the loop, unless ``threadsafe``: then on whichever thread has it)."""
        with self.lock:
            if type(request) is list and len(request) >= 3 and request[2] in WRITES.get(request[0], ()):
                self._dirty.add((request[0], request[1]))
            self._store.apply(owner, request, self.answer(reply, threadsafe), request_id)

    def cancel(self, owner: str, request_id: Any, reason: str) -> None:
        with self.lock:
            self._store.cancel(owner, request_id, reason)

    def owner_ended(self, owner: str, then: Callable[[], None] | None = None) -> None:
        """``owner`` ended: its locks are released; ``then()`` once that is on the replica."""
        with self.lock:
            self._dirty.update(("lock", name) for name in self._store.held_by(owner))
            self._store.owner_ended(owner)
            if then is not None:
                self.answer(lambda _answer: then())(("value", None))

    def answer(self, reply: Callable[[Answer], None], threadsafe: bool = False) -> Callable[[Answer], None]:
        """``reply`` held until what changed before it is on the replica."""
        deliver = reply if threadsafe else self._on_loop(reply)

        def held(answer: Answer) -> None:
            # Nothing changed and nothing waits for the replica (a read): there is nothing to copy.
            if self._replica is None or not (self._dirty or self._waiting or self._held):
                deliver(answer)
                return
            self._held.append((deliver, answer))
            if not on_loop(self._loop):
                self._flush()  # a task's thread: its frame goes now, no loop on the way
            elif not self._flush_scheduled:
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)
        return held

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
            self._flush_held()

    def _flush_held(self) -> None:
        self._flush_scheduled = False
        if not self._held and not self._dirty:
            return
        if self._replica is None:
            held, self._held = self._held, []
            for reply, answer in held:
                reply(answer)
            return
        self._send(full=False)

    def _send(self, full: bool) -> None:
        assert self._replica is not None
        self._seq += 1
        states = everything(self._store) if full else [state_of(self._store, kind, name) for kind, name in self._dirty]
        self._dirty.clear()
        self._waiting[self._seq], self._held = self._held, []
        self._replica({"t": "replicate", "seq": self._seq, "full": full, "states": states})

    def acked(self, send: Send, seq: Any) -> None:
        with self.lock:
            if send is not self._replica or type(seq) is not int:
                return
            for done in [each for each in sorted(self._waiting) if each <= seq]:
                for reply, answer in self._waiting.pop(done):
                    reply(answer)


__all__ = ["Replication", "WRITES", "everything", "load", "state_of"]
