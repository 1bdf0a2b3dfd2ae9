"""Connections between the nodes of one pool, authenticated by the pool's token.

The nodes talk to each other over the cluster network (references moved node to node,
``ref_peers.py``; anything else that runs node to node). The pool's token never crosses that network:
the server opens each connection with a fresh 32-byte nonce, and the connecting peer's first frame
is a JSON object naming the pool's job and carrying ``mac``, HMAC-SHA256 keyed by the token over the
nonce and the frame's *subject* (one field of it, named by the protocol that uses this: the ref id
for a reference fetch). The server answers a peer that fails the check with
``{"ok": false, "error": "not authenticated for this pool"}`` and closes.

Frames are length-prefixed (a 4-byte big-endian length, then that many bytes); a JSON frame's body
is a UTF-8 JSON object of at most :data:`FRAME_LIMIT` bytes. What follows the handshake is the
using protocol's own.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import socket
import struct
from typing import Any, Dict, Optional

#: a JSON frame bigger than this is not one of ours
FRAME_LIMIT = 64 * 1024
NONCE_BYTES = 32
#: what a refused peer is told (the same whatever failed, so it learns nothing about the token)
REFUSED = "not authenticated for this pool"
LENGTH = struct.Struct(">I")


def sign(token: bytes, nonce: bytes, subject: str) -> str:
    """The ``mac`` of a first frame: HMAC-SHA256 over the nonce and its subject, keyed by the token."""
    return hmac.new(token, nonce + subject.encode("utf-8"), hashlib.sha256).hexdigest()


def frame(value: Dict[str, Any]) -> bytes:
    """``value`` as one JSON frame, its length first."""
    data = json.dumps(value).encode("utf-8")
    return LENGTH.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> Dict[str, Any]:
    """The next JSON frame; ``ValueError`` when it is over the limit or not a JSON object."""
    (length,) = LENGTH.unpack(await reader.readexactly(LENGTH.size))
    if length > FRAME_LIMIT:
        raise ValueError(f"a peer frame of {length} bytes is over the limit of {FRAME_LIMIT}")
    value = json.loads(await reader.readexactly(length))
    if type(value) is not dict:
        raise ValueError("a peer frame must be a JSON object")
    return value


async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, token: bytes,
                 job: Optional[str], subject: str, timeout: float) -> Optional[Dict[str, Any]]:
    """The server's side of the handshake: the peer's first frame when it holds the token and names
    ``job`` (its field ``subject`` is what the mac covers), else None once the refusal is written."""
    nonce = secrets.token_bytes(NONCE_BYTES)
    writer.write(nonce)
    await writer.drain()
    request = await asyncio.wait_for(read_frame(reader), timeout)
    signed, mac = request.get(subject), request.get("mac")
    if (type(signed) is not str or type(mac) is not str or job is None or request.get("job") != job
            or not hmac.compare_digest(mac, sign(token, nonce, signed))):
        writer.write(frame({"ok": False, "error": REFUSED}))
        await writer.drain()
        return None
    return request


async def introduce(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, token: bytes,
                    job: Optional[str], request: Dict[str, Any], subject: str, timeout: float) -> None:
    """The connecting side of the handshake: reads the nonce and sends ``request`` as the first
    frame, with the job and the mac over its field ``subject`` added."""
    nonce = await asyncio.wait_for(reader.readexactly(NONCE_BYTES), timeout)
    signed = request[subject]
    writer.write(frame({**request, "job": job, "mac": sign(token, nonce, signed)}))
    await writer.drain()


async def connect(host: str, port: int, token: bytes, job: Optional[str], request: Dict[str, Any],
                  subject: str, timeout: float) -> "tuple[asyncio.StreamReader, asyncio.StreamWriter]":
    """Opens a connection to a peer's server and introduces this node (:func:`introduce`); the
    connection is closed again when that fails."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        await introduce(reader, writer, token, job, request, subject, timeout)
    except BaseException:
        writer.close()
        raise
    return reader, writer


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        data += chunk
    return data


def read_frame_blocking(sock: socket.socket) -> Dict[str, Any]:
    """:func:`read_frame` on a blocking socket (a thread's own connection)."""
    (length,) = LENGTH.unpack(_exactly(sock, LENGTH.size))
    if length > FRAME_LIMIT:
        raise ValueError(f"a peer frame of {length} bytes is over the limit of {FRAME_LIMIT}")
    value = json.loads(_exactly(sock, length))
    if type(value) is not dict:
        raise ValueError("a peer frame must be a JSON object")
    return value


def connect_blocking(host: str, port: int, token: bytes, job: Optional[str], request: Dict[str, Any],
                     subject: str, timeout: float) -> socket.socket:
    """:func:`connect` for a thread with a blocking socket: connected, introduced and welcomed
    (``ValueError`` when the peer refused); no timeout is left on the socket."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        nonce = _exactly(sock, NONCE_BYTES)
        sock.sendall(frame({**request, "job": job, "mac": sign(token, nonce, request[subject])}))
        welcome = read_frame_blocking(sock)
        if welcome.get("ok") is not True:
            raise ValueError(str(welcome.get("error", "the peer refused")))
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return sock


__all__ = ["FRAME_LIMIT", "NONCE_BYTES", "REFUSED", "accept", "connect", "connect_blocking", "frame", "introduce",
           "read_frame", "read_frame_blocking", "sign"]
