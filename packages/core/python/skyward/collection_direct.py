"""A task thread's own connection to the head's collections: the operations a task waits for, from a
node that does not hold them, without either worker's event loop on the way.

Through the worker, an operation went task thread → this worker's loop → the node-to-node link →
the head's loop → back the same way: four hand-offs between threads around one network round trip.
Here the task's thread (of the thread executor) keeps a blocking connection of its own to the head's
authority (the pool's peer handshake, ``{"node", "direct": true}``), sends ``op`` frames on it and
reads their ``answer``/``refused``; on the head, a thread reads that connection and applies each
operation itself (:mod:`skyward.collection_replica`, ``threadsafe``), answering on the same
connection from whichever thread has the answer (the copy's ack, a lock handed over). The frames are
the link's (docs/protocol.md, "Distributed collections"); ``ended`` still goes on the worker's link,
and the head ends the owners of a direct connection that goes (a node lost). An ``async`` task's
operations go through its worker as before (a blocking call would stop its event loop).
"""

from __future__ import annotations

import itertools
import select
import socket
import threading
import weakref
from typing import Any, Callable, Dict, Protocol, Set, Tuple

from . import peer_auth
from .collection_channel import PeerThread, send_all, tune
from .collection_store import Answer, Owner
from .collection_frames import decoder, pack, try_recv
from .collection_mailbox import Mailbox, Waiting, answer_message, message_answer
from .collection_spin import Spinner
from .protocol import ProtocolError



class Store(Protocol):
    """What the head's end needs of the store (a ``collection_replica.Replication``)."""

    def apply(self, owner: Owner, request: Any, reply: Callable[[Answer], None], request_id: Any,
              threadsafe: bool = False) -> None: ...

    def owner_ended(self, owner: Owner, then: Callable[[], None] | None = None) -> None: ...

    def apply_here(self, owner: Owner, request: Any, reply: Callable[[Answer], None], request_id: Any,
                   forward: Tuple[str, Any] | None = None) -> None: ...


class DirectConnection(PeerThread):
    """The head's end of one task thread's connection: applies its operations on this thread."""

    def __init__(self, sock: socket.socket, store: Callable[[], Store], closed: Callable[[], None],
                 log: Callable[[str], None], mailbox: Any = None) -> None:
        super().__init__(sock, "collections connection of a task", log)
        #: the key of the caller's process's mailbox (its copy channel may carry the answers), if any
        self._mailbox = mailbox if type(mailbox) is str else None
        #: the store served now (a node promoted again serves a new one)
        self._store = store
        self._closed = closed
        #: the owners that operated here (ended when the connection goes, unless ended before)
        self.owners: Set[Owner] = set()
        # A task in a loop sends its next operation within microseconds of its answer.
        self.request_spinner = Spinner()

    def handle(self, message: Dict[str, Any]) -> None:
        owner, request_id = message.get("owner"), message.get("id")
        if message.get("t") != "op" or type(owner) is not str:
            return
        self.owners.add(owner)
        # This thread writes the copy's frame, reads its ack and sends the answer (no hand-off);
        # or the copy answers it, when the copy is the caller's process's (collection_mailbox.py).
        forward = (self._mailbox, request_id) if self._mailbox and message.get("copy") is True else None
        self._store().apply_here(owner, message.get("op"),
                                 lambda answer: self.send_message(answer_message(request_id, answer)),
                                 ("direct", request_id), forward)

    def ended(self) -> None:
        self._closed()
        for owner in list(self.owners):  # its node is gone (or cut off): its tasks hold nothing
            self._store().owner_ended(owner)


class _Connection:
    __slots__ = ("sock", "address", "decoder", "answers", "dropped", "mailbox", "poll", "copy_end", "copy_poll",
                 "spinner", "__weakref__")

    def __init__(self, sock: socket.socket, address: Tuple[str, int]) -> None:
        self.sock = sock
        self.address = address
        self.decoder = decoder()
        self.answers: Dict[Any, Answer] = {}
        #: let go by :meth:`DirectCaller.drop` (its thread makes a new one on its next operation)
        self.dropped = False
        #: where the copy's answers come (made on the first operation that may be answered so)
        self.mailbox: Waiting | None = None
        self.poll: Any = None
        #: the copy channel's end this thread reads while it waits (collection_copy_node.py), and
        #: the poll of it beside this connection
        self.copy_end: Any = None
        self.copy_poll: Any = None
        #: this thread's look for its answer before it blocks (collection_spin.py)
        self.spinner = Spinner()

    def close(self) -> None:
        self.sock.close()
        if self.mailbox is not None:
            self.mailbox.close()


class DirectCaller:
    """A node's side: each task thread's connection to the head (made on its first operation, made
    again when the head moved or the connection was lost)."""

    def __init__(self, token: bytes, job: Callable[[], str | None], node: Callable[[], int],
                 connect_timeout: float, mailbox: Mailbox | None = None) -> None:
        self._token = token
        #: this process's answers given by the copy it holds (None: every answer comes from the head)
        self._mailbox = mailbox
        self._job = job
        self._node = node
        self._timeout = connect_timeout
        self._local = threading.local()
        self._ids = itertools.count(1)
        #: every thread's connection, for :meth:`drop` (weakly: one goes with its thread, as a
        #: thread a task started ends)
        self._connections: "weakref.WeakSet[_Connection]" = weakref.WeakSet()
        self._connections_lock = threading.Lock()

    def drop(self) -> None:
        """The collections moved: every connection to the holder before is let go, and a thread
        waiting on one is answered that it was lost — a holder that stopped, or whose host was cut
        off or powered off, never closes it."""
        with self._connections_lock:
            connections, self._connections = list(self._connections), weakref.WeakSet()
        for connection in connections:
            connection.dropped = True
            try:
                connection.sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it
            except OSError:
                pass

    def call(self, address: Tuple[str, int], owner: Owner, request: Any) -> Answer:
        """Applies ``request`` (already in wire form) for ``owner`` at the head at ``address`` and
        waits for the answer."""
        connection: _Connection | None = getattr(self._local, "connection", None)
        if connection is not None and (connection.address != address or connection.dropped):
            self._forget(connection)
            connection = None
        request_id = next(self._ids)
        try:
            if connection is None:
                first = {"node": str(self._node()), "direct": True}
                if self._mailbox is not None:
                    first["mailbox"] = self._mailbox.key
                sock = peer_auth.connect_blocking(address[0], address[1], self._token, self._job(),
                                                  first, "node", self._timeout)
                tune(sock)
                connection = self._local.connection = _Connection(sock, address)
                with self._connections_lock:
                    self._connections.add(connection)
            connection.answers.clear()  # an answer that came twice (the copy's, then the head's)
            message = {"t": "op", "id": request_id, "owner": owner, "op": request}
            mailbox = self._mailbox
            through_copy = mailbox is not None and mailbox.answers_from(address)
            reading: Any = None  # the copy channel's end this thread reads while it waits
            if through_copy:
                message["copy"] = True
                if connection.mailbox is None:
                    connection.mailbox = Waiting()
                    connection.poll = select.poll()
                    connection.poll.register(connection.sock, select.POLLIN)
                    connection.poll.register(connection.mailbox.wakes, select.POLLIN)
                connection.mailbox.answers.clear()  # one the head answered first, the copy too
                mailbox.wait(request_id, connection.mailbox)  # type: ignore[union-attr]
                # Before the op goes: the copy's frame may come back before the send returns.
                end = mailbox.copy_end  # type: ignore[union-attr]
                if end is not None and end.claim():
                    reading = end
            try:
                send_all(connection.sock, pack(message, wire=True))
                while request_id not in connection.answers:
                    if reading is not None:
                        if not self._read_copy(connection, reading, request_id):
                            reading.release()  # the copy's connection ended: its answers come the usual way
                            reading = None
                        continue
                    if through_copy and (not self._wait_either(connection, request_id)
                                         or request_id in connection.answers):
                        continue
                    self._read(connection)
                return connection.answers.pop(request_id)
            finally:
                if reading is not None:
                    reading.release()
                if through_copy:
                    mailbox.done(request_id)  # type: ignore[union-attr]
        except (OSError, ValueError, ProtocolError) as error:
            if connection is not None:
                self._forget(connection)
            self._local.connection = None
            # What was asked is lost with the connection: a wait cannot be known to have ended or not.
            return ("error", "CancelledError", f"the connection to the head node's collections at {address[0]}:"
                    f"{address[1]} was lost ({type(error).__name__})")

    def _read_copy(self, connection: _Connection, end: Any, request_id: Any) -> bool:
        """Waits for the copy channel's frames (read here: the copy's answer is in one) or the head's
        connection, and reads what came; whether the copy's connection is still up."""
        if connection.copy_end is not end:
            connection.copy_end, connection.copy_poll = end, select.poll()
            connection.copy_poll.register(connection.sock, select.POLLIN)
            connection.copy_poll.register(end.sock, select.POLLIN)
        up = True
        head_readable = False
        copy_poll = connection.copy_poll
        for fd, _events in connection.spinner.look(lambda: copy_poll.poll(0) or None) or copy_poll.poll():
            if fd == connection.sock.fileno():
                head_readable = True
            elif not end.read_some():
                up = False
        mailbox_answers = connection.mailbox.answers  # type: ignore[union-attr]
        if request_id in mailbox_answers:
            connection.answers[request_id] = mailbox_answers.pop(request_id)
        elif head_readable:
            self._read(connection)
        return up

    @staticmethod
    def _wait_either(connection: _Connection, request_id: Any) -> bool:
        """Waits for the head's connection or the copy's answer; whether the connection has data."""
        readable = False
        if request_id in connection.mailbox.answers:  # type: ignore[union-attr]  # delivered by this thread, reading the copy
            connection.answers[request_id] = connection.mailbox.answers.pop(request_id)  # type: ignore[union-attr]
            return False
        poll = connection.poll
        for fd, _events in connection.spinner.look(lambda: poll.poll(0) or None) or poll.poll():
            if fd == connection.sock.fileno():
                readable = True
            else:
                connection.mailbox.drain()  # type: ignore[union-attr]
        mailbox_answers = connection.mailbox.answers  # type: ignore[union-attr]
        if request_id in mailbox_answers:
            connection.answers[request_id] = mailbox_answers.pop(request_id)
        return readable

    @staticmethod
    def _read(connection: _Connection) -> None:
        sock = connection.sock
        with connection.decoder.get_buffer() as buffer:  # into the decoder's memory: no copy
            count = connection.spinner.look(lambda: try_recv(sock, buffer))
            if count is None:
                count = sock.recv_into(buffer)
        if not count:
            raise ConnectionError("the head closed the connection")
        for messages in connection.decoder.buffer_updated(count):
            for message in messages:
                connection.answers[message.get("id")] = message_answer(message)

    def _forget(self, connection: _Connection) -> None:
        with self._connections_lock:
            self._connections.discard(connection)
        connection.close()


__all__ = ["DirectCaller", "DirectConnection", "answer_message", "message_answer"]
