"""The worker's ``Connection`` on a real asyncio transport over a loopback TCP socket: frames received
through the buffered-protocol path, and large replies written in slices as the transport drains
(``pause_writing``/``resume_writing``) — in order, whole, without the transport ever holding a copy of
the frame. The worker behind the connection is a small recorder of what the connection asks of it."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyward.protocol import FrameDecoder, Message, encode_frame  # noqa: E402
from skyward.worker import Connection  # noqa: E402

PAYLOAD = bytes(range(256)) * (24 * 1024 * 1024 // 256)  # 24 MiB


class RecordingWorker:
    """What a Connection uses of its Worker: the loop, the connection set, handle, log, lost."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.connections: set[Connection] = set()
        self.messages: List[Message] = []
        self.logs: List[str] = []
        self.lost = loop.create_future()
        self.options = types.SimpleNamespace(handshake_timeout=60.0)

    def handle(self, connection: Connection, message: Message) -> None:
        self.messages.append(message)

    def log(self, text: str) -> None:
        self.logs.append(text)

    def on_connection_lost(self, connection: Connection) -> None:
        self.connections.discard(connection)
        if not self.lost.done():
            self.lost.set_result(None)


class CountingConnection(Connection):
    """A Connection that records its flow-control calls and the transport's buffer after each write."""

    def __init__(self, worker: Any) -> None:
        super().__init__(worker)
        self.pauses = 0
        self.resumes = 0
        self.buffered: List[int] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        write = transport.write  # type: ignore[attr-defined]

        def counting_write(data: Any) -> None:
            write(data)
            self.buffered.append(transport.get_write_buffer_size())  # type: ignore[attr-defined]

        transport.write = counting_write  # type: ignore[attr-defined]

    def pause_writing(self) -> None:
        self.pauses += 1
        super().pause_writing()

    def resume_writing(self) -> None:
        self.resumes += 1
        super().resume_writing()


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of a loopback TCP connection, the peer's receive buffer kept small."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        peer = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        peer.connect(server.getsockname())
        ours, _ = server.accept()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    ours.setblocking(False)
    return ours, peer


class SlowReader(threading.Thread):
    """Reads the peer's end slowly (small reads, short naps) and decodes the frames."""

    def __init__(self, sock: socket.socket, nap_every: int = 64) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.nap_every = nap_every
        self.frames: List[List[Message]] = []
        self.eof = False

    def run(self) -> None:
        decoder = FrameDecoder()
        self.sock.settimeout(30)
        reads = 0
        while True:
            data = self.sock.recv(32 * 1024)
            if not data:
                self.eof = True
                return
            self.frames.extend(decoder.feed(data))
            reads += 1
            if reads % self.nap_every == 0:
                time.sleep(0.002)


async def open_connection(connection_class: type = CountingConnection) -> tuple[Any, RecordingWorker, socket.socket]:
    loop = asyncio.get_running_loop()
    worker = RecordingWorker(loop)
    ours, peer = socket_pair()
    _, connection = await loop.create_connection(lambda: connection_class(worker), sock=ours)
    connection.handshake_done()  # these tests are about an established connection's I/O
    return connection, worker, peer


def test_a_large_reply_is_written_in_slices_as_the_transport_drains_and_in_order() -> None:
    async def scenario() -> tuple[CountingConnection, SlowReader]:
        connection, worker, peer = await open_connection()
        reader = SlowReader(peer)
        reader.start()
        connection.send({"t": "result", "id": "big", "value": PAYLOAD})
        connection.flush()
        # Frames sent while the large one is still going out are queued behind it, in order.
        connection.send({"t": "pong", "ts": 1})
        connection.flush()
        connection.send({"t": "result", "id": "mixed", "value": [b"a", PAYLOAD[:300_000], b"b"]})
        connection.flush()
        connection.send({"t": "pong", "ts": 2})
        connection.flush()
        assert connection._unsent, "the large frame should still be going out"
        deadline = time.monotonic() + 30
        while len(reader.frames) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        connection.close()
        await asyncio.wait_for(worker.lost, 10)
        await asyncio.get_running_loop().run_in_executor(None, reader.join, 10)
        peer.close()
        return connection, reader

    connection, reader = asyncio.run(scenario())
    messages = [message for frame in reader.frames for message in frame]
    assert [message["t"] for message in messages] == ["result", "pong", "result", "pong"]
    assert type(messages[0]["value"]) is bytes and messages[0]["value"] == PAYLOAD
    assert messages[1]["ts"] == 1 and messages[3]["ts"] == 2
    assert messages[2]["value"] == [b"a", PAYLOAD[:300_000], b"b"]
    # The transport paused the writer many times and never held more than one slice unsent.
    assert reader.eof
    assert connection.pauses > 10 and connection.resumes >= connection.pauses - 1
    assert max(connection.buffered) <= Connection.WRITE_CHUNK_BYTES


def test_close_waits_for_the_queued_slices_then_closes() -> None:
    async def scenario() -> SlowReader:
        connection, worker, peer = await open_connection()
        reader = SlowReader(peer, nap_every=16)
        reader.start()
        connection.send({"t": "result", "id": "big", "value": PAYLOAD})
        connection.close()  # flushes, then closes once everything is written
        connection.send({"t": "pong", "ts": 9})  # after close: not sent
        connection.flush()
        await asyncio.wait_for(worker.lost, 30)
        await asyncio.get_running_loop().run_in_executor(None, reader.join, 10)
        peer.close()
        return reader

    reader = asyncio.run(scenario())
    assert reader.eof
    assert [[message["t"] for message in frame] for frame in reader.frames] == [["result"]]
    assert reader.frames[0][0]["value"] == PAYLOAD


def test_abort_drops_what_is_queued() -> None:
    async def scenario() -> tuple[Any, socket.socket]:
        connection, worker, peer = await open_connection()
        connection.send({"t": "result", "id": "big", "value": PAYLOAD})
        connection.flush()
        assert connection._unsent  # nobody reads: most of it is still queued
        connection.abort()
        await asyncio.wait_for(worker.lost, 10)
        return connection, peer

    connection, peer = asyncio.run(scenario())
    assert not connection._unsent and not connection.alive
    peer.settimeout(10)
    received = 0
    try:
        while True:
            data = peer.recv(1 << 20)
            if not data:
                break
            received += len(data)
    except ConnectionResetError:
        pass
    peer.close()
    assert received < len(PAYLOAD)


def test_frames_are_received_through_the_buffered_path() -> None:
    large = PAYLOAD[: 5 * 1024 * 1024]
    stream = (
        encode_frame([{"t": "submit", "id": "a", "args": [large]}])
        + encode_frame([{"t": "ping", "ts": 1}, {"t": "ping", "ts": 2}])
        + encode_frame([{"t": "submit", "id": "b", "args": [b"small"]}])
    )

    async def scenario() -> RecordingWorker:
        connection, worker, peer = await open_connection()
        loop = asyncio.get_running_loop()

        def write() -> None:
            # In uneven pieces: one ends inside the first frame's prefix, one inside its header.
            cuts = [0, 3, 20, 70_000, 1_000_000, len(stream)]
            for start, end in zip(cuts, cuts[1:]):
                peer.sendall(stream[start:end])
                time.sleep(0.005)

        await loop.run_in_executor(None, write)
        deadline = time.monotonic() + 20
        while len(worker.messages) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        connection.close()
        await asyncio.wait_for(worker.lost, 10)
        peer.close()
        return worker

    worker = asyncio.run(scenario())
    assert [(m["t"], m.get("id"), m.get("ts")) for m in worker.messages] == [
        ("submit", "a", None), ("ping", None, 1), ("ping", None, 2), ("submit", "b", None)
    ]
    assert type(worker.messages[0]["args"][0]) is bytes and worker.messages[0]["args"][0] == large
    assert worker.messages[3]["args"] == [b"small"]


def test_an_oversized_frame_closes_the_connection_from_its_prefix() -> None:
    async def scenario() -> tuple[RecordingWorker, bytes]:
        connection, worker, peer = await open_connection()
        peer.sendall(encode_frame([{"t": "ping", "ts": 1}]))
        deadline = time.monotonic() + 10
        while not worker.messages and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        # The prefix alone is refused: the body it announces is never waited for.
        peer.sendall(struct.pack(">II", 10, 2**31 + 1))
        await asyncio.wait_for(worker.lost, 10)
        peer.settimeout(5)
        try:
            rest = peer.recv(100)
        except ConnectionResetError:
            rest = b""
        peer.close()
        return worker, rest

    worker, rest = asyncio.run(scenario())
    assert [m["t"] for m in worker.messages] == ["ping"]
    assert rest == b""
    assert any("protocol error" in line and "over the limit" in line for line in worker.logs), worker.logs


def test_a_write_failing_midway_drops_the_rest_quietly(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> Any:
        connection, worker, peer = await open_connection()
        # The peer resets the connection; the loop has not seen it yet when the reply is written.
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()
        time.sleep(0.05)
        connection.send({"t": "result", "id": "big", "value": PAYLOAD})
        connection.flush()
        await asyncio.wait_for(worker.lost, 10)
        return connection

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        connection = asyncio.run(scenario())
    assert not connection._unsent and not connection.alive
    assert not [record for record in caplog.records if "socket.send() raised exception" in record.getMessage()]
