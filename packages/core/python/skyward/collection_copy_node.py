"""The node's end of the collections' copy channel (:mod:`skyward.collection_channel`): the head's
``replicate`` frames are read by a task thread of this process that waits for an answer the copy
gives it (docs/protocol.md, "Answered by the copy"), else by the channel's own thread.

When the copy's thread read every frame, a write from a task on this node took two wake-ups here
after the head's frame: the copy's thread (it takes the frame, acks it, hands the answer over a
socket pair) and then the task's thread. Now the task thread takes the turn to read
(:meth:`NodeEnd.claim`) before it sends its operation, and waits on the copy's socket and its own
connection to the head at once: the frame wakes it alone, and it takes the frame, acks it and finds
its own answer in it, as the copy's thread would have (one reader at a time, so the frames are taken
in order). The channel's own thread watches the socket (``epoll``) for its data only while no task
thread reads (a frame nobody waits on: a write of the head's own tasks, or of the client), and
always for its end.

Whoever reads, a read with no frame begun takes the whole compact ``replicate`` frames at its front
on a fast path (:func:`skyward.collection_frames.take_replicate`: precompiled layouts, no decoder),
and gives the rest (any other frame, a partial one, and everything after it) to the general
decoder, so frames are taken in order however the stream is cut into reads.
"""

from __future__ import annotations

import select
import socket
import threading
from typing import Any, Callable, Dict

from . import collection_frames, deferred_interrupts
from .collection_spin import Spinner
from .protocol import ProtocolError

#: what the channel's own thread always watches for: the connection's end, or an error
_END = getattr(select, "EPOLLRDHUP", 0) | getattr(select, "EPOLLHUP", 0) | getattr(select, "EPOLLERR", 0)
#: a read that returns at once when nothing is there (0 where there is none: no thread but the
#: channel's own reads then)
_DONT_WAIT = getattr(socket, "MSG_DONTWAIT", 0)
#: bytes one read takes in on the fast path (a frame longer than this, a ``full`` one, continues in
#: the general decoder's memory)
_FAST_BYTES = 64 * 1024


class NodeEnd:
    """One connection of the copy channel, on the node holding the copy: ``each`` takes every
    message read (acks a ``replicate`` and gives the answers it carries), on whichever thread has
    the turn to read — the channel's own (:meth:`run`) or a task thread that claimed it."""

    def __init__(self, sock: socket.socket, each: Callable[[Dict[str, Any]], None]) -> None:
        self.sock = sock
        self._each = each
        self._decoder = collection_frames.decoder()
        #: what a read takes in when no frame is begun (the fast path reads its frames here)
        self._fast = bytearray(_FAST_BYTES)
        #: frames taken by the fast path (what the tests observe of it)
        self.fast_frames = 0
        #: taken as ``with self._lock`` (the C lock); ``_turn`` waits and notifies on it
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)
        #: the thread reading now (its ident; None: nobody)
        self._reader: int | None = None
        #: the channel's own thread waits for its turn (a task thread reads)
        self._own_waits = False
        #: the channel's own thread's look for the next frame before it blocks (a writer in a loop
        #: sends its next within microseconds: collection_spin.py)
        self.spinner = Spinner()
        #: the connection ended (or failed: ``_error``); nobody claims it any more
        self._broken = False
        self._error: BaseException | None = None
        self._watch = select.epoll() if hasattr(select, "epoll") and _DONT_WAIT else None
        self._armed = self._watch is not None
        if self._watch is not None:
            self._watch.register(sock, _END | select.EPOLLIN)

    def claim(self) -> bool:
        """Takes the turn to read for a task thread about to wait for an answer the copy may give
        (the channel's own thread stops watching the data, so the frame wakes that thread alone);
        the thread then reads with :meth:`read_some` when the socket is readable, and calls
        :meth:`release` when it has its answer. False when another thread reads, or it ended."""
        if self._watch is None:
            return False
        with self._lock:
            if self._reader is not None or self._broken:
                return False
            self._reader = threading.get_ident()
            self._arm(False)
            return True

    def release(self) -> None:
        """The claiming thread lets go: the channel's own thread reads what comes from now on."""
        with self._lock:
            self._reader = None
            if not self._broken:
                self._arm(True)
            if self._own_waits:
                self._turn.notify_all()

    def _arm(self, on: bool) -> None:
        if self._watch is None or on == self._armed:
            return
        try:
            self._watch.modify(self.sock, _END | select.EPOLLIN if on else _END)
            self._armed = on
        except (OSError, ValueError):  # closed: the channel's own thread is ending it
            pass

    def read_some(self) -> bool:
        """One read that does not wait, by the thread holding the turn, and its messages taken;
        whether the connection is still up (when not, it is shut, and the channel's own thread
        ends it). A stopped task's interrupt waits until its thread has taken what it read
        (:mod:`skyward.deferred_interrupts`): half a frame taken would be half a write in the copy."""
        with deferred_interrupts.held():
            return self._read_some()

    def _read_some(self) -> bool:
        try:
            if self._decoder.pending:  # a frame begun: the general decoder has the rest
                with self._decoder.get_buffer() as buffer:  # received into the decoder's memory: no copy
                    count = self.sock.recv_into(buffer, 0, _DONT_WAIT)
                if not count:
                    self._end(None)
                    return False
                for messages in self._decoder.buffer_updated(count):
                    for message in messages:
                        self._each(message)
                return True
            # The fast path: whole compact replicate frames (nearly every frame) read with
            # precompiled layouts; whatever else (another frame, a partial one) and everything after
            # it goes to the general decoder, so the frames are taken in order either way.
            data = self._fast
            count = self.sock.recv_into(data, _FAST_BYTES, _DONT_WAIT)
            if not count:
                self._end(None)
                return False
            at = 0
            while at < count:
                taken = collection_frames.take_replicate(data, at, count)
                if taken is None:
                    break
                message, at = taken
                self.fast_frames += 1
                self._each(message)
            if at < count:
                with memoryview(data) as view, view[at:count] as rest:
                    frames = self._decoder.feed(rest)
                for messages in frames:
                    for message in messages:
                        self._each(message)
            return True
        except (BlockingIOError, InterruptedError):  # another reader took it first
            return True
        except (OSError, ProtocolError, ValueError) as error:  # its ack not sent, or a bad frame
            self._end(error)
            return False

    def _end(self, error: BaseException | None) -> None:
        with self._lock:
            self._broken = True
            if self._error is None:
                self._error = error
            self._turn.notify_all()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # the channel's own thread sees it and ends the connection
        except OSError:
            pass

    def run(self) -> None:
        """The channel's own thread: reads what no task thread reads, until the connection ends
        (raises what failed it, if anything did). The socket is the caller's to close once this
        returns: nobody reads it any more."""
        if self._watch is None:  # no epoll: this thread alone reads, blocking on the socket
            collection_frames.read_messages(self.sock, self._each)
            return
        me = threading.get_ident()
        try:
            while True:
                watch = self._watch
                if not self.spinner.look(lambda: watch.poll(0) or None):
                    watch.poll()  # the end, an error, or (armed) data
                with self._lock:
                    while self._reader is not None and not self._broken:
                        self._own_waits = True
                        self._turn.wait()  # a task thread reads (and takes what woke this one)
                    self._own_waits = False
                    if self._broken:
                        break
                    self._reader = me
                try:
                    # No interrupt hold: this thread runs no task (nothing sends it an interrupt).
                    if not self._read_some():
                        break
                finally:
                    with self._lock:
                        self._reader = None
        finally:
            with self._lock:
                self._broken = True
                while self._reader is not None and self._reader != me:  # a task thread sees the end, then lets go
                    self._own_waits = True
                    try:
                        self.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    self._turn.wait(0.1)
                self._own_waits = False
            self._watch.close()
        if self._error is not None:
            raise self._error


__all__ = ["NodeEnd"]
