"""Where this worker's collection operations go: to the store it holds when it is the head (node 0),
else over the link to the head (see :mod:`skyward.collection_store`, :mod:`skyward.collection_link`).

Three kinds of caller:

- a task on this node: its thread applies the operation itself (``direct``: to the store here, or
  on its own connection to the head, :mod:`skyward.collection_direct`), else a ``subtask`` for
  ``skyward.collections:op`` (an async task's, a process child's relayed through this worker); its
  owner is ``"<node>/<task id>"``, ended when the task ends;
- the client, on its worker connection to the head (``coll``, ``coll_cancel``; answered with
  ``coll_answer``): its owners are its handles (``client…``), ended when that connection goes;
- another node's worker, over the head's :class:`~skyward.collection_link.AuthorityServer`.

The store outlives any client: a detached pool keeps its collections on the head, and a client
that attaches (or comes back after being killed) reads them where they are. Every other node holds
the head's copy when the head picks it (:mod:`skyward.collection_replica`); the client promotes the
newest copy when the head is lost (``$replica``, ``$promote``), and tells the head when another
node is lost (``$lost``: the verdict that lets it answer without that node's copy).

Epochs keep one holder: the first head holds epoch 0; the client's ``$replica [epoch]`` fences a
node at a newer epoch (it refuses older ``replicate`` frames from then on), ``$promote [lost,
epoch]`` makes the newest copy the holder of that epoch, and ``authority`` carries the epoch to
every other node. A node leaving an older holder tells it (``superseded``), and the superseded
holder refuses every pending and later operation with an error naming where the collections are;
its own tasks reach the new holder over the link like any other node's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import threading
from typing import Any, Callable, Dict, List, Protocol, Set

from .collection_channel import CopyChannel, after_writes
from .collection_direct import DirectCaller
from .collection_mailbox import Mailbox
from .collection_link import CONNECT_TIMEOUT, AuthorityLink, AuthorityServer, wire_frame
from .collection_replica import Replication, load
from .cluster_setup import ClusterSetup
from .collection_store import Answer, CollectionStore, Owner, ended
from .connection import Connection
from .context import SubtaskOutcome, TaskContext, runtime
from .dispatch import SubtaskError
from .protocol import Message, decode_frame, is_plain, pack_frame, to_wire
from .task import Task
from .task_table import TaskTable
from .values import restore



def copy_wait() -> float:
    """Seconds a new head holds writes for the pool's other nodes to connect and take the copy
    (``SKYWARD_COLLECTIONS_COPY_WAIT``, default 10); after that it answers alone (with a log line)
    until one does."""
    try:
        return max(0.0, float(os.environ.get("SKYWARD_COLLECTIONS_COPY_WAIT", "10")))
    except ValueError:
        return 10.0


REF = "skyward.collections:op"
#: what ``$replica`` answers on the node that holds the collections (2^53 - 1: a JavaScript number)
MAX_SAFE_SEQ = 2**53 - 1

DISABLED = ("distributed collections need the nodes to form a cluster: the pool was made with options.cluster: "
            "false (set it to true, the default, to use dict, set, counter, queue, barrier and lock)")

Deliver = Callable[[Task, int, SubtaskOutcome], None]


#: values that are their own wire form and their own decoding, and that nobody can change
_SCALARS = (int, str, bool, type(None))


def _scalars(value: Any) -> bool:
    """Whether ``value`` is such a value, or a list of them (most operations and answers: a counter's
    ``increment 1``, a ``[found, value]``), which need no trip through the encoder."""
    if type(value) in _SCALARS:
        return True
    return type(value) is list and all(type(item) in _SCALARS for item in value)


def _native(value: Any) -> Any:
    """A task's wire-form arguments as the decoder gives them (what the store keeps)."""
    if _scalars(value):
        return value
    return decode_frame(pack_frame([{"t": "v", "v": value}]))[0]["v"]


def _copy(value: Any) -> Any:
    """A value the store holds, as a copy the task may change freely."""
    if _scalars(value):
        return list(value) if type(value) is list else value
    return decode_frame(wire_frame({"t": "v", "v": value}))[0]["v"]


def _outcome(answer: Answer, node: int) -> SubtaskOutcome:
    if answer[0] == "value":
        return ("value", answer[1])
    kind = "cancelled" if answer[1] == "CancelledError" else "exception"
    return ("error", {"kind": kind, "type": answer[1], "message": answer[2], "traceback": "", "node": node})


class WorkerParts(Protocol):
    """What this needs of the worker that wires it."""

    loop: asyncio.AbstractEventLoop
    node: int
    cluster: ClusterSetup
    table: TaskTable

    def log(self, text: str) -> None: ...


class CollectionService:
    """This worker's part in the pool's collections."""

    def __init__(self, worker: WorkerParts, token: bytes) -> None:
        self._loop = worker.loop
        self._node = lambda: worker.node
        self._cluster = lambda: worker.cluster.message
        self._deliver: Deliver = worker.table.deliver_subresult
        worker.table.ended = self.task_ended
        self._log = worker.log
        #: the store with its replication, on the node that holds the collections
        self.head: Replication | None = None
        #: this node's copy of the head's collections, when it is the replica (the epoch and last seq it holds)
        self.replica: CollectionStore | None = None
        self.replica_epoch = 0
        self.replica_seq = 0
        #: the newest epoch this node knows of, and where its holder serves (when known)
        self.epoch = 0
        self._where: Dict[str, Any] | None = None
        self._server: AuthorityServer | None = None
        self._link = AuthorityLink(token, self._job, self._node, self._log)
        #: answers to this process's task threads that the head sends with the copy's frames
        self._mailbox = Mailbox()
        #: this node's offer to hold the copy: read and answered on a thread of its own
        self._copy_channel = CopyChannel(token, self._job, self._node, self._replicated, self._log, self._mailbox)
        #: guards the copy and the epochs (the copy channel's thread takes ``replicate`` frames)
        self._replica_lock = threading.RLock()
        self._direct_ids = itertools.count(1)
        #: task threads' own connections to the head, when this node does not hold the collections
        self._direct_caller = DirectCaller(token, self._job, self._node, CONNECT_TIMEOUT, self._mailbox)
        self._token = token
        #: tasks of this node that used a collection (told to the authority when they end)
        self._owners: Set[str] = set()
        #: the client handles that operated over each client connection
        self._client_owners: Dict[Connection, Set[Owner]] = {}
        runtime.collection_caller = self.direct

    def _job(self) -> str | None:
        return (self._cluster() or {}).get("job_id")

    @property
    def is_head(self) -> bool:
        """Whether this node holds the pool's collections (and no newer holder superseded it)."""
        return self.head is not None and self.head.superseded is None

    def handlers(self) -> Dict[str, Callable[[Connection, Message], None]]:
        """The client messages this answers, by type."""
        return {"coll": self.client_op, "coll_cancel": self.client_cancel, "authority": self.authority}

    def ready(self, node: int) -> Message:
        """The ``ready`` answer to ``cluster``: the head's names where it serves the other nodes."""
        address = self.cluster_applied(node)
        return {"t": "ready", "collections": address} if address is not None else {"t": "ready"}

    def take(self, task: Task, sub: int, fn: str, args: Any) -> bool:
        """Whether subtask ``sub`` of ``task`` is a collection operation: then it is answered here."""
        if fn != REF:
            return False
        self.task_op(task, sub, args)
        return True

    def cluster_applied(self, node: int) -> Dict[str, Any] | None:
        """The cluster message was applied: the node it names (``collections_node``, default 0: the
        head) holds the store, kept across a client's attach, and serves the other nodes; answers
        where, for the ``ready`` reply (None elsewhere). A node that holds them since a promotion
        goes on holding them."""
        cluster = self._cluster() or {}
        # A node that ever knew a promotion never starts an empty store (an old cluster message's
        # ``collections_node`` may name it).
        if self.head is None and self.epoch == 0 and node == cluster.get("collections_node", 0):
            self.head = Replication(CollectionStore(self._loop), self._loop)
            others = [str(peer.get("node")) for peer in cluster.get("peers") or []
                      if type(peer) is dict and type(peer.get("node")) is int and peer.get("node") != node]
            if others:
                self.head.expect(others)
                self._loop.call_later(copy_wait(), self._copy_late, self.head, others)
        if not self.is_head:
            return None
        # Served even by a pool of one: a node that joins later reaches it.
        return self._listen(cluster)

    def _copy_late(self, head: Replication, nodes: List[str]) -> None:
        if head is self.head and head.stop_expecting(nodes):
            self._log(f"no other node connected to hold a copy of the collections within {copy_wait():.0f} s "
                      f"(nodes {', '.join(nodes)}): this node answers alone, one copy only, until one does")

    def _listen(self, cluster: Dict[str, Any]) -> Dict[str, Any] | None:
        assert self.head is not None
        if self._server is None:
            self._server = AuthorityServer(self.head, self._token, self._job, self._log)
            self._server.on_superseded = self._superseded
        self._server.store = self.head
        node = self._node()
        own = [peer for peer in cluster.get("peers") or [] if type(peer) is dict and peer.get("node") == node]
        host = own[0].get("private_ip") if own else None
        try:
            address = self._server.listen(host if type(host) is str and host else "127.0.0.1")
        except OSError as error:
            self._log(f"the head cannot serve the collections to its peers: {error}")
            return None
        return {"addr": address[0], "port": address[1], "epoch": self.head.epoch}

    def authority(self, connection: Connection, message: Message) -> None:
        """``authority``: where the head's collections listen, and their epoch (sent by the client to
        every node); news older than what this node knows is ignored."""
        host, port, epoch = message.get("addr"), message.get("port"), message.get("epoch", 0)
        if type(host) is not str or type(port) is not int or type(epoch) is not int or epoch < self.epoch:
            return
        if self.is_head and epoch <= self.head.epoch:  # type: ignore[union-attr]
            return
        self._follow(epoch, host, port)

    def _follow(self, epoch: int, host: str, port: int) -> None:
        """The holder of ``epoch`` serves at ``host:port``: a head of an older epoch is superseded, the
        link goes there (telling the holder it leaves), and offers to hold the copy."""
        with self._replica_lock:
            self.epoch = max(self.epoch, epoch)
            self._where = {"addr": host, "port": port}
        if self.head is not None and self.head.supersede(epoch, f"serves them at {host}:{port}"):
            self._log(f"no longer holds the collections: a newer holder (epoch {epoch}) serves them at {host}:{port}")
        farewell = {"t": "superseded", "epoch": epoch, "addr": host, "port": port}
        if self._link.address != (host, port):  # a thread waiting on the holder before is woken
            self._direct_caller.drop()
        self._link.point_at(host, port, farewell)
        # Every node offers to hold the copy; the head picks one.
        self._copy_channel.open(host, port, CONNECT_TIMEOUT, farewell)

    def _superseded(self, message: Dict[str, Any]) -> None:
        """A ``superseded`` frame to this head: a holder of a newer epoch has the collections."""
        epoch, host, port = message.get("epoch"), message.get("addr"), message.get("port")
        if self.head is None or type(epoch) is not int or epoch < self.head.epoch or (
                epoch == self.head.epoch and self.head.superseded is None):
            return
        if type(host) is str and type(port) is int:
            self._follow(epoch, host, port)
        elif self.head.supersede(epoch, "was promoted (the client tells every node where it serves them)"):
            with self._replica_lock:  # the copy channel's thread raises it too: never lowered
                self.epoch = max(self.epoch, epoch)
            self._log(f"no longer holds the collections: a newer holder (epoch {epoch}) was promoted")

    def _replicated(self, message: Dict[str, Any]) -> Dict[str, Any]:
        """A ``replicate`` frame from the head: this node's copy takes it, and answers ``acked`` with
        its seq; a frame of an older epoch than this node knows (or any, while this node holds the
        collections) is refused with ``superseded``. On the copy channel's thread."""
        with self._replica_lock:
            epoch = message.get("epoch", 0)
            if type(epoch) is not int or epoch < self.epoch or self.is_head:
                return {"t": "superseded", "epoch": self.epoch, **(self._where or {})}
            self.epoch = epoch
            if message.get("full") is True or self.replica is None or epoch != self.replica_epoch:
                self.replica = CollectionStore(self._loop)
            for state in message.get("states") or []:
                if type(state) is dict:
                    load(self.replica, state)
            self.replica_epoch = epoch
            self.replica_seq = message.get("seq") if type(message.get("seq")) is int else self.replica_seq
            return {"t": "acked", "seq": self.replica_seq}

    def _copy_held(self, fence: Any) -> Answer:
        """``$replica [epoch]``: the epoch and seq of the copy this node holds (None: no copy); a
        newer ``epoch`` fences it first: it refuses the older holder's frames from then on, so no
        write the older holder acknowledges later is missing from the copies compared."""
        with self._replica_lock:
            if type(fence) is int and fence > self.epoch:
                self.epoch, self._where = fence, None
            if self.is_head:  # holding them already (promoted earlier) is newer than any copy
                return ("value", {"epoch": self.head.epoch, "seq": MAX_SAFE_SEQ})  # type: ignore[union-attr]
            if self.replica is None:
                return ("value", None)
            return ("value", {"epoch": self.replica_epoch, "seq": self.replica_seq})

    def _promote(self, lost: Any, epoch: Any) -> Answer:
        """``$promote [lost, epoch]``: the head (node ``lost``) is gone and this node's copy is the
        newest: it holds the collections from now on, in ``epoch`` (one past what it knows when not
        given); the lost node's tasks hold no lock any more."""
        with self._replica_lock:
            return self._promoted(lost, epoch)

    def _promoted(self, lost: Any, epoch: Any) -> Answer:
        epoch = max(epoch if type(epoch) is int else self.epoch + 1, self.epoch)
        self.epoch = epoch
        if self.is_head:
            self.head.epoch = max(self.head.epoch, epoch)  # type: ignore[union-attr]
            return ("value", self._listen(self._cluster() or {}))
        if self.replica is None:
            return ("error", "RuntimeError", f"node {self._node()} holds no copy of the collections")
        store, self.replica = self.replica, None
        for owner in store.holders():
            if owner.startswith(f"{lost}/"):
                store.owner_ended(owner)
        self.head = Replication(store, self._loop, epoch)
        address = self._listen(self._cluster() or {})
        self._where = {"addr": address["addr"], "port": address["port"]} if address is not None else None
        # The holder it leaves (if it is still there) stops acknowledging: its writes would be lost.
        farewell = {"t": "superseded", "epoch": epoch, **(self._where or {})}
        self._link.close(farewell)
        self._copy_channel.close(farewell)
        self._direct_caller.drop()
        self._log(f"holds the collections now, epoch {epoch} (node {lost}, which held them, was lost)")
        return ("value", address)

    def _disabled(self) -> bool:
        return (self._cluster() or {}).get("collections") is False

    # -- a task's operations --------------------------------------------------------------------

    def task_op(self, task: Task, sub: int, args: Any) -> None:
        owner = f"{self._node()}/{task.id}"
        node = self._node()
        if self._disabled():
            self._deliver(task, sub, _outcome(("error", "RuntimeError", DISABLED), node))
            return
        if task.state == "done":  # a thread of an ended task (it caught its interrupt, or outlived it)
            self._deliver(task, sub, _outcome(ended(owner), node))
            return
        self._owners.add(owner)

        def reply(answer: Answer) -> None:
            if answer[0] == "value" and in_process:
                answer = ("value", _copy(answer[1]))
            self._deliver(task, sub, _outcome(answer, node))

        in_process = self.is_head
        if self.head is not None and in_process:
            self.head.apply(owner, _native(args), reply, ("sub", sub))
        else:
            self._link.submit(owner, args, reply)

    def direct(self, context: TaskContext, args: Any, blocking: bool) -> "concurrent.futures.Future[Any] | None":
        """``runtime.collection_caller``: a task thread of this process applies its operation to the
        store itself when this node holds it (no hand-off to the loop: the thread sends the copy's
        frame and is woken by its ack), or, when ``blocking`` (the thread waits anyway), sends it
        to the head on a connection of its own (:mod:`skyward.collection_direct`); None otherwise
        (the operation goes the subtask way: an async task's, or before the head's address is known)."""
        head = self.head if self.is_head else None
        address = self._link.address
        if self._disabled() or (head is None and (not blocking or address is None)):
            return None
        node = self._node()
        owner = f"{node}/{context.key.id}"
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if context.abandoned or context.key.state == "done":
            # Its end has gone (its locks were let go): what it takes now nobody would release.
            future.set_exception(SubtaskError("cancelled", *ended(owner)[1:], "", node))
            return future
        self._owners.add(owner)

        def settle(answer: Answer) -> None:
            try:
                if answer[0] == "value":
                    future.set_result(restore(_copy(answer[1])))
                else:
                    kind = "cancelled" if answer[1] == "CancelledError" else "exception"
                    future.set_exception(SubtaskError(kind, answer[1], answer[2], "", node))
            except concurrent.futures.InvalidStateError:
                pass

        def reply(answer: Answer) -> None:
            # The frames the answering thread owes go first (another node's answer, released by the
            # same write): the task woken here could take the CPU before they left.
            after_writes(lambda: settle(answer))

        if head is not None:
            request_id = ("direct", next(self._direct_ids))
            if blocking:  # the thread waits anyway: it writes the copy's frame and reads its ack itself
                head.apply_here(owner, _native(args), reply, request_id)
            else:  # an async task's loop, which must not wait
                head.apply(owner, _native(args), reply, request_id, threadsafe=True)
        else:
            answer = self._direct_caller.call(address, owner, args)  # type: ignore[arg-type]
            if answer[0] == "value":
                future.set_result(restore(answer[1]))  # decoded just now: nobody else holds it
            else:
                reply(answer)
        return future

    def task_ended(self, task: Task, then: Callable[[], None]) -> None:
        """``task`` ended: what it held is let go, then ``then()`` sends its end to its client (so
        nobody learns of the end before the locks are free)."""
        owner = f"{self._node()}/{task.id}"
        if owner not in self._owners:
            then()
            return
        self._owners.discard(owner)
        if self.head is not None and self.is_head:
            self.head.owner_ended(owner, then)
        else:
            self._link.ended(owner, then)

    # -- the client's operations (on its connection to the head) --------------------------------

    def client_op(self, connection: Connection, message: Message) -> None:
        request_id, owner = message.get("id"), message.get("owner")

        def reply(answer: Answer) -> None:
            if connection.alive:
                connection.send(client_answer(request_id, answer))

        if self._disabled():
            reply(("error", "RuntimeError", DISABLED))
            return
        request = message.get("op")
        if type(request) is list and request[:1] in (["$replica"], ["$promote"], ["$lost"]):
            reply(self._pool_op(request))
            return
        if self.head is not None and self.head.superseded is not None:
            reply(("error", "RuntimeError", self.head.superseded))
            return
        if self.head is None:
            reply(("error", "RuntimeError", f"node {self._node()} does not hold the pool's collections (the head does)"))
            return
        if type(owner) is not str or not owner.startswith("client"):
            reply(("error", "ValueError", "a client operation's owner must be a client handle"))
            return
        self._client_owners.setdefault(connection, set()).add(owner)
        self.head.apply(owner, request, reply, ("client", request_id))

    def _pool_op(self, request: List[Any]) -> Answer:
        """The client's requests about where the collections are: ``["$replica", epoch?]``,
        ``["$promote", lost, epoch?]``, ``["$lost", node]``."""
        argument = request[1] if len(request) > 1 else None
        if request[0] == "$replica":
            return self._copy_held(argument)
        if request[0] == "$promote":
            return self._promote(argument, request[2] if len(request) > 2 else None)
        # The client's verdict that a node is gone: the head may answer without that node's copy,
        # and its tasks hold nothing (the pool runs them again elsewhere; a node cut off or powered
        # off leaves its connections open, so their closing may never say so).
        if self.head is not None and self.is_head and type(argument) is int:
            self.head.node_lost(str(argument))
            with self.head.lock:
                for owner in self.head.store.owners():
                    if owner.startswith(f"{argument}/"):
                        self.head.owner_ended(owner)
        return ("value", None)

    def client_cancel(self, connection: Connection, message: Message) -> None:
        owner = message.get("owner")
        if self.head is not None and type(owner) is str:
            self.head.cancel(owner, ("client", message.get("id")), "the operation was aborted")

    def connection_lost(self, connection: Connection) -> None:
        """A client connection went: the locks of its handles are released and their waits dropped."""
        owners = self._client_owners.pop(connection, set())
        if self.head is not None:
            for owner in owners:
                self.head.owner_ended(owner)


def client_answer(request_id: Any, answer: Answer) -> Message:
    """``coll_answer``, in the wire form a :class:`Connection` sends (the store's values are native).
    Most answers (a counter's value, ``[found, value]``, an error's strings) are their own wire
    form: only the rest go through :func:`to_wire`, which spent more than the store on each."""
    request_id = request_id if is_plain(request_id) else to_wire(request_id, "message.id")
    if answer[0] != "value":
        return {"t": "coll_answer", "id": request_id, "ok": False, "type": str(answer[1]), "message": str(answer[2])}
    value = answer[1]
    if not (is_plain(value) or (type(value) is list and all(is_plain(item) for item in value))):
        value = to_wire(value, "message.value")
    return {"t": "coll_answer", "id": request_id, "ok": True, "value": value}


__all__ = ["REF", "CollectionService"]
