"""Remote references moved node to node (see docs/protocol.md, _Remote references_).

A reference used on a node that does not hold it is brought from the node that does, over the
cluster network, instead of through the client. The client runs two built-in tasks, answered by the
worker itself (the store is this process's): ``skyward.refs:serve`` on the holder starts this
node's peer server (once; bound to the node's own cluster address from the ``cluster`` message) and
answers where it listens; ``skyward.refs:pull`` on the other node fetches the object from there and
keeps it under the same id.

The peer protocol, one request per connection, opened with the pool's handshake (``peer_auth.py``):
the server sends a 32-byte nonce; the fetcher sends the JSON frame ``{"job", "ref", "mac"}``, where
``mac`` is HMAC-SHA256 over the nonce and the ref id keyed by the pool's token (the token itself
never crosses the network); the server answers a JSON frame ``{"ok": true, "type", "size",
"length"}`` and the pickle's bytes, or ``{"ok": false, "error"}``. It serves only this pool's job and
what this node's store keeps.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, Tuple

from . import peer_auth
from .execution import Outcome, error_outcome
from .ref_store import RefStore
from .values import Kept

SERVE_REFS = "skyward.refs:serve"
PULL_REF = "skyward.refs:pull"

#: how long a fetch may wait for the peer to connect and answer its header, in seconds
_CONNECT_TIMEOUT = 30.0
#: how long a fetch waits for the next bytes of the body, in seconds: a holder the cloud reclaimed
#: mid-transfer sends no FIN, and without it the pull (and the task needing the reference) waited for ever
_STALL_TIMEOUT = 30.0
#: how much of the body one read asks for
_READ_CHUNK = 1 << 20


async def _read_body(reader: asyncio.StreamReader, length: int) -> bytes:
    """``length`` bytes of a reference's pickle; ``asyncio.TimeoutError`` when the peer sends nothing
    for :data:`_STALL_TIMEOUT` (a long transfer that keeps moving is never cut short)."""
    body = bytearray()
    while len(body) < length:
        chunk = await asyncio.wait_for(reader.read(min(_READ_CHUNK, length - len(body))), _STALL_TIMEOUT)
        if not chunk:
            raise asyncio.IncompleteReadError(bytes(body), length)
        body += chunk
    return bytes(body)


class RefPeers:
    """This node's side of moving references between nodes: its server, its fetches, and the bytes
    each moved (``served``, ``fetched``), which the ``pull`` answer and ``held`` report."""

    def __init__(self, refs: RefStore, token: bytes, cluster: Callable[[], Dict[str, Any] | None],
                 log: Callable[[str], None]) -> None:
        self._refs = refs
        self._token = token
        self._cluster = cluster
        self._log = log
        self._server: asyncio.AbstractServer | None = None
        self._address: Tuple[str, int] | None = None
        self.served = 0
        self.fetched = 0

    # -- the built-in tasks ---------------------------------------------------------------------

    def moved(self) -> Dict[str, int]:
        """The bytes of references this node served to its peers and fetched from them so far."""
        return {"served": self.served, "fetched": self.fetched}

    def builtins(self) -> Dict[str, Callable[[Any], Awaitable[Outcome]]]:
        """The built-in tasks this answers, by fn (the task table runs them on the event loop)."""
        return {SERVE_REFS: lambda _args: self.serve_task(), PULL_REF: self.pull_task}

    async def serve_task(self) -> Outcome:
        """``skyward.refs:serve``: where this node's peer server listens (started on first ask)."""
        try:
            host, port = await self._listen()
        except (OSError, ValueError) as error:
            return error_outcome("exception", "RemoteRefError", f"the node cannot serve references to its peers: {error}")
        return ("result", {"addr": host, "port": port})

    async def pull_task(self, args: Any) -> Outcome:
        """``skyward.refs:pull``: fetches one reference from the peer that holds it and keeps it here."""
        if type(args) is not list or len(args) != 1 or type(args[0]) is not dict:
            return error_outcome("serialization", "SerializationError", "pull takes one object {id, addr, port}")
        request = args[0]
        ref_id, addr, port = request.get("id"), request.get("addr"), request.get("port")
        if type(ref_id) is not str or type(addr) is not str or type(port) is not int:
            return error_outcome("serialization", "SerializationError", "pull takes one object {id, addr, port}")
        if ref_id in self._refs.kept:
            return ("result", {"bytes": 0})
        try:
            kept = await self._fetch(ref_id, addr, port)
        except (OSError, ValueError, EOFError, asyncio.IncompleteReadError, asyncio.TimeoutError) as error:
            reason = "timed out" if isinstance(error, asyncio.TimeoutError) else str(error) or type(error).__name__
            return error_outcome("exception", "RemoteRefError", f"could not fetch {ref_id} from {addr}:{port}: {reason}")
        self._refs.kept.setdefault(ref_id, kept)
        return ("result", {"bytes": len(kept.data or b"")})

    # -- server ---------------------------------------------------------------------------------

    async def _listen(self) -> Tuple[str, int]:
        if self._address is not None:
            return self._address
        cluster = self._cluster()
        if cluster is None:
            raise ValueError("the cluster message has not arrived yet")
        node = cluster.get("node")
        own = [peer for peer in cluster.get("peers") or [] if type(peer) is dict and peer.get("node") == node]
        host = own[0].get("private_ip") if own else None
        if type(host) is not str or not host:
            raise ValueError("the cluster message gives this node no private address to bind")
        # Bound to the cluster address only: the client's side of the network does not reach it.
        self._server = await asyncio.start_server(self._answer, host=host, port=0)
        port = self._server.sockets[0].getsockname()[1]
        self._address = (host, port)
        return self._address

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            job = (self._cluster() or {}).get("job_id")
            request = await peer_auth.accept(reader, writer, self._token, job, "ref", _CONNECT_TIMEOUT)
            if request is None:
                self._log(f"refused a peer's reference request: {peer_auth.REFUSED}")
                return
            ref_id = request["ref"]
            kept = self._refs.kept.get(ref_id)
            if kept is None:
                writer.write(peer_auth.frame({"ok": False, "error": f"{ref_id} is not held on this node"}))
                return
            # A live object is pickled off the event loop: it may be large.
            data = kept.data if kept.data is not None else await asyncio.get_running_loop().run_in_executor(
                None, kept.pickle)
            writer.write(peer_auth.frame({"ok": True, "type": kept.type_name, "size": kept.size, "length": len(data)}))
            writer.write(data)
            await writer.drain()
            self.served += len(data)
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.TimeoutError) as error:
            self._log(f"a peer's reference request failed: {type(error).__name__}")
        finally:
            writer.close()

    # -- fetch ----------------------------------------------------------------------------------

    async def _fetch(self, ref_id: str, addr: str, port: int) -> Kept:
        job = (self._cluster() or {}).get("job_id")
        reader, writer = await peer_auth.connect(addr, port, self._token, job, {"ref": ref_id}, "ref", _CONNECT_TIMEOUT)
        try:
            header = await asyncio.wait_for(peer_auth.read_frame(reader), _CONNECT_TIMEOUT)
            if header.get("ok") is not True:
                raise ValueError(str(header.get("error", "the peer refused")))
            length, type_name, size = header.get("length"), header.get("type"), header.get("size")
            if type(length) is not int or type(type_name) is not str or type(size) is not int or length < 0:
                raise ValueError("the peer's header is malformed")
            data = await _read_body(reader, length)
        finally:
            writer.close()
        self.fetched += len(data)
        return Kept(type_name, size, data=data)


__all__ = ["PULL_REF", "SERVE_REFS", "RefPeers"]
