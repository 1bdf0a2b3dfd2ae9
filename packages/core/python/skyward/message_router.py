"""Which part of the worker handles each client message (see docs/protocol.md, "Messages").

Before the handshake only ``hello`` is accepted (anything else is refused); after it, each message
goes to the handler registered for its type, and a type nobody handles is ignored (docs/protocol.md,
"Versioning": a newer client may send what this worker does not know).
"""

from __future__ import annotations

from typing import Callable, Dict, Mapping

from .connection import Connection, reject
from .protocol import Message

Handler = Callable[[Connection, Message], None]


class MessageRouter:
    """The handshake gate and the table of handlers, by message type."""

    def __init__(self, hello: Handler, handlers: Mapping[str, Handler]) -> None:
        self._hello = hello
        # A second hello on an established connection is answered again (welcome or reject).
        self._handlers: Dict[str, Handler] = {"hello": hello, "ping": ping, "pong": pong, **handlers}

    def handle(self, connection: Connection, message: Message) -> None:
        kind = message["t"]
        if not connection.authenticated:
            if kind == "hello":
                self._hello(connection, message)
            else:
                reject(connection, f"expected hello, got {kind!r}")
            return
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(connection, message)


def ping(connection: Connection, message: Message) -> None:
    connection.send({"t": "pong", "ts": message.get("ts")})


def pong(connection: Connection, message: Message) -> None:
    pass  # receiving it already counted as traffic
