"""The head's end of the collections' copy channel (:mod:`skyward.collection_channel`): the
``replicate`` frames go out on it, and the node's ``acked`` answers are read by whichever thread
waits for one — the thread that made the write, when no other thread is reading — else by the
channel's own thread (docs/protocol.md, "Distributed collections")."""

from __future__ import annotations

import select
import socket
import struct
import threading
from typing import Any, Callable, Dict, List

from . import deferred_interrupts
from .collection_channel import DONT_WAIT, PeerThread, start_thread, writing_here, writing_now
from .collection_frames import acked as acked_frame
from .collection_frames import decoder, try_recv
from .collection_spin import Spinner
from .protocol import ProtocolError

#: seconds a reader blocked on the socket waits before looking whether its answer came another way
#: (the client's verdict that the node is lost, a newer holder: answers that take seconds already)
_READ_LOOK = 0.1
#: what the channel's own thread always watches for: the peer's end (a node leaving for a newer
#: holder shuts the connection after its ``superseded``), or an error
_END = getattr(select, "EPOLLRDHUP", 0) | getattr(select, "EPOLLHUP", 0) | getattr(select, "EPOLLERR", 0)


def _look_every(sock: socket.socket, seconds: float) -> None:
    """A blocking read on ``sock`` returns (``BlockingIOError``) after ``seconds`` with nothing read."""
    whole = int(seconds)
    try:  # a struct timeval; where the platform's differs, a blocked read waits for data or the end
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                        struct.pack("ll", whole, int((seconds - whole) * 1_000_000)))
    except OSError:
        pass


class HeadChannel(PeerThread):
    """The head's end of the copy channel: ``send`` (any thread) carries ``replicate`` frames; the
    acks are read by a thread waiting for one (:meth:`wait_acks`), else by the channel's own.

    ``acked(send, seq)`` and ``gone(send)`` are the replication's (it knows this end by ``send``);
    ``superseded(message)`` gets the node's ``superseded`` (in answer to an older epoch's frame, or
    as it leaves for a newer holder) on the channel's own thread, or on a thread of its own when a
    task's thread read it (following the newer holder may wait on an old one).

    One thread reads at a time (``_reader``). A task thread waiting for its write's ack blocks in
    ``recv`` on the socket itself, so the node's answer wakes the one thread that wanted it, with no
    ``poll`` before the read. The channel's own thread watches the socket (``epoll``) for its end
    always — a node that leaves for a newer holder says ``superseded`` and shuts the connection —
    and for data only while frames are unanswered that no task thread reads for (an ``eventual``
    write's, the loop's): ``_armed``, switched as that changes, not on every write — a wake-up it
    would take with a task's ack, or two ``epoll_ctl`` calls per write, cost more than the node's
    round trip. A reader whose answer came another way (the client's verdict that the node is
    lost, a newer holder) sees it within :data:`_READ_LOOK` (its ``recv`` times out that often)."""

    def __init__(self, sock: socket.socket, acked: Callable[[Any, Any], None], gone: Callable[[Any], None],
                 superseded: Callable[[Dict[str, Any]], None], log: Callable[[str], None]) -> None:
        super().__init__(sock, "collections copy channel", log)
        _look_every(sock, _READ_LOOK)
        self._acked = acked
        self._gone = gone
        self._superseded = superseded
        #: this end's send, one object (the replication compares it by identity)
        self.send: Callable[[Dict[str, Any]], None] = self.send_message
        #: the key of the node's process's mailbox (collection_mailbox.py): the answers to its task
        #: threads' operations may go with the frames (None: that process takes none)
        self.mailbox: str | None = None
        self._decoder = decoder()
        #: taken as ``with self._role_lock`` (the C lock, as :class:`PeerThread`'s ``_queue_lock``);
        #: ``_role`` waits and notifies on it
        self._role_lock = threading.Lock()
        self._role = threading.Condition(self._role_lock)
        #: the thread reading now (None: nobody)
        self._reader: threading.Thread | None = None
        #: frames queued that the node has not answered yet (each gets one ``acked`` or ``superseded``)
        self._unanswered = 0
        #: a reader saw the connection end (the channel's thread ends it)
        self._broken = False
        #: the channel's own thread's watch: the socket's end always, its data while ``_armed``
        self._watch = select.epoll() if hasattr(select, "epoll") else None
        self._armed = False
        if self._watch is not None:
            self._watch.register(sock, _END)
        #: the channel's own reading thread (it alone closes the socket)
        self._own_reader: threading.Thread | None = None
        #: threads waiting in :meth:`wait_acks` for the reader's answers or their turn (counted before
        #: they look at ``done()``: a reader that saw none after delivering owes no wake-up)
        self._waiters = 0
        #: the replication was told this end is gone (:meth:`ended`): an offer made after that is
        #: taken back by whoever made it
        self.told_gone = False
        #: writes sent and acked the fast way (:meth:`take_idle`, :meth:`read_ack`): the tests' witness
        self.fast_writes = 0
        self._ack_buffer = bytearray(16)
        #: the fast path's look for its ack before it blocks (collection_spin.py)
        self.spinner = Spinner()

    def send_message(self, message: Dict[str, Any]) -> None:
        with self._role_lock:
            self._unanswered += 1
            if not writing_now():  # the sender thread writes it: no thread here waits to read its ack
                self._leave_to_own()
        super().send_message(message)

    def write_queued(self) -> None:
        super().write_queued()
        with self._role_lock:  # a thread that wrote frames here and reads none of their acks (it got its answer)
            self._leave_to_own()

    def _leave_to_own(self) -> None:
        """The channel's own thread reads what is unanswered if no thread does (``_role`` held)."""
        if self._reader is None and self._unanswered and not self._waiters and not self._broken:
            self._arm(True)

    def _arm(self, on: bool) -> None:
        if self._watch is None or on == self._armed:
            return
        try:
            self._watch.modify(self._sock, _END | select.EPOLLIN if on else _END)
            self._armed = on
        except (OSError, ValueError):  # closed: the channel's own thread is ending it
            pass

    def claim_reading(self) -> bool:
        """Takes the turn to read for a frame about to be written, when nobody reads now (so the
        channel's own thread leaves it to this one); the thread then calls :meth:`wait_acks` with
        ``claimed`` this answer."""
        with self._role_lock:
            if self._reader is not None or self._broken or not self._unanswered:
                return False
            self._reader = threading.current_thread()
            return True

    def take_idle(self) -> bool:
        """The head's fast path (``Replication.apply_here``, the store's lock held): takes the turn to
        read and counts one frame unanswered, when the channel is idle — nobody reads or waits to,
        nothing unanswered, nothing queued or being written, the connection up. The caller then
        writes its frame (:meth:`write_now`) and reads its ack (:meth:`read_ack`, then
        :meth:`wait_acks` with ``claimed``), or lets the turn go (:meth:`let_go`)."""
        with self._role_lock:
            if (self._reader is not None or self._unanswered or self._waiters or self._broken
                    or not DONT_WAIT or not self.quiet()):
                return False
            self._reader = threading.current_thread()
            self._unanswered = 1
            return True

    def let_go(self) -> None:
        """Undoes :meth:`take_idle` (no frame was written)."""
        with self._role_lock:
            self._unanswered = 0
            self._reader = None
            self._leave_to_own()
            self._role.notify_all()

    def read_ack(self, seq: int) -> bool:
        """The first read for a frame written after :meth:`take_idle` (this thread the reader): at
        most one ``acked`` frame's bytes. Exactly ``seq``'s ack: taken here (the replication's
        ``acked``), no decoder; anything else (a ``superseded``, a part of a frame, bytes after a
        part the decoder holds) goes to the general decoder and is handled as :meth:`_read_now`
        would. The ack is looked for without waiting first (:attr:`spinner`: it is due within
        microseconds where the copy is near), then waited for. Whether the connection is up
        (:meth:`wait_acks` calls it, and lets the turn go whatever happens)."""
        with deferred_interrupts.held():
            try:
                count = self.spinner.look(lambda: try_recv(self._sock, self._ack_buffer, 16))
                if count is None:
                    count = self._sock.recv_into(self._ack_buffer, 16)
            except BlockingIOError:
                return True
            except OSError as error:
                self._end_seen(error)
                return False
            if not count:
                self._end_seen(None)
                return False
            if count == 16 and not self._decoder.pending and self._ack_buffer == acked_frame(seq):
                self.fast_writes += 1
                with writing_here():
                    self.handle({"t": "acked", "seq": seq})
                return True
            read = memoryview(self._ack_buffer)[:count]  # read outside the decoder's memory: given to it
            return self._decoded(lambda: self._decoder.feed(read))

    def wait_acks(self, done: Callable[[], bool], claimed: bool = False, seq: int | None = None) -> None:
        """Reads the node's answers on this thread while ``done()`` is false and a frame is
        unanswered, taking turns with other threads (one reads, the others wait for its answers or
        their turn). Returns when ``done()``, or when there is nothing to read for (the answer
        waited for is not an ack: a lock held by another, say), or the connection ended; the
        caller then waits as before. Whoever makes ``done()`` true off this channel's reading calls
        :meth:`wake`. ``seq``: the frame written after :meth:`take_idle` (``claimed``), whose ack is
        read first by :meth:`read_ack`."""
        if not claimed:
            with self._role_lock:
                self._waiters += 1
                try:
                    while True:
                        if done() or self._broken or (self._reader is None and not self._unanswered):
                            return
                        if self._reader is None:
                            self._reader = threading.current_thread()
                            break
                        self._role.wait()
                finally:
                    self._waiters -= 1
                    if self._reader is not threading.current_thread():
                        self._leave_to_own()
        try:
            if seq is not None and not self.read_ack(seq):
                return
            while not done() and self._unanswered and self._read_some(block=True):
                pass
        finally:
            with self._role_lock:
                self._reader = None
                self._leave_to_own()
                self._role.notify_all()

    def wake(self) -> None:
        """An answer a thread may wait for in :meth:`wait_acks` came (from any thread): a thread
        waiting for its turn is woken; the reader sees it when its ``recv`` returns."""
        if self._reader is threading.current_thread():
            return  # the reader itself: it looks at ``done()`` next, and wakes the others after its read
        with self._role_lock:
            self._role.notify_all()

    def _read_some(self, block: bool) -> bool:
        """One read, as the reader (waiting for it, up to :data:`_READ_LOOK`, when ``block``);
        whether the connection is still up. A stopped task's interrupt waits until its thread has
        taken what it read (:mod:`skyward.deferred_interrupts`): an ack read and not taken would
        leave the writes it acknowledges unanswered, and half a frame the stream undecodable."""
        with deferred_interrupts.held():
            return self._read_now(block)

    def _read_now(self, block: bool) -> bool:
        try:
            with self._decoder.get_buffer() as buffer:  # received into the decoder's memory: no copy
                count = self._sock.recv_into(buffer, 0, 0 if block else DONT_WAIT)
        except BlockingIOError:  # nothing yet (a blocking read that timed out: a look at ``done()``)
            return True
        except (OSError, ProtocolError) as error:
            self._end_seen(error)
            return False
        if not count:
            self._end_seen(None)
            return False
        return self._decoded(lambda: self._decoder.buffer_updated(count))

    def _decoded(self, frames: Callable[[], List[List[Dict[str, Any]]]]) -> bool:
        """The messages of the ``frames()`` the decoder completes, handled; whether the stream is sound."""
        try:
            messages = [message for frame in frames() for message in frame]
        except (ProtocolError, ValueError) as error:
            self._end_seen(error)
            return False
        with writing_here():  # the answers the acks release go out from this thread
            for message in messages:
                self.handle(message)
        if self._waiters:  # read after the answers went: a thread counted later sees its answer
            with self._role_lock:
                self._role.notify_all()  # the threads whose answers came
        return True

    def _end_seen(self, error: BaseException | None) -> None:
        if error is not None:
            self._log(f"the {self._what} failed: {type(error).__name__}")
        with self._role_lock:
            self._broken = True
            self._role.notify_all()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # the channel's thread sees it and ends the connection
        except OSError:
            pass

    def handle(self, message: Dict[str, Any]) -> None:
        kind = message.get("t")
        if kind in ("acked", "superseded"):
            with self._role_lock:
                self._unanswered = max(0, self._unanswered - 1)
        if kind == "acked":
            self._acked(self.send, message.get("seq"))
        elif kind == "superseded":  # the node knows a newer holder
            if threading.current_thread() is self._own_reader:
                self._superseded(message)
            else:
                # Not on a task's thread: following the newer holder may say farewell to an old
                # one (up to 30 s); what the task waits for is answered by it, waking the reader.
                start_thread("skyward-collections-superseded", lambda: self._superseded(message))

    def _read(self) -> None:
        me = self._own_reader = threading.current_thread()
        readable: Any = self._watch
        if readable is None:  # no epoll: the socket's data wakes this thread too, and it waits its turn
            readable = select.poll()
            readable.register(self._sock, select.POLLIN)
        try:
            while True:
                events = 0
                for _fd, each in readable.poll():  # the end, an error, or (armed) data
                    events |= each
                with self._role_lock:
                    if self._reader is not None and self._watch is not None and not events & _END:
                        # A task's thread reads (what woke this one, too): it leaves what is left
                        # to this thread as it goes (``_leave_to_own``); no waiting for its turn here,
                        # where every turn's end would wake this thread.
                        self._arm(False)
                        continue
                    while self._reader is not None and not self._broken:
                        self._role.wait()  # another thread reads (and may take what woke this one)
                    if self._broken:
                        break
                    self._reader = me
                try:
                    if not self._read_some(block=False):
                        break
                finally:
                    with self._role_lock:
                        self._reader = None
                        self._arm(bool(self._unanswered))  # off once all is answered: no wake-ups with a task's acks
                        self._role.notify_all()
        except (OSError, ValueError) as error:
            self._log(f"the {self._what} failed: {type(error).__name__}")
        finally:
            try:  # a thread still reading the socket sees the end, then lets go
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            with self._role_lock:
                self._broken = True
                self._role.notify_all()
                while self._reader is not None:
                    self._role.wait()
                if self._watch is not None:
                    self._watch.close()
            self._close()
            self.ended()

    def _close(self, release: bool = True) -> None:
        # The socket is closed by the channel's own thread only, once nobody reads it: a reader
        # blocked on it is woken by the shutdown (and its pipe), never left on a closed number.
        super()._close(release and threading.current_thread() is self._own_reader)

    def ended(self) -> None:
        self.told_gone = True
        self._gone(self.send)


__all__ = ["HeadChannel"]
