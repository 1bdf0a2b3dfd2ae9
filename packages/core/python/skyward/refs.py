"""Built-in tasks behind remote references (see docs/protocol.md, _Remote references_).

The client runs them on the node that holds a reference; the worker has already put the kept
object in the place of the ``$r`` argument, so each receives the object itself.
"""

from __future__ import annotations

from typing import Any, Dict

from .values import Pickled, dumps, type_name


def value(kept: Any) -> Any:
    """The kept object, sent back in its usual wire form (``ref.fetch()``)."""
    return kept


def pickled(kept: Any) -> Pickled:
    """The kept object as its pickle (``$o``), to carry it to another node unchanged."""
    return Pickled(type_name(kept), dumps(kept))


def held() -> Dict[str, Any]:
    """What the node keeps (``node``, ``count``, ``bytes``, ``ids``) and the bytes of references it
    served to and fetched from its peers (``served``, ``fetched``): the worker answers this task
    itself, from its own store, without running it."""
    raise RuntimeError("skyward.refs:held is answered by the worker; it does not run as a task")


__all__ = ["held", "pickled", "value"]
