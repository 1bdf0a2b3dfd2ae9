"""The handshake every node-to-node connection of a pool opens with (``peer_auth.py``), on real
loopback sockets: a peer holding the pool's token and naming its job is let in; another token, another
job, or a mac over another subject is refused with the same words, and the token never crosses."""

from __future__ import annotations

import asyncio
import struct
from typing import Any, Dict, List, Optional

import pytest

import worker_client  # noqa: F401  (puts the runtime on sys.path)
from skyward import peer_auth

TOKEN = b"pool-token-123"
TIMEOUT = 10.0


async def handshake(token: bytes, job: Optional[str], request: Dict[str, Any]) -> Dict[str, Any]:
    """Runs a server that accepts with the pool's token and job "job-1"; returns what each side saw."""
    seen: List[Optional[Dict[str, Any]]] = []
    sent: List[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted = await peer_auth.accept(reader, writer, TOKEN, "job-1", "ref", TIMEOUT)
        seen.append(accepted)
        if accepted is not None:
            writer.write(peer_auth.frame({"ok": True, "echo": accepted["ref"]}))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, host="127.0.0.1", port=0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), TIMEOUT)
        original_write = writer.write
        writer.write = lambda data: (sent.append(bytes(data)), original_write(data))[1]  # type: ignore[method-assign]
        await peer_auth.introduce(reader, writer, token, job, request, "ref", TIMEOUT)
        answer_frame = await asyncio.wait_for(peer_auth.read_frame(reader), TIMEOUT)
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
    return {"server": seen[0] if seen else None, "answer": answer_frame, "sent": b"".join(sent)}


def test_a_peer_with_the_token_and_the_job_is_let_in() -> None:
    outcome = asyncio.run(handshake(TOKEN, "job-1", {"ref": "r0-1"}))
    assert outcome["answer"] == {"ok": True, "echo": "r0-1"}
    assert outcome["server"]["ref"] == "r0-1" and outcome["server"]["job"] == "job-1"
    assert TOKEN not in outcome["sent"]


@pytest.mark.parametrize(
    "token,job", [(b"another-pool-token", "job-1"), (TOKEN, "job-2"), (TOKEN, None)],
    ids=["another token", "another job", "no job"],
)
def test_a_peer_without_the_token_or_of_another_job_is_refused(token: bytes, job: Optional[str]) -> None:
    outcome = asyncio.run(handshake(token, job, {"ref": "r0-1"}))
    assert outcome["server"] is None
    assert outcome["answer"] == {"ok": False, "error": peer_auth.REFUSED}


def test_the_mac_covers_the_subject() -> None:
    nonce = b"n" * peer_auth.NONCE_BYTES
    assert peer_auth.sign(TOKEN, nonce, "r0-1") != peer_auth.sign(TOKEN, nonce, "r0-2")
    assert peer_auth.sign(TOKEN, nonce, "r0-1") != peer_auth.sign(b"other", nonce, "r0-1")


def test_a_frame_over_the_limit_or_not_an_object_is_refused() -> None:
    async def read(data: bytes) -> Dict[str, Any]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await peer_auth.read_frame(reader)

    with pytest.raises(ValueError, match="over the limit"):
        asyncio.run(read(struct.pack(">I", peer_auth.FRAME_LIMIT + 1)))
    with pytest.raises(ValueError, match="JSON object"):
        asyncio.run(read(struct.pack(">I", 2) + b"[]"))
    assert asyncio.run(read(peer_auth.frame({"a": 1}))) == {"a": 1}


async def blocking_handshake(token: bytes) -> Any:
    """``connect_blocking`` (a thread's own connection) against the asyncio server's side: the
    socket it gives, or the error it raised."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted = await peer_auth.accept(reader, writer, TOKEN, "job-1", "node", TIMEOUT)
        if accepted is not None:
            writer.write(peer_auth.frame({"ok": True}))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, host="127.0.0.1", port=0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await asyncio.to_thread(_connect_or_error, port, token)
    finally:
        server.close()
        await server.wait_closed()


def _connect_or_error(port: int, token: bytes) -> Any:
    try:
        sock = peer_auth.connect_blocking("127.0.0.1", port, token, "job-1", {"node": "1"}, "node", TIMEOUT)
    except ValueError as error:
        return error
    timeout = sock.gettimeout()
    sock.close()
    return timeout


def test_a_blocking_peer_is_let_in_with_the_token_and_refused_without() -> None:
    assert asyncio.run(blocking_handshake(TOKEN)) is None  # welcomed, and no timeout left on the socket
    refused = asyncio.run(blocking_handshake(b"another-pool-token"))
    assert isinstance(refused, ValueError) and str(refused) == peer_auth.REFUSED
