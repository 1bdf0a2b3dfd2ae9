"""The collections' node-to-node path: the head's server in front of its store, and another node's
link to it (see docs/protocol.md, "Distributed collections").

A node that is not the head reaches the authority over the cluster network, on one connection
opened when its first operation comes: the handshake is the pool's peer handshake
(:mod:`skyward.peer_auth`, subject ``node``: the token never crosses), then both sides send the wire
protocol's frames (values as tasks send them, bytes as binary segments):

- ``{"t": "op", "id", "owner", "op": [kind, name, op, ...args]}`` — apply one operation;
- ``{"t": "cancel", "id"}`` — give up on a pending one; ``{"t": "ended", "id", "owner"}`` — a task
  ended (answered once its locks are released and its waits dropped);
- ``{"t": "answer", "id", "value"}`` or ``{"t": "refused", "id", "type", "message"}`` back;
- ``{"t": "superseded", "epoch", "addr"?, "port"?}`` to the head — a holder of a newer epoch has the
  collections (sent by a node that was promoted or told of a newer holder, and by a replica in answer
  to an older epoch's ``replicate``): the head stops acknowledging (see :mod:`skyward.collection_replica`).

The head ends every owner whose operations came over a connection when that connection goes: a
lost node's tasks release their locks, and their waits are dropped. A connection whose first frame
says ``"replica": true`` (the copy channel, :mod:`skyward.collection_channel`) or ``"direct": true``
(a task thread's own, :mod:`skyward.collection_direct`) is handed to a thread once authenticated.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
from typing import Any, AsyncIterator, Callable, Dict, List, Set, Tuple

from . import peer_auth
from .collection_channel import take_socket
from .collection_copy_head import HeadChannel
from .collection_direct import DirectConnection, answer_message, message_answer
from .collection_replica import Replication
from .collection_store import Answer, Owner
from .protocol import FrameDecoder, ProtocolError, pack_frame, to_wire

#: seconds a node waits for the head to connect and answer the handshake
CONNECT_TIMEOUT = 30.0


def authority_wait() -> float:
    """Seconds an operation waits for the client to say where the head serves
    (``SKYWARD_COLLECTIONS_AUTHORITY_WAIT``, default 60)."""
    try:
        return max(0.0, float(os.environ.get("SKYWARD_COLLECTIONS_AUTHORITY_WAIT", "60")))
    except ValueError:
        return 60.0
_READ_BYTES = 256 * 1024


def wire_frame(message: Dict[str, Any]) -> bytes:
    """``message`` (native values inside) as one wire frame."""
    return pack_frame([to_wire(message, "message")])


async def _messages(reader: asyncio.StreamReader) -> AsyncIterator[Dict[str, Any]]:
    """The wire frames' messages from ``reader``, until it ends."""
    decoder = FrameDecoder()
    while True:
        data = await reader.read(_READ_BYTES)
        if not data:
            return
        for messages in decoder.feed(data):
            for message in messages:
                yield message


class AuthorityServer:
    """The head's listening side: authenticated connections from the other nodes, each applying
    operations to ``store``."""

    def __init__(self, store: Replication, token: bytes, job: Callable[[], str | None],
                 log: Callable[[str], None]) -> None:
        #: the store it serves (replaced when this node is promoted again after being superseded)
        self.store = store
        #: a ``superseded`` frame came: a holder of a newer epoch has the collections
        self.on_superseded: Callable[[Dict[str, Any]], None] = lambda message: None
        self._token = token
        self._job = job
        self._log = log
        self._server: asyncio.AbstractServer | None = None
        self.address: Tuple[str, int] | None = None
        #: the task threads' own connections (collection_direct.py)
        self._direct: Set[DirectConnection] = set()

    def listen(self, host: str) -> Tuple[str, int]:
        """Binds now (so the port can be told at once) and serves from the next loop turn."""
        if self.address is not None:
            return self.address
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((host, 0))
            sock.listen(64)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.address = (host, int(sock.getsockname()[1]))

        async def serve() -> None:
            self._server = await asyncio.start_server(self._serve_peer, sock=sock)

        asyncio.get_running_loop().create_task(serve())
        return self.address

    def close(self) -> None:
        """Stops listening; on the loop's thread (asyncio's ``Server`` is not thread-safe)."""
        if self._server is not None:
            self._server.close()

    async def _serve_peer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        owners: Set[Owner] = set()

        def send(message: Dict[str, Any]) -> None:
            if not writer.is_closing():
                writer.write(wire_frame(message))

        try:
            first = await peer_auth.accept(reader, writer, self._token, self._job(), "node", CONNECT_TIMEOUT)
            if first is None:
                self._log("refused a peer's collections connection: not authenticated for this pool")
                return
            if first.get("replica") is True:
                # The node's copy channel: its own threads from here on (collection_channel.py).
                store = self.store
                loop = asyncio.get_running_loop()
                channel = HeadChannel(take_socket(writer.transport), store.acked, store.gone,
                                      lambda message: loop.call_soon_threadsafe(self.on_superseded, message),
                                      self._log)
                channel.mailbox = first.get("mailbox") if type(first.get("mailbox")) is str else None
                channel.start(peer_auth.frame({"ok": True}))
                store.offer(channel.send, str(first.get("node")))
                if channel.told_gone:
                    # It ended before the offer (a node lost as it connected): its gone() found no
                    # offer to take back, and the store would keep it as its copy, waiting for ever.
                    store.gone(channel.send)
                return
            if first.get("direct") is True:
                # A task thread's own connection (collection_direct.py): a thread applies its operations.
                direct = DirectConnection(take_socket(writer.transport), lambda: self.store,
                                          lambda: self._direct.discard(direct), self._log, first.get("mailbox"))
                self._direct.add(direct)
                direct.start(peer_auth.frame({"ok": True}))
                return
            writer.write(peer_auth.frame({"ok": True}))
            async for message in _messages(reader):
                self._handle(message, owners, writer, send)
        except (OSError, ValueError, ProtocolError, asyncio.IncompleteReadError, asyncio.TimeoutError) as error:
            self._log(f"a peer's collections connection failed: {type(error).__name__}")
        finally:
            writer.close()
            self.store.gone(send)
            # The node is gone (or cut off): its tasks no longer hold anything.
            for owner in owners:
                self.store.owner_ended(owner)

    def _handle(self, message: Dict[str, Any], owners: Set[Owner], writer: asyncio.StreamWriter,
                send: Callable[[Dict[str, Any]], None]) -> None:
        kind = message.get("t")
        owner = message.get("owner")
        request_id = message.get("id")
        if kind == "op" and type(owner) is str:
            owners.add(owner)
            self.store.apply(owner, message.get("op"), lambda answer: send(answer_message(request_id, answer)),
                              request_id)
        elif kind == "cancel" and type(owner) is str:
            self.store.cancel(owner, request_id, "the operation was cancelled")
        elif kind == "ended" and type(owner) is str:
            owners.discard(owner)
            for direct in list(self._direct):
                direct.owners.discard(owner)
            self.store.owner_ended(owner, lambda: send({"t": "answer", "id": request_id, "value": None}))
        elif kind == "superseded":
            self.on_superseded(message)


class AuthorityLink:
    """A node's connection to the head's authority: opened on the first operation, opened again
    after a loss; operations that come before the head's address is known wait for it."""

    def __init__(self, token: bytes, job: Callable[[], str | None], node: Callable[[], int],
                 log: Callable[[str], None]) -> None:
        self._token = token
        self._job = job
        self._node = node
        self._log = log
        self._address: Tuple[str, int] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._pending: Dict[int, Callable[[Answer], None]] = {}
        self._unsent: List[bytes] = []
        self._ids = itertools.count(1)
        self._unaddressed: asyncio.TimerHandle | None = None

    @property
    def address(self) -> Tuple[str, int] | None:
        """Where the head's authority listens, once the client said so."""
        return self._address

    def point_at(self, host: str, port: int, farewell: Dict[str, Any] | None = None) -> None:
        """The head's authority listens at ``host:port`` (told by the client); ``farewell`` is sent
        to the one it leaves first (``superseded``)."""
        if self._address == (host, port):
            return
        self._address = (host, port)
        if self._unaddressed is not None:
            self._unaddressed.cancel()
            self._unaddressed = None
        self._leave(farewell)
        if self._unsent:
            self._connect()

    def close(self, farewell: Dict[str, Any] | None = None) -> None:
        """This node holds the collections now: the link is not needed any more; ``farewell`` is
        sent to the head it leaves first."""
        self._address = None
        self._leave(farewell)

    def _leave(self, farewell: Dict[str, Any] | None) -> None:
        if self._writer is not None:
            if farewell is not None and not self._writer.is_closing():
                self._writer.write(pack_frame([farewell]))
            self._writer.close()  # what was written goes first

    def submit(self, owner: Owner, request: Any, reply: Callable[[Answer], None]) -> int:
        request_id = next(self._ids)
        self._pending[request_id] = reply
        self._send({"t": "op", "id": request_id, "owner": owner, "op": request})
        return request_id

    def cancel(self, owner: Owner, request_id: int) -> None:
        if request_id in self._pending:
            self._send({"t": "cancel", "id": request_id, "owner": owner})

    def ended(self, owner: Owner, then: Callable[[], None]) -> None:
        """Tells the head ``owner`` ended; ``then()`` once it answered (or the connection is gone)."""
        request_id = next(self._ids)
        self._pending[request_id] = lambda _answer: then()
        self._send({"t": "ended", "id": request_id, "owner": owner})

    def _send(self, message: Dict[str, Any]) -> None:
        # Already in wire form: a task's arguments come as ``to_wire`` made them (not encoded twice).
        data = pack_frame([message])
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(data)
            return
        self._unsent.append(data)
        self._connect()

    def _connect(self) -> None:
        if self._address is None:
            if self._unaddressed is None:  # not told where the head serves: waits that long at most
                self._unaddressed = asyncio.get_running_loop().call_later(authority_wait(), self._fail_unaddressed)
            return
        if self._connecting is not None and not self._connecting.done():
            return
        self._connecting = asyncio.get_running_loop().create_task(self._run(self._address))

    async def _run(self, address: Tuple[str, int]) -> None:
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await peer_auth.connect(address[0], address[1], self._token, self._job(),
                                                     {"node": str(self._node())}, "node",
                                                     CONNECT_TIMEOUT)
            welcome = await asyncio.wait_for(peer_auth.read_frame(reader), CONNECT_TIMEOUT)
            if welcome.get("ok") is not True:
                raise ValueError(str(welcome.get("error", "the head refused")))
            self._writer = writer
            unsent, self._unsent = self._unsent, []
            for data in unsent:
                writer.write(data)
            async for message in _messages(reader):
                reply = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
                if reply is not None:
                    reply(message_answer(message))
        except (OSError, ValueError, ProtocolError, asyncio.IncompleteReadError, asyncio.TimeoutError) as error:
            self._log(f"the collections connection to the head at {address[0]}:{address[1]} failed: "
                      f"{type(error).__name__}: {error}")
        finally:
            if writer is not None:
                writer.close()
            if self._writer is writer:
                self._writer = None
            self._lost(address)

    def _lost(self, address: Tuple[str, int]) -> None:
        # What was asked is lost with the connection: a wait cannot be known to have ended or not.
        self._fail(f"the connection to the head node's collections at {address[0]}:{address[1]} was lost")

    def _fail_unaddressed(self) -> None:
        self._unaddressed = None
        if self._address is None:
            self._fail(f"the head node did not say where it serves the collections within {authority_wait():g} s "
                       "(its worker could not listen on its cluster address, or it is not up)")

    def _fail(self, reason: str) -> None:
        self._unsent.clear()
        pending, self._pending = self._pending, {}
        for reply in pending.values():
            reply(("error", "CancelledError", reason))


__all__ = ["AuthorityLink", "AuthorityServer", "answer_message", "message_answer", "wire_frame"]
