"""The pool's secrets on the worker (see docs/secrets.md): the ``secrets`` field of the ``cluster``
message, name to value, set in the worker's environment and its task processes', held in memory only,
and masked in what the worker sends or writes of a task (its output, its error's text).
"""

from __future__ import annotations

from typing import Any, Dict, List

#: What replaces a secret's value in output (the client's mask is the same).
REDACTED = "[redacted]"


def secrets_of(message: Dict[str, Any]) -> Dict[str, str]:
    """The ``secrets`` of a ``cluster`` message, name to value (anything else in it ignored)."""
    secrets = message.get("secrets")
    if not isinstance(secrets, dict):
        return {}
    return {key: value for key, value in secrets.items() if isinstance(key, str) and isinstance(value, str) and value}


class SecretMask:
    """Masks the values of the secrets the worker was given, longest first so that no part survives."""

    def __init__(self) -> None:
        self._values: List[str] = []

    def add(self, values: Dict[str, str]) -> None:
        """Remembers ``values``' values (a rotated secret's old value stays masked too)."""
        known = set(self._values)
        known.update(value for value in values.values() if value)
        self._values = sorted(known, key=len, reverse=True)

    def mask(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text
