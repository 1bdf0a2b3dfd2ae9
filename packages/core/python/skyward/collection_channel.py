"""The collections' copy channel: the connection between the head and the node holding its copy
(:mod:`skyward.collection_replica`), read and written by threads on blocking sockets.

A write is answered only once the copy holds it, so the copy's round trip is on every write's
path; with the event loops on it, each end added a loop wake-up (a self-pipe write, a selector
turn) to the one socket round trip. Here the head sends a ``replicate`` frame from whichever thread
applied the write (a task's own, or the loop), the node holding the copy reads it in a thread
blocked on the socket and answers ``acked`` at once, and the head's reading thread hands the held
answers back. The frames are the ones docs/protocol.md describes ("Distributed collections"); the
node opens this connection itself (handshake ``{"node", "replica": true}``, the pool's peer
handshake), apart from the one its tasks' operations take.

Each thread hand-off costs more than the network between two nodes, so the thread that waits for
an answer does the work itself where it can (:class:`writing_here`, and the head's end,
:class:`~skyward.collection_copy_head.HeadChannel`):
it writes the frames it queued once it has let go of the store's lock (as far as the socket takes
them without waiting: the rest is the sender thread's, with its deadline), and reads the acks
itself while no other thread does (one reader at a time; the acks it reads for other threads wake
them). The threads of the connection stay for what nobody waits on (an ``eventual`` write's frame,
a ``superseded`` from the node, the connection's end).
"""

from __future__ import annotations

import functools
import os
import socket
import struct
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

from . import peer_auth
from . import collection_frames
from .collection_frames import read_messages
from .collection_copy_node import NodeEnd
from .protocol import ProtocolError, pack_frame, to_wire

#: seconds a frame may take to be written before the channel counts as lost (a stopped node), plus
#: one second per :data:`_SEND_SLOW_BYTES` of the frame (a full copy of a large store on a slow link)
SEND_TIMEOUT = 30.0
_SEND_SLOW_BYTES = 1024 * 1024
#: how often a blocked send wakes to look at its deadline (``SO_SNDTIMEO``)
_SEND_POLL = 1
#: a peer that answers nothing (its host gone without a FIN): probed after this many idle seconds,
#: every ``_KEEPALIVE_INTERVAL``, given up after ``_KEEPALIVE_PROBES`` unanswered probes
_KEEPALIVE_IDLE = 30
_KEEPALIVE_INTERVAL = 10
_KEEPALIVE_PROBES = 3
#: seconds before a node that offered to hold the copy connects again after a loss, doubling to the most
_RETRY_FIRST = 0.5
_RETRY_MOST = 10.0


def tune(sock: socket.socket) -> None:
    """Blocking, no Nagle delay, sends that wake every :data:`_SEND_POLL` seconds to look at their
    deadline (:func:`send_all`), and TCP keepalive, so a read from a host that vanished without a FIN
    ends (in about a minute) instead of waiting for ever."""
    sock.setblocking(True)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", _KEEPALIVE_IDLE), ("TCP_KEEPINTVL", _KEEPALIVE_INTERVAL),
                          ("TCP_KEEPCNT", _KEEPALIVE_PROBES)):
        if hasattr(socket, option):  # Linux; elsewhere the system's keepalive timings apply
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
    try:  # a struct timeval; where the platform's differs, a send checks its deadline between writes only
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", _SEND_POLL, 0))
    except OSError:
        pass


def send_all(sock: socket.socket, data: bytes, limit: float | None = None) -> None:
    """Writes all of ``data`` or raises ``TimeoutError`` once it has taken longer than ``limit``
    seconds (by default :data:`SEND_TIMEOUT` plus a second per MiB). ``sendall`` cannot bound this:
    its ``SO_SNDTIMEO`` limits each write, and a stopped peer whose window opens a little now and
    then keeps restarting it. A frame the socket takes at once (nearly every one) is one ``send``
    (the deadline starts after it: at most :data:`_SEND_POLL` seconds later)."""
    try:
        written = sock.send(data)
    except BlockingIOError:  # SO_SNDTIMEO passed with nothing written
        written = 0
    if written == len(data):
        return
    allowed = limit if limit is not None else SEND_TIMEOUT + len(data) / _SEND_SLOW_BYTES
    deadline = time.monotonic() + allowed
    view = memoryview(data)[written:]
    while view:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the peer took no more of a {len(data)}-byte frame for {allowed:.0f} s")
        try:
            view = view[sock.send(view):]
        except BlockingIOError:  # SO_SNDTIMEO passed with nothing written: look at the deadline again
            continue


def take_socket(transport: Any) -> socket.socket:
    """The socket of an asyncio connection that has just been authenticated (the peer sends nothing
    more until it is welcomed), for a thread to use from now on; the asyncio transport is let go."""
    original = transport.get_extra_info("socket")
    sock = socket.socket(fileno=os.dup(original.fileno()))
    transport.abort()
    return sock


def start_thread(name: str, run: Callable[[], None]) -> None:
    threading.Thread(target=run, name=name, daemon=True).start()


#: per thread: the connections whose queued frames this thread writes itself when it leaves its
#: outermost :class:`writing_here` (None: not inside one)
_here = threading.local()
#: a write that returns at once when the socket's buffer is full (0 where there is none: then the
#: sender thread writes every frame)
DONT_WAIT = getattr(socket, "MSG_DONTWAIT", 0)


def writing_now() -> bool:
    """Whether this thread is inside a :class:`writing_here` block (it writes its queued frames itself)."""
    return getattr(_here, "owed", None) is not None


class writing_here:
    """Frames queued on a :class:`PeerThread` inside this block are written by this thread once it
    leaves the block (outside the store's lock, which is taken and let go inside it), instead of
    waking the connection's sender thread: the thread that made a write is about to wait for its
    answer anyway."""

    __slots__ = ("_outermost",)

    def __enter__(self) -> None:
        self._outermost = getattr(_here, "owed", None) is None
        if self._outermost:
            _here.owed = []

    def __exit__(self, *_: Any) -> None:
        if not self._outermost:
            return
        owed, _here.owed = _here.owed, None
        later, _here.later = getattr(_here, "later", None), None
        try:
            for peer in owed:
                peer.write_queued()
        finally:
            for callback in later or ():
                callback()


def after_writes(callback: Callable[[], None]) -> None:
    """Runs ``callback`` once this thread has written the frames it owes (as it leaves its outermost
    :class:`writing_here`), or now when it owes none: a local waiter woken after a remote one's
    answer is on its way — woken first, it could take this CPU before that answer left."""
    if getattr(_here, "owed", None) is None:
        callback()
        return
    later = getattr(_here, "later", None)
    if later is None:
        later = _here.later = []
    later.append(callback)


class PeerThread:
    """The head's end of a connection threads serve (the copy channel, a task thread's own):
    ``send_message`` from any thread queues the frame, a sender thread writes the queue in order,
    and a thread reads the peer's messages into ``handle`` until the connection ends, then ``ended()``.

    ``send_message`` is called with the store's lock held (a ``replicate`` frame, an answer an ack
    released): it never waits for the socket, so a peer that stopped reading (SIGSTOPped, its
    buffers full) holds up only the sender thread, never the head's event loop or its other
    connections, until :data:`SEND_TIMEOUT` ends the connection."""

    def __init__(self, sock: socket.socket, what: str, log: Callable[[str], None]) -> None:
        tune(sock)
        self._sock = sock
        self._what = what
        self._log = log
        #: taken as ``with self._queue_lock`` (the C lock: ``Condition.__enter__`` is a Python call,
        #: and these are taken several times per write); ``_queued`` waits and notifies on it
        self._queue_lock = threading.Lock()
        self._queued = threading.Condition(self._queue_lock)
        self._frames: List[bytes] = []
        #: a thread writes the queue now (the sender thread, or one in :meth:`write_queued`): frames
        #: queued meanwhile are its to write, so they go in the order they were queued
        self._sending = False
        self._sending_ended = False
        #: the reading thread's look for the peer's next message before it blocks (None: it blocks
        #: at once); set by a connection whose peer sends its next within microseconds (a task in a loop)
        self.request_spinner: Any = None

    def start(self, welcome: bytes) -> None:
        """Welcomes the peer and starts reading and sending."""
        send_all(self._sock, welcome)
        start_thread(f"skyward-{self._what.replace(' ', '-')}", self._read)
        start_thread(f"skyward-{self._what.replace(' ', '-')}-sender", self._write)

    def send_message(self, message: Dict[str, Any]) -> None:
        data = collection_frames.pack(message)  # the store's values are native
        with self._queue_lock:
            if self._sending_ended:
                return  # the reader saw (or will see) the end
            self._queue(data)

    def _queue(self, data: bytes) -> None:
        """Queues ``data`` (with ``_queued`` held): for the thread writing now, else for this
        thread once it leaves :class:`writing_here`, else for the sender thread."""
        self._frames.append(data)
        if self._sending:
            return
        owed = getattr(_here, "owed", None)
        if owed is not None and DONT_WAIT:
            if self not in owed:
                owed.append(self)
        else:
            self._queued.notify()

    def write_queued(self) -> None:
        """Writes the queued frames on this thread, as far as the socket takes them without waiting;
        what is left (a peer that reads slowly or not at all, a failed write) is the sender
        thread's, whose deadline ends the connection."""
        with self._queue_lock:
            if self._sending or not self._frames or self._sending_ended:
                return
            self._sending = True
            frames, self._frames = self._frames, []
        while True:
            data = b"".join(frames) if len(frames) > 1 else frames[0]
            written = 0
            try:
                while written < len(data):
                    written += self._sock.send(memoryview(data)[written:], DONT_WAIT)
            except OSError:  # full (BlockingIOError), or failed: the sender thread writes it, or says why not
                pass
            with self._queue_lock:
                if written < len(data):
                    self._frames.insert(0, data[written:])
                    self._sending = False
                    self._queued.notify()
                    return
                if not self._frames or self._sending_ended:
                    self._sending = False
                    return
                frames, self._frames = self._frames, []

    def write_now(self, data: bytes) -> None:
        """Queues ``data`` and writes the queue on this thread as far as the socket takes it without
        waiting (:meth:`write_queued`: the rest is the sender thread's); nothing once the connection
        ended (the reader saw, or will see, the end)."""
        with self._queue_lock:
            if self._sending_ended:
                return
            self._frames.append(data)
            if self._sending:
                return  # the thread writing now writes it, in order
        self.write_queued()

    def quiet(self) -> bool:
        """Nothing is queued or being written, and the connection has not ended."""
        with self._queue_lock:
            return not (self._frames or self._sending or self._sending_ended)

    def _write(self) -> None:
        while True:
            with self._queue_lock:
                while (not self._frames or self._sending) and not self._sending_ended:
                    self._queued.wait()
                if self._sending_ended:
                    return
                self._sending = True
                frames, self._frames = self._frames, []
            try:
                send_all(self._sock, b"".join(frames) if len(frames) > 1 else frames[0])
            except OSError as error:
                # The reader sees the end (and says what it means).
                self._log(f"the {self._what} failed: {type(error).__name__}: {error}")
                self._close()
                return
            finally:
                with self._queue_lock:
                    self._sending = False

    def handle(self, message: Dict[str, Any]) -> None:
        raise NotImplementedError

    def ended(self) -> None:
        """The connection ended (on the reading thread)."""

    def _read(self) -> None:
        try:
            read_messages(self._sock, self.handle, self.request_spinner)
        except (OSError, ProtocolError, ValueError) as error:
            self._log(f"the {self._what} failed: {type(error).__name__}")
        finally:
            self._close()
            self.ended()

    def _close(self, release: bool = True) -> None:
        """Ends the connection: nothing more is sent, a blocked read returns; ``release``: the
        socket is closed too."""
        with self._queue_lock:
            self._sending_ended = True
            self._frames = []
            self._queued.notify()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if release:
            self._sock.close()


class CopyChannel:
    """The end of the node that offers to hold the copy: a thread connected to the head, answering
    each ``replicate`` frame with what ``on_replicate`` says (``acked`` with the seq it holds, or
    ``superseded``) — or a task thread of this process waiting for an answer the copy gives, which
    reads the frames itself meanwhile (:class:`~skyward.collection_copy_node.NodeEnd`); connected
    again after a loss, at once to a new address, after a growing pause to the same one (the head
    may be gone for good: the client then says where)."""

    def __init__(self, token: bytes, job: Callable[[], str | None], node: Callable[[], int],
                 on_replicate: Callable[[Dict[str, Any]], Dict[str, Any]], log: Callable[[str], None],
                 mailbox: Any = None) -> None:
        self._token = token
        #: this process's task threads' answers the head sends with its frames (a ``Mailbox``)
        self._mailbox = mailbox
        self._job = job
        self._node = node
        self._on_replicate = on_replicate
        self._log = log
        self._lock = threading.Lock()
        self._address: Tuple[str, int] | None = None
        self._sock: socket.socket | None = None
        #: set to end a pause before connecting again (the address changed, or the copy is let go)
        self._wake = threading.Event()

    def open(self, host: str, port: int, timeout: float, farewell: Dict[str, Any] | None = None) -> None:
        """Offers to hold the copy of the head at ``host:port``; ``farewell`` goes to the head it
        leaves first (``superseded``)."""
        with self._lock:
            if self._address == (host, port):
                return
            self._leave(farewell)
            self._address = (host, port)
        start_thread("skyward-collections-copy", lambda: self._run((host, port), timeout))

    def close(self, farewell: Dict[str, Any] | None = None) -> None:
        """This node holds the collections now (or the pool goes): no copy is kept for anyone."""
        with self._lock:
            self._address = None
            self._leave(farewell)

    def _leave(self, farewell: Dict[str, Any] | None) -> None:
        self._wake.set()
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            if farewell is not None:
                send_all(sock, pack_frame([to_wire(farewell, "message")]))
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _current(self, address: Tuple[str, int]) -> bool:
        with self._lock:
            return self._address == address

    def _run(self, address: Tuple[str, int], timeout: float) -> None:
        pause = _RETRY_FIRST
        while self._current(address):
            self._wake.clear()
            if self._serve(address, timeout):
                pause = _RETRY_FIRST
            if self._wake.wait(pause):
                continue  # told to move on (or let go): the loop's test decides
            pause = min(pause * 2, _RETRY_MOST)

    def _serve(self, address: Tuple[str, int], timeout: float) -> bool:
        """One connection to the head, until it ends; whether it was made."""
        sock: socket.socket | None = None
        try:
            first: Dict[str, Any] = {"node": str(self._node()), "replica": True}
            if self._mailbox is not None:
                first["mailbox"] = self._mailbox.key
            sock = peer_auth.connect_blocking(address[0], address[1], self._token, self._job(), first, "node", timeout)
            tune(sock)
            answer = functools.partial(send_all, sock)

            def each(message: Dict[str, Any]) -> None:
                if message.get("t") == "replicate":
                    reply = self._on_replicate(message)
                    try:
                        answer(collection_frames.pack(reply))
                    finally:
                        # Taken (not refused for an older epoch): the write is on both nodes, so
                        # this node's tasks may hear of it, even if the head is gone now.
                        if reply.get("t") == "acked" and message.get("answers") and self._mailbox is not None:
                            self._mailbox.deliver(message["answers"])

            # A task thread of this process waiting for an answer the copy gives reads the frames
            # itself while it waits; this thread reads the rest (collection_copy_node.py).
            end = NodeEnd(sock, each)
            with self._lock:
                if self._address != address:
                    return True
                self._sock = sock
                if self._mailbox is not None:
                    self._mailbox.copy_connected(address, end)
            end.run()
            return True
        except (OSError, ValueError, ProtocolError) as error:
            if self._current(address):
                self._log(f"the collections' copy channel to the head at {address[0]}:{address[1]} failed: "
                          f"{type(error).__name__}: {error}")
            return sock is not None
        finally:
            if sock is not None:
                sock.close()
            with self._lock:
                if self._sock is sock:
                    self._sock = None
                    if self._mailbox is not None:
                        self._mailbox.copy_connected(None)


__all__ = ["CopyChannel", "PeerThread", "after_writes", "read_messages", "send_all", "start_thread", "take_socket", "tune",
           "writing_here", "writing_now"]
