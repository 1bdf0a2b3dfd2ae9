"""A client connection and its handshake (see docs/protocol.md, "Connection" and "Handshake").

:class:`Connection` is the asyncio protocol of one client: frames in (handed to its owner's
``handle``), batched frames out. Until the client's ``hello`` is accepted it must finish the
handshake within ``--handshake-timeout`` and send only small frames; :func:`check_hello` is the
acceptance rule itself.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import socket
import threading
import time
from typing import Callable, Deque, List, Protocol

from .protocol import (
    PROTOCOL_VERSION,
    FrameDecoder,
    Message,
    ProtocolError,
    SerializationError,
    pack_frame,
    pack_frame_parts,
)

#: No frame before a good ``hello`` may be larger than this (a ``hello`` is a few hundred bytes).
PRE_HANDSHAKE_FRAME_BYTES = 16 * 1024
#: bytes queued for a client's connection above which a thread task's stream waits for them to go
#: (down to STREAM_LOW_WATER): a task faster than its client is not buffered without bound
STREAM_HIGH_WATER = 64 << 20
STREAM_LOW_WATER = 32 << 20


class _HandshakeOptions(Protocol):
    handshake_timeout: float


class ConnectionOwner(Protocol):
    """What a :class:`Connection` asks of the worker that accepted it."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...
    @property
    def connections(self) -> set[Connection]: ...
    @property
    def options(self) -> _HandshakeOptions: ...
    def handle(self, connection: Connection, message: Message) -> None: ...
    def log(self, text: str) -> None: ...
    def on_connection_lost(self, connection: Connection) -> None: ...
    def fail_subtask(self, task_id: str, sub: int, text: str) -> None:
        """A ``subtask`` message could not be encoded: that subtask fails, not its parent task."""
        ...
    def error_message(self, task_id: str, kind: str, type_name: str, text: str, traceback_text: str = "",
                      slot: int | None = None) -> Message: ...


def check_hello(message: Message, token: bytes, stopping: bool) -> str | None:
    """Why a ``hello`` is refused (the ``reject`` reason), or None when the client is welcome."""
    version = message.get("version")
    if version != PROTOCOL_VERSION:
        return f"unsupported protocol version {version!r}: this worker speaks version {PROTOCOL_VERSION}"
    given = message.get("token")
    if not isinstance(given, str) or not hmac.compare_digest(given.encode("utf-8"), token):
        return "bad token"
    if stopping:
        return "the worker is stopping"
    return None


def reject(connection: Connection, reason: str) -> None:
    """Tells the client why it is refused and closes the connection once that is written."""
    connection.send({"t": "reject", "reason": reason})
    connection.close()
    connection.alive = False


class Connection(asyncio.BufferedProtocol):
    """One client connection: frames in, batched frames out.

    Bytes are received straight into the :class:`FrameDecoder`'s buffers (a large frame into one
    buffer of its own, sized from its prefix). A frame is written as :func:`pack_frame_parts`
    pieces: its large segments are handed to the transport in :data:`WRITE_CHUNK_BYTES` slices as
    the transport takes them (``pause_writing``/``resume_writing``), never joined into one copy of
    the frame nor buffered whole by the transport. Frames queued behind them keep their order.
    """

    #: Slices a large piece is written in: what the transport cannot send at once it copies.
    WRITE_CHUNK_BYTES = 256 * 1024

    def __init__(self, worker: ConnectionOwner) -> None:
        self.worker = worker
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self.decoder.max_frame_bytes = PRE_HANDSHAKE_FRAME_BYTES
        self._handshake_timer: asyncio.TimerHandle | None = None
        self.authenticated = False
        self.alive = True
        self.peer = "?"
        self._outbox: List[Message] = []
        self._flush_scheduled = False
        self._unsent: Deque[bytes | memoryview] = collections.deque()  # pieces waiting for the transport
        #: the bytes of ``_unsent`` (read by task threads: above ``high_water``, :meth:`wait_drained`)
        self.unsent_bytes = 0
        self.high_water = STREAM_HIGH_WATER
        #: called on the loop once the unsent bytes are down to STREAM_LOW_WATER (:meth:`when_drained`)
        self._on_drained: List[Callable[[], None]] = []
        self._drained_lock = threading.Lock()
        self._drained = threading.Condition(self._drained_lock)
        self._paused = False
        self._close_when_sent = False
        self.last_received = time.monotonic()
        self.last_sent = self.last_received

    # -- asyncio.BufferedProtocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        # Pause as soon as the transport holds anything unsent: the next slice then goes straight
        # to the socket once the transport has drained, instead of being copied into its buffer.
        try:
            self.transport.set_write_buffer_limits(high=0)  # type: ignore[union-attr]
        except (AttributeError, NotImplementedError):
            pass
        self.peer = str(transport.get_extra_info("peername"))
        self.worker.connections.add(self)
        self._handshake_timer = self.worker.loop.call_later(
            self.worker.options.handshake_timeout, self._handshake_expired
        )

    def _handshake_expired(self) -> None:
        self._handshake_timer = None
        if self.alive and not self.authenticated:
            self.worker.log(
                f"{self.peer} did not complete the handshake within {self.worker.options.handshake_timeout:g} s: "
                "closing the connection"
            )
            self.abort()

    def handshake_done(self) -> None:
        """The client said a good ``hello``: frames of any size, and no deadline, from now on."""
        self.authenticated = True
        self.decoder.max_frame_bytes = None
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.last_received = time.monotonic()
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except ProtocolError as error:
            self._protocol_error(error)
            return
        self._handle(frames)

    def data_received(self, data: bytes) -> None:
        """For transports that do not support buffered protocols: the same, with the bytes copied in."""
        self.last_received = time.monotonic()
        try:
            frames = self.decoder.feed(data)
        except ProtocolError as error:
            self._protocol_error(error)
            return
        self._handle(frames)

    def _protocol_error(self, error: ProtocolError) -> None:
        self.worker.log(f"protocol error from {self.peer}, closing the connection: {error}")
        self.abort()

    def _handle(self, frames: List[List[Message]]) -> None:
        handle = self.worker.handle
        for messages in frames:
            for message in messages:
                if not self.alive:
                    return
                try:
                    handle(self, message)
                except Exception as error:  # a bug must not take the connection down
                    self.worker.log(f"error handling a {message.get('t')!r} message: {error!r}")
        # What answering them queued goes now, as one frame, not a loop turn later: a client that
        # waits for each answer (a collection call) saves a turn of the loop per call.
        if self._outbox and self._flush_scheduled:
            self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.alive = False
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        self._outbox.clear()
        self._clear_unsent()
        self.worker.on_connection_lost(self)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._unsent:
            self._write_unsent()

    # -- sending ----------------------------------------------------------------------------------

    def send(self, message: Message) -> None:
        if not self.alive:
            return
        self._outbox.append(message)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.worker.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write everything queued in this loop turn as one frame."""
        self._flush_scheduled = False
        if not self._outbox or not self.alive or self.transport is None or self._close_when_sent:
            return
        messages, self._outbox = self._outbox, []
        try:
            pieces = pack_frame_parts(messages)
        except (ProtocolError, SerializationError):
            pieces = self._pack_each(messages)
        if len(pieces) == 1 and not self._unsent and len(pieces[0]) <= self.WRITE_CHUNK_BYTES:
            self.transport.write(pieces[0])  # the common case: a small frame with nothing queued before it
        elif pieces:
            self._unsent.extend(pieces)
            self.unsent_bytes += sum(len(piece) for piece in pieces)
            self._write_unsent()
        self.last_sent = time.monotonic()

    def _write_unsent(self) -> None:
        """Hand queued pieces to the transport, in slices, until it asks for a pause."""
        transport = self.transport
        unsent = self._unsent
        if transport is None or transport.is_closing():
            self._clear_unsent()
            return
        chunk = self.WRITE_CHUNK_BYTES
        above = self.unsent_bytes > STREAM_LOW_WATER
        while unsent and not self._paused:
            if transport.is_closing():  # a write failed: the connection is going away
                self._clear_unsent()
                return
            piece = unsent[0]
            if len(piece) > chunk:
                view = piece if type(piece) is memoryview else memoryview(piece)
                unsent[0] = view[chunk:]
                transport.write(view[:chunk])
                self.unsent_bytes -= chunk
            else:
                unsent.popleft()
                transport.write(piece)
                self.unsent_bytes -= len(piece)
        if above and self.unsent_bytes <= STREAM_LOW_WATER:
            self._drained_now()
        if not unsent and self._close_when_sent:
            # Not from inside resume_writing: the transport is in the middle of its own write.
            self.worker.loop.call_soon(transport.close)

    def _clear_unsent(self) -> None:
        """Nothing queued will be written (the connection is going away): waiting tasks go on."""
        self._unsent.clear()
        self.unsent_bytes = 0
        self._drained_now()

    def _drained_now(self) -> None:
        with self._drained_lock:
            self._drained.notify_all()
        callbacks, self._on_drained = self._on_drained, []
        for callback in callbacks:
            callback()

    def when_drained(self, callback: Callable[[], None]) -> None:
        """On the loop: ``callback()`` once at most ``STREAM_LOW_WATER`` bytes wait to be written
        (at once if they do already), or the connection has ended."""
        if not self.alive or self.unsent_bytes <= STREAM_LOW_WATER:
            callback()
        else:
            self._on_drained.append(callback)

    def wait_drained(self, stop: Callable[[], bool]) -> None:
        """From a task's thread that queued a stream item: while more than ``STREAM_HIGH_WATER``
        bytes wait to be written, wait until ``STREAM_LOW_WATER`` are left (or the connection ends,
        or ``stop()``: the task was stopped). Waits in short steps, where a stopped task's interrupt
        can land."""
        if self.unsent_bytes <= self.high_water:
            return
        while self.alive and self.unsent_bytes > STREAM_LOW_WATER and not stop():
            with self._drained_lock:
                if self.alive and self.unsent_bytes > STREAM_LOW_WATER:
                    self._drained.wait(0.25)

    def _pack_each(self, messages: List[Message]) -> List[bytes]:
        pieces: List[bytes] = []
        for message in messages:
            try:
                pieces.extend(pack_frame_parts([message]))
            except (ProtocolError, SerializationError) as error:
                if message.get("t") == "subtask":  # fails that subtask, not the parent task
                    self.worker.fail_subtask(message["id"], message["sub"], f"cannot send the subtask: {error}")
                    continue
                if "id" not in message:
                    self.worker.log(f"dropped an unsendable {message.get('t')!r} message: {error}")
                    continue
                pieces.append(pack_frame([self.worker.error_message(
                    message["id"], "serialization", "SerializationError", f"cannot send the {message['t']}: {error}"
                )]))
        return pieces

    def close(self) -> None:
        """Close once everything queued is written (as ``transport.close`` does for its own buffer)."""
        self.flush()
        if self.transport is not None:
            if self._unsent:
                self._close_when_sent = True
            else:
                self.transport.close()

    def abort(self) -> None:
        self.alive = False
        self._clear_unsent()
        if self.transport is not None:
            self.transport.abort()
