"""What a ``replicate`` frame carries of each collection (docs/protocol.md, "Distributed
collections"): everything for a new replica (``full``), then only what changed.

A write to a dict or a set copies the keys it wrote or removed (their values as the head holds them
when the frame goes), a queue the number of items taken from its front and the items added at its
back, a counter its value, a lock its holder. A replica holding what the head held at the previous
frame ends up holding what the head holds at this one:

- a dict's or set's key not written since is unchanged on both; one written is sent as the head
  holds it now (present with its stored key and value, or removed); a ``clear`` since clears the
  replica's first, and every key present after it was written after it;
- a queue is first in, first out on the head: every item it ever held is its contents at the
  previous frame followed by the items added since, and each take removed the oldest, so its
  contents now are that sequence less the first ``popped``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Dict, List, Tuple

from .collection_store import CollectionStore, key_of


def state_of(store: CollectionStore, kind: str, name: str) -> Dict[str, Any]:
    """One collection's whole contents, as a ``full`` frame carries it."""
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
    """Puts one collection's state (whole, or a ``"delta": true`` change) into ``store``."""
    kind, name = state.get("kind"), state.get("name")
    if type(name) is not str:
        return
    if state.get("delta") is True:
        _load_change(store, kind, name, state)
    elif kind == "dict":
        store.dicts[name] = {key_of(key): (key, value) for key, value in state.get("entries") or []}
    elif kind == "set":
        store.sets[name] = {key_of(value): value for value in state.get("values") or []}
    elif kind == "counter":
        store.counters[name] = state.get("value") or 0
    elif kind == "queue":
        store.queues[name] = deque(state.get("items") or [])
    elif kind == "lock":
        store.set_holder(name, state.get("holder"))


def _load_change(store: CollectionStore, kind: Any, name: str, state: Dict[str, Any]) -> None:
    if kind == "dict":
        entries = store.dicts.setdefault(name, {})
        if state.get("clear") is True:
            entries.clear()
        for key in state.get("removed") or []:
            entries.pop(key_of(key), None)
        for key, value in state.get("entries") or []:
            entries[key_of(key)] = (key, value)
    elif kind == "set":
        members = store.sets.setdefault(name, {})
        for value in state.get("removed") or []:
            members.pop(key_of(value), None)
        for value in state.get("values") or []:
            members[key_of(value)] = value
    elif kind == "queue":
        items = store.queues.setdefault(name, deque())
        items.extend(state.get("items") or [])
        popped = state.get("popped")
        for _ in range(min(popped if type(popped) is int else 0, len(items))):
            items.popleft()


class _Keys:
    """A dict's or set's keys written since the last frame (canonical key → the key as written)."""

    __slots__ = ("cleared", "written")

    def __init__(self) -> None:
        self.cleared = False
        self.written: Dict[Any, Any] = {}


class _Ends:
    """A queue's items taken from its front and added at its back since the last frame."""

    __slots__ = ("popped", "added")

    def __init__(self) -> None:
        self.popped = 0
        self.added: List[Any] = []


class Changes:
    """What the writes since the last frame changed, per collection (callers hold the store's lock).

    :meth:`before` is called before the store applies a write and :meth:`after` as soon as it has
    (in the write's answer, so a frame sent from that answer holds it)."""

    def __init__(self, store: CollectionStore) -> None:
        self._store = store
        self._keys: Dict[Tuple[str, str], _Keys] = {}
        self._ends: Dict[str, _Ends] = {}

    def before(self, request: List[Any]) -> Any:
        """What :meth:`after` compares with: a queue's length now."""
        return len(self._store.queues.get(request[1], ())) if request[0] == "queue" else None

    def after(self, request: List[Any], before: Any) -> None:
        kind, name, op, *args = request
        if kind == "queue":
            length = len(self._store.queues.get(name, ()))
            if length != before:  # one write adds or takes one item, or neither
                ends = self._ends.setdefault(name, _Ends())
                if length > before:
                    ends.added.append(self._store.queues[name][-1])
                else:
                    ends.popped += 1
            return
        if kind not in ("dict", "set"):
            return
        keys = self._keys.setdefault((kind, name), _Keys())
        if op == "clear":
            keys.cleared, keys.written = True, {}
        elif op == "update":
            pairs = args[0] if args and type(args[0]) is list else []
            for pair in pairs:
                if type(pair) is list and len(pair) == 2:
                    keys.written.setdefault(key_of(pair[0]), pair[0])
        else:
            key = args[0] if args else None
            keys.written.setdefault(key_of(key), key)

    def states(self, dirty: Any) -> List[Dict[str, Any]]:
        """The ``"delta": true`` states of the collections changed since the last frame, and forgets them."""
        states: List[Dict[str, Any]] = []
        for kind, name in dirty:
            if kind in ("counter", "lock"):
                states.append(state_of(self._store, kind, name))
            elif kind == "queue" and name in self._ends:
                ends = self._ends[name]
                states.append({"kind": kind, "name": name, "delta": True, "popped": ends.popped, "items": ends.added})
            elif (kind, name) in self._keys:
                states.append(self._keyed(kind, name, self._keys[(kind, name)]))
        self.forget()
        return states

    def _keyed(self, kind: str, name: str, keys: _Keys) -> Dict[str, Any]:
        held = self._store.dicts.get(name, {}) if kind == "dict" else self._store.sets.get(name, {})
        present = [held[canonical] for canonical in keys.written if canonical in held]
        removed = [key for canonical, key in keys.written.items() if canonical not in held]
        state: Dict[str, Any] = {"kind": kind, "name": name, "delta": True, "removed": removed}
        if kind == "dict":
            state["entries"] = [[key, value] for key, value in present]
            state["clear"] = keys.cleared
        else:
            state["values"] = present
        return state

    def forget(self) -> None:
        """Nothing is owed: a frame went, or the next replica gets everything."""
        self._keys.clear()
        self._ends.clear()


__all__ = ["Changes", "everything", "load", "state_of"]
