"""What a node keeps for remote references (see docs/protocol.md, _Remote references_).

A task submitted with ``keep`` leaves its result here under a fresh ref id; a later task's ``$r``
argument is replaced by the kept object (:meth:`RefStore.resolve`); ``unref`` and a ``release``
without ``keep`` let results go. The built-in tasks behind references are in ``refs.py``.
"""

from __future__ import annotations

import secrets
from typing import Any, Dict, Iterable

from .values import Kept, RefArg

#: the built-in task the worker answers itself, from this store (:meth:`RefStore.held`)
HELD_REFS = "skyward.refs:held"


class RefStore:
    """The kept objects of one node, by ref id."""

    def __init__(self) -> None:
        self.kept: Dict[str, Kept] = {}

    def keep(self, kept: Kept, node: int) -> Dict[str, Any]:
        """Keeps ``kept`` under a new ref id; the ``$r`` value that names it to the client."""
        ref_id = f"r{node}-{secrets.token_hex(8)}"
        self.kept[ref_id] = kept
        return {"$r": {"id": ref_id, "node": node, "type": kept.type_name, "size": kept.size}}

    def resolve(self, value: Any, node: int) -> Any:
        """``value`` with each ``$r`` replaced by the object this node keeps for it (kept first when
        it came along); raises ``LookupError`` naming a ref this node does not hold."""
        cls = type(value)
        if cls is RefArg:
            if value.carried is not None:
                kept = self.kept.get(value.id)
                if kept is None:
                    kept = Kept(value.carried.type_name, len(value.carried.data), data=value.carried.data)
                    self.kept[value.id] = kept
                return kept
            kept = self.kept.get(value.id)
            if kept is None:
                raise LookupError(
                    f"remote reference {value.id} is not held on node {node}: it was released, or the "
                    "node that held it was lost"
                )
            return kept
        if cls is list:
            return [self.resolve(item, node) for item in value]
        if cls is dict:
            return {key: self.resolve(item, node) for key, item in value.items()}
        return value

    def held(self, node: int) -> Dict[str, Any]:
        """What this node keeps for remote references: how many, their sizes added up, and their ids."""
        return {
            "node": node,
            "count": len(self.kept),
            "bytes": sum(kept.size for kept in self.kept.values()),
            "ids": sorted(self.kept),
        }

    def drop(self, ids: Iterable[Any]) -> None:
        """``unref``: the listed refs are let go (ids that are not strings, or not held, are ignored)."""
        for ref_id in ids:
            if isinstance(ref_id, str):
                self.kept.pop(ref_id, None)

    def clear(self) -> None:
        self.kept.clear()
