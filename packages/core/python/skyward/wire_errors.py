"""The protocol's two errors (re-exported by :mod:`skyward.protocol`), apart so that
:mod:`skyward.values` can raise them without importing the protocol."""

from __future__ import annotations


class ProtocolError(Exception):
    """A malformed frame, a frame over the limits, or a peer that broke the protocol."""


class SerializationError(TypeError):
    """A value that cannot be sent: names the offending type and where it was."""

    def __init__(self, path: str, type_name: str, detail: str | None = None) -> None:
        self.path = path
        self.type_name = type_name
        message = detail or f"cannot send a value of type {type_name}"
        super().__init__(f"{path}: {message}")
