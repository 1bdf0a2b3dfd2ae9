"""The Skyward worker: ``python -m skyward.worker`` (see docs/protocol.md, "Starting a worker").

An asyncio server speaking the wire protocol. It runs submitted tasks on its executor, streams
their output back, keeps finished results for a while for clients that reconnect, and stops when
told to, when its stdin closes (``--exit-on-stdin-eof``) or when its TTL runs out without a client
(then running the ``--self-destruct`` command).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import heapq
import hmac
import json
import math
import os
import platform
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Sequence

from .context import SubtaskOutcome, TaskContext, runtime, set_cluster
from .dispatch import error_fields
from .execution import Outcome, TaskRunner, error_outcome
from .executors import ProcessExecutor, Task, ThreadExecutor
from .info import instance_info_from_cluster
from .metrics import MetricsSampler, parse_collectors
from . import interruption
from .output import OutputRouter, TaskStream
from .values import Kept, RefArg
from .plugins import Lifecycle, PluginLoadError, decorators, load_plugins
from .protocol import (
    PROTOCOL_VERSION,
    FrameDecoder,
    Message,
    ProtocolError,
    SerializationError,
    encode_frame,
    pack_frame,
    pack_frame_parts,
)

RESULT_KEEP_SECONDS = 300.0
RESULT_KEEP_MAX = 50_000
#: bytes of stream items kept for a detached client when its `release` names no `keep_items_bytes`
KEPT_ITEMS_BYTES = 64 * 1024 * 1024
PING_INTERVAL = 5.0
SILENCE_LIMIT = 30.0
#: A connection must complete the handshake (a good ``hello``) within this many seconds...
HANDSHAKE_SECONDS = 10.0
#: ...and no frame before it may be larger than this (a ``hello`` is a few hundred bytes).
PRE_HANDSHAKE_FRAME_BYTES = 16 * 1024
APP_EXIT_LIMIT = 60.0  # seconds the around_app exits get when the worker stops
STREAM_NAMES = ("stdout", "stderr")
#: the reserved function name of a distributed-collection operation (skyward/collections.py)
COLLECTION_REF = "skyward.collections:op"


def _detached_calls_max() -> int:
    """``SKYWARD_DETACHED_CALLS_MAX``: the collection calls a detached worker keeps (default 100 000)."""
    try:
        return max(1, int(os.environ.get("SKYWARD_DETACHED_CALLS_MAX", "100000")))
    except ValueError:
        return 100_000


def _outlives_its_task(message: Message) -> bool:
    """Whether a kept collection operation still goes to the next client once its task has ended: a
    write (dict, set, counter, queue put), applied as it would have been had a client been there; not
    a wait or a lock, whose owner is gone (docs/sessions.md, "Collections across detach")."""
    args = message.get("args") or []
    kind = args[0] if len(args) > 0 else None
    op = args[2] if len(args) > 2 else None
    return kind in ("dict", "set", "counter") or (kind == "queue" and op == "put")


class Options:
    """The worker's command line."""

    def __init__(self, argv: Sequence[str] | None = None) -> None:
        parser = argparse.ArgumentParser(prog="python -m skyward.worker", description=__doc__)
        parser.add_argument("--node", type=int, default=0)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=0)
        parser.add_argument("--concurrency", type=int, default=1)
        parser.add_argument("--buffer", type=int, default=0)
        parser.add_argument("--executor", choices=("auto", "thread", "process"), default="thread")
        parser.add_argument("--no-reuse-processes", dest="reuse_processes", action="store_false")
        parser.add_argument("--workdir", default=None)
        parser.add_argument("--ttl", type=float, default=None)
        parser.add_argument("--self-destruct", dest="self_destruct", default=None)
        parser.add_argument("--exit-on-stdin-eof", dest="exit_on_stdin_eof", action="store_true")
        parser.add_argument("--handshake-timeout", dest="handshake_timeout", type=float, default=HANDSHAKE_SECONDS)
        parser.add_argument("--interruption-notice", dest="interruption_notice", default=None)
        parser.add_argument("--interruption-poll-interval", dest="interruption_poll_interval", type=float, default=5.0)
        parsed = parser.parse_args(argv)
        if parsed.concurrency < 1:
            parser.error("--concurrency must be at least 1")
        if parsed.buffer < 0:
            parser.error("--buffer must be at least 0")
        if not parsed.handshake_timeout > 0:
            parser.error("--handshake-timeout must be more than 0")
        if not parsed.interruption_poll_interval > 0:
            parser.error("--interruption-poll-interval must be more than 0")
        if parsed.interruption_notice is not None and not parsed.interruption_notice.startswith("aws-imds="):
            parser.error("--interruption-notice must be aws-imds=<endpoint>")
        self.node: int = parsed.node
        self.host: str = parsed.host
        self.port: int = parsed.port
        self.concurrency: int = parsed.concurrency
        self.buffer: int = parsed.buffer
        self.executor: str = "thread" if parsed.executor == "auto" else parsed.executor
        self.reuse_processes: bool = parsed.reuse_processes
        self.workdir: str | None = parsed.workdir
        self.ttl: float | None = parsed.ttl
        self.self_destruct: str | None = parsed.self_destruct
        # Set by a launcher that starts workers in a shared directory (an SSH host's root): the file
        # naming the pid of the worker that owns that directory now. Not passed on to tasks.
        self.root_owner: str | None = os.environ.pop("SKYWARD_ROOT_OWNER", None) or None
        self.exit_on_stdin_eof: bool = parsed.exit_on_stdin_eof
        self.handshake_timeout: float = parsed.handshake_timeout
        self.interruption_notice: str | None = parsed.interruption_notice
        self.interruption_poll_interval: float = parsed.interruption_poll_interval


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

    def __init__(self, worker: Worker) -> None:
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

    def connection_lost(self, exc: Exception | None) -> None:
        self.alive = False
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        self._outbox.clear()
        self._unsent.clear()
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
            self._write_unsent()
        self.last_sent = time.monotonic()

    def _write_unsent(self) -> None:
        """Hand queued pieces to the transport, in slices, until it asks for a pause."""
        transport = self.transport
        unsent = self._unsent
        if transport is None or transport.is_closing():
            unsent.clear()
            return
        chunk = self.WRITE_CHUNK_BYTES
        while unsent and not self._paused:
            if transport.is_closing():  # a write failed: the connection is going away
                unsent.clear()
                return
            piece = unsent[0]
            if len(piece) > chunk:
                view = piece if type(piece) is memoryview else memoryview(piece)
                unsent[0] = view[chunk:]
                transport.write(view[:chunk])
            else:
                unsent.popleft()
                transport.write(piece)
        if not unsent and self._close_when_sent:
            # Not from inside resume_writing: the transport is in the middle of its own write.
            self.worker.loop.call_soon(transport.close)

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
        self._unsent.clear()
        if self.transport is not None:
            self.transport.abort()


class Worker:
    """The worker's state: connections, the task queue, the executor, finished results, TTL."""

    def __init__(self, options: Options, token: str, router: OutputRouter, originals: Sequence[Any]) -> None:
        self.options = options
        self.loop = asyncio.get_running_loop()
        self.node = options.node
        self._token = token.encode("utf-8")
        self._router = router
        self._originals = originals
        self.connections: set[Connection] = set()
        self.tasks: Dict[str, Task] = {}
        self._waiting: List[Task] = []  # submitted before the cluster message
        self.ready = False
        self.stopping = False
        self._finished: "collections.OrderedDict[str, tuple[float, Message]]" = collections.OrderedDict()
        self._ttl = options.ttl
        self._ttl_handle: asyncio.TimerHandle | None = None
        #: set by a `release` with `keep`: the client detached and will come back for its results
        self.detached = False
        self._keep_results = False
        #: from a `release` with `keep` until the next client's hello: distributed-collection
        #: operations wait here for that client (whose state holds the collections) instead of
        #: failing; the TTL bounds the wait (docs/sessions.md, "Collections across detach")
        self._parking = False
        self._parked: List[tuple[Task, Message]] = []
        #: how many calls may wait so (an eventual write does not block its task); past it a call fails
        self._parked_max = _detached_calls_max()
        #: a detached client's stream items, by task, in order: handed over by `collect` (see on_item)
        self._kept_items: Dict[str, List[tuple[Message, int]]] = {}
        #: how many items of a task did not fit under the cap; told in its terminal message (`dropped`)
        self._kept_dropped: Dict[str, int] = {}
        self._kept_bytes = 0
        self._kept_cap = KEPT_ITEMS_BYTES
        #: the budget's end while detached (`release` with `deadline`): the worker stops itself then
        self._budget_handle: asyncio.TimerHandle | None = None
        #: called once when a client detaches (the process entry point points stdout/stderr at a file)
        self.on_detach: Callable[[], None] | None = None
        self._inbox: Deque[tuple[Callable[..., None], tuple[Any, ...]]] = collections.deque()
        self._wake_pending = False
        self.stopped: asyncio.Future[int] = self.loop.create_future()
        self._server: asyncio.AbstractServer | None = None
        self._periodic: asyncio.TimerHandle | None = None
        # Task timeouts: one timer, at the earliest deadline, instead of one per task. The heap holds
        # (deadline, seq, task id); _timed maps a running task's id to its entry's seq and the task.
        self._deadlines: List[tuple[float, int, str]] = []
        self._timed: Dict[str, tuple[int, Task]] = {}
        self._deadline_seq = 0
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._deadline_at = math.inf
        #: the plugins' around_app hooks: entered by the first task (thread executor) or, with the
        #: process executor, in a thread of the worker before the first task goes to a child
        self.app = Lifecycle("around_app", lambda: runtime.cluster)
        self._app_waiters: List[Callable[[], None]] = []
        self._app_entering = False
        self.runner = TaskRunner(prepare=self.app.enter)
        runtime.concurrency = options.concurrency
        runtime.subtask_sender = self._send_subtask
        self._cluster_message: Dict[str, Any] | None = None
        self._plugin_identity: List[Any] = []
        self._cluster_env: Dict[str, str] = {}
        self.executor: ThreadExecutor | ProcessExecutor = self._new_executor(nested=False)
        self._nested: ThreadExecutor | ProcessExecutor | None = None
        #: interruption notices received so far: sent to every client, again to one that connects later
        self.notices: List[Dict[str, Any]] = []
        self._notice_watch: threading.Event | None = None
        #: the image's metrics collectors, sampled from the first ``cluster`` message on
        self.metrics = MetricsSampler(self.loop, self._send_metric, self.log)
        #: results kept on this node for remote references, by ref id (see docs/protocol.md)
        self.refs: Dict[str, Kept] = {}

    def _new_executor(self, nested: bool) -> ThreadExecutor | ProcessExecutor:
        options = self.options
        first_slot = options.concurrency if nested else 0
        if options.executor == "process":
            return ProcessExecutor(options.concurrency, options.reuse_processes, self, self.log, first_slot)
        return ThreadExecutor(
            options.concurrency, self.runner, self, self._router, self.log, first_slot,
            "nested-slot" if nested else "slot",
        )

    def _executors(self) -> List[ThreadExecutor | ProcessExecutor]:
        return [self.executor] if self._nested is None else [self.executor, self._nested]

    def _executor_for(self, task: Task) -> ThreadExecutor | ProcessExecutor:
        """The executor running ``task``: nested tasks have their own, started on the first one."""
        if not task.nested:
            return self.executor
        if self._nested is None:
            self._nested = self._new_executor(nested=True)
            if self._cluster_message is not None:
                self._nested.apply_cluster(self._cluster_message, self._cluster_env)
        return self._nested

    # -- startup and shutdown -------------------------------------------------------------------

    async def start(self) -> int:
        self._server = await self.loop.create_server(
            lambda: Connection(self), self.options.host, self.options.port, reuse_address=True
        )
        port = self._server.sockets[0].getsockname()[1]
        self._periodic = self.loop.call_later(PING_INTERVAL, self._tick)
        self._start_ttl(initial=True)  # a client that never comes is the same as one that left
        if self.options.interruption_notice:
            self._notice_watch = interruption.start(
                self.options.interruption_notice,
                self.options.interruption_poll_interval,
                lambda notice: self.post(self.on_interruption, notice),
                self.log,
            )
        return int(port)

    def on_interruption(self, notice: Dict[str, Any]) -> None:
        self.log(f"interruption notice: {notice['kind']} {notice['action']} {notice['time']}".rstrip())
        self.notices.append(notice)
        for connection in list(self.connections):
            if connection.authenticated:
                self._send_notice(connection, notice)

    def _send_notice(self, connection: Connection, notice: Dict[str, Any]) -> None:
        connection.send({"t": "event", "node": self.node, "event": {"type": "interruption", **notice}})

    def log(self, text: str) -> None:
        stream = self._originals[1]
        if stream is not None:
            try:
                stream.write(f"[skyward worker {self.node}] {text}\n")
                stream.flush()
            except (OSError, ValueError):
                pass

    async def stop(self, reason: str, self_destruct: bool = False) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.log(f"stopping: {reason}")
        if self._notice_watch is not None:
            self._notice_watch.set()
        self._cancel_ttl()
        self._cancel_budget()
        if self._periodic is not None:
            self._periodic.cancel()
        self.metrics.stop()
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        if self._server is not None:
            self._server.close()
        for executor in self._executors():
            executor.begin_close()
        for task in list(self.tasks.values()):
            self._cancel(task, "the worker is stopping")
        self._drain()
        for connection in list(self.connections):
            connection.close()
        for executor in self._executors():
            await executor.close()
        if self.app.active:
            try:
                await asyncio.wait_for(self.loop.run_in_executor(None, self.app.exit, self.log), APP_EXIT_LIMIT)
            except asyncio.TimeoutError:
                self.log(f"the plugins' around_app exits did not finish within {APP_EXIT_LIMIT:.0f} s")
        self._router.flush()
        successor = await self._root_successor_settled() if self_destruct and self.options.self_destruct else None
        if successor is not None:
            self.log(f"self-destruct skipped: {successor}")
        elif self_destruct and self.options.self_destruct:
            self.log("running the self-destruct command")
            try:
                await self.loop.run_in_executor(None, self._run_self_destruct, self.options.self_destruct)
            except Exception as error:
                self.log(f"self-destruct failed: {error!r}")
        if not self.stopped.done():
            self.stopped.set_result(0)

    async def _root_successor_settled(self) -> str | None:
        """:meth:`_root_successor`, waiting out a launcher that is taking the root over.

        A missing owner record means a launch is under way (the launcher removes it before it
        uploads and writes the new worker's pid once it starts): it is read again for up to
        ``SKYWARD_ROOT_TAKEOVER_WAIT`` seconds (30). If it is still missing then, the launch did not
        finish and nothing else will end this machine: the self-destruct runs — a machine billing
        forever is the worse mistake.
        """
        try:
            wait = float(os.environ.get("SKYWARD_ROOT_TAKEOVER_WAIT", "30"))
        except ValueError:
            wait = 30.0
        deadline = time.monotonic() + max(wait, 0.0)
        while True:
            successor, missing = self._root_successor()
            if not missing:
                return successor
            if time.monotonic() >= deadline:
                self.log(f"{self.options.root_owner} is still missing after {wait:g} s: the self-destruct runs")
                return None
            await asyncio.sleep(min(1.0, max(wait / 10, 0.05)))

    def _root_successor(self) -> tuple[str | None, bool]:
        """Why the self-destruct must not run (another live worker took this worker's root), or None;
        and whether the owner record is missing (a launcher taking the root over).

        A launcher that shares a root between the workers it starts there (one after another: a
        replacement of a node declared lost, a later pool) names the root's current owner in the
        file ``SKYWARD_ROOT_OWNER`` points to, rewriting it for each new worker. The self-destruct
        (removing the pool's files, ending the machine) is skipped only while that file names
        another live Skyward worker; anything else (this worker, a dead pid, a pid reused by an
        unrelated process, an unreadable record) lets it run, so that nothing is left billing.
        """
        path = self.options.root_owner
        if path is None:
            return None, False
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read().strip()
        except FileNotFoundError:
            return None, True
        except OSError as error:
            self.log(f"{path} could not be read ({error!r}): the self-destruct runs")
            return None, False
        try:
            owner = int(text)
        except ValueError:
            self.log(f"{path} does not name a pid ({text[:40]!r}): the self-destruct runs")
            return None, False
        # Its own pid, or its parent's: the shell that runs it (and unmounts the volumes after it).
        if owner in (os.getpid(), os.getppid()) or owner <= 0:
            return None, False
        try:
            with open(f"/proc/{owner}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ")
        except OSError:
            return None, False  # the owner is gone: nothing alive uses the root
        if b"skyward" not in command:
            return None, False  # the pid now belongs to another program: the owner is gone
        return f"the root now belongs to the live worker pid {owner} ({path})", False

    @staticmethod
    def _run_self_destruct(command: str) -> None:
        subprocess.run(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, timeout=600, check=False)

    # -- the thread-safe inbox (threads → loop) -------------------------------------------------

    def post(self, callback: Callable[..., None], *args: Any) -> None:
        """Run ``callback(*args)`` on the loop; callable from any thread, batches wake-ups."""
        self._inbox.append((callback, args))
        if not self._wake_pending:
            self._wake_pending = True
            try:
                self.loop.call_soon_threadsafe(self._drain)
            except RuntimeError:
                pass  # the loop is closed: the worker is exiting

    def _drain(self) -> None:
        self._wake_pending = False
        inbox = self._inbox
        while inbox:
            callback, args = inbox.popleft()
            try:
                callback(*args)
            except Exception as error:
                self.log(f"internal error in {getattr(callback, '__name__', callback)}: {error!r}")

    # -- messages -------------------------------------------------------------------------------

    def handle(self, connection: Connection, message: Message) -> None:
        kind = message["t"]
        if not connection.authenticated:
            if kind == "hello":
                self._hello(connection, message)
            else:
                self._reject(connection, f"expected hello, got {kind!r}")
            return
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(self, connection, message)
        # unknown message types are ignored (docs/protocol.md, "Versioning")

    def _reject(self, connection: Connection, reason: str) -> None:
        connection.send({"t": "reject", "reason": reason})
        connection.close()
        connection.alive = False

    def _hello(self, connection: Connection, message: Message) -> None:
        version = message.get("version")
        if version != PROTOCOL_VERSION:
            self._reject(
                connection, f"unsupported protocol version {version!r}: this worker speaks version {PROTOCOL_VERSION}"
            )
            return
        token = message.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode("utf-8"), self._token):
            self._reject(connection, "bad token")
            return
        if self.stopping:
            self._reject(connection, "the worker is stopping")
            return
        connection.handshake_done()
        self._cancel_ttl()
        adopted = []
        for task in self.tasks.values():
            if task.connection is None or not task.connection.alive:
                task.connection = connection
                adopted.append(task.id)
        self._prune_results()
        connection.send(
            {
                "t": "welcome",
                "version": PROTOCOL_VERSION,
                "node": self.node,
                "pid": os.getpid(),
                "hostname": socket.gethostname(),
                "python": platform.python_version(),
                "executor": self.executor.name,
                "concurrency": self.options.concurrency,
                "buffer": self.options.buffer,
                "results": list(self._finished.keys()),
                "running": adopted,
                "ready": self.ready,
                # The cluster settings it runs with (no env): a client attaching to a detached pool
                # sends them back rather than its own (it does not know the pool's plugins).
                "cluster": self._cluster_message,
            }
        )
        if self._parking:
            self._parking = False
            self._send_parked(connection)

    def _cluster(self, connection: Connection, message: Message) -> None:
        env = message.get("env") or {}
        if not isinstance(env, dict):
            env = {}
        env = {str(key): str(value) for key, value in env.items() if value is not None}
        info = instance_info_from_cluster(message)
        if message.get("check_accelerators") is True or message.get("pin_accelerators") is True:
            from .devices import check_accelerators

            problem = check_accelerators(info.workers_per_node, {**os.environ, **env})
            if problem is not None:
                self.log(f"cannot apply the cluster message: {problem}")
                self._reject(connection, problem)
                return
        # A pool took the worker over (attached): its own budget watch applies from now on.
        self._cancel_budget()
        os.environ.update(env)
        set_cluster(info)
        self.node = info.node
        try:
            plugins = load_plugins(message.get("plugins"))
        except PluginLoadError as error:
            self.log(f"cannot apply the cluster message: {error}")
            self._reject(connection, str(error))
            return
        identity = [plugin.identity for plugin in plugins]
        if identity != self._plugin_identity:  # a cluster sent again with the same plugins changes nothing
            if not self.app.set_plugins(plugins):
                self.log("the plugins changed after their around_app hooks were entered; keeping the first ones")
            self.runner.set_decorators(decorators(plugins))
            self._plugin_identity = identity
        cluster = {key: value for key, value in message.items() if key != "env"}
        self._cluster_message = cluster
        self._cluster_env.update(env)
        for executor in self._executors():
            executor.apply_cluster(cluster, env)
        if not self.stopping:
            self.metrics.configure(parse_collectors(message.get("metrics")))
        self.ready = True
        connection.send({"t": "ready"})
        for notice in self.notices:  # a client that comes after a notice learns of it too
            self._send_notice(connection, notice)
        waiting, self._waiting = self._waiting, []
        for task in waiting:
            if task.state == "queued":
                self._executor_for(task).enqueue(task)

    def _submit(self, connection: Connection, message: Message) -> None:
        task_id = message.get("id")
        if not isinstance(task_id, str):
            self.log(f"ignored a submit without a string id: {task_id!r}")
            return
        if task_id in self.tasks:
            self.log(f"ignored a submit for task {task_id!r}, which is already queued or running")
            return
        args = message.get("args")
        kwargs = message.get("kwargs")
        args = [] if args is None else args
        kwargs = {} if kwargs is None else kwargs
        timeout = message.get("timeout")
        pin = message.get("worker")
        fn = message.get("fn")
        problem = None
        if not isinstance(fn, str):
            problem = ("not_found", "TypeError", f"fn must be a 'module:qualname' string, not {fn!r}")
        elif type(args) is not list:
            problem = ("serialization", "SerializationError", "args must be an array")
        elif type(kwargs) is not dict:
            problem = ("serialization", "SerializationError", "kwargs must be an object")
        elif timeout is not None and (
            type(timeout) not in (int, float) or not timeout > 0 or math.isinf(timeout)
        ):
            problem = ("exception", "ValueError", f"timeout must be a positive number of seconds or null, not {timeout!r}")
        elif pin is not None and (type(pin) is not int or not 0 <= pin < self.options.concurrency):
            problem = (
                "exception", "ValueError",
                f"worker {pin!r} does not exist on this node (worker slots 0..{self.options.concurrency - 1})",
            )
        elif self.stopping:  # its executor may be closed already (or, for a nested task, never started)
            problem = ("cancelled", "CancelledError", "the worker is stopping")
        if problem is None and message.get("refs") is True:
            try:
                args, kwargs = self._resolve_refs(args), self._resolve_refs(kwargs)
            except LookupError as error:
                problem = ("serialization", "RemoteRefError", str(error.args[0]))
        if problem is None and fn == HELD_REFS:
            # Answered here: the store is this process's, whichever executor runs tasks.
            task = Task(task_id, str(fn), [], {}, None, False, None, connection, False)
            self.tasks[task_id] = task
            self._finish(task, ("result", self.held_refs()))
            return
        task = Task(task_id, str(fn), args if not problem else [], kwargs if not problem else {}, timeout,
                    bool(message.get("stream")), pin, connection, message.get("nested") is True)
        task.default_timeout = message.get("default_timeout") is True
        task.keep = message.get("keep") is True and not task.stream
        if problem is not None:
            self.tasks[task_id] = task
            self._finish(task, error_outcome(*problem))
            return
        self.tasks[task_id] = task
        if self.ready:
            self._executor_for(task).enqueue(task)
        else:
            self._waiting.append(task)

    def _resolve_refs(self, value: Any) -> Any:
        """``value`` with each ``$r`` replaced by the object this node keeps for it (kept first when
        it came along); raises ``LookupError`` naming a ref this node does not hold."""
        cls = type(value)
        if cls is RefArg:
            if value.carried is not None:
                kept = self.refs.get(value.id)
                if kept is None:
                    kept = Kept(value.carried.type_name, len(value.carried.data), data=value.carried.data)
                    self.refs[value.id] = kept
                return kept
            kept = self.refs.get(value.id)
            if kept is None:
                raise LookupError(
                    f"remote reference {value.id} is not held on node {self.node}: it was released, or the "
                    "node that held it was lost"
                )
            return kept
        if cls is list:
            return [self._resolve_refs(item) for item in value]
        if cls is dict:
            return {key: self._resolve_refs(item) for key, item in value.items()}
        return value

    def held_refs(self) -> Dict[str, Any]:
        """What this node keeps for remote references: how many, their sizes added up, and their ids."""
        return {
            "node": self.node,
            "count": len(self.refs),
            "bytes": sum(kept.size for kept in self.refs.values()),
            "ids": sorted(self.refs),
        }

    def _unref(self, connection: Connection, message: Message) -> None:
        ids = message.get("ids")
        if type(ids) is not list:
            return
        for ref_id in ids:
            if isinstance(ref_id, str):
                self.refs.pop(ref_id, None)

    def _cancel_message(self, connection: Connection, message: Message) -> None:
        task = self.tasks.get(message.get("id"))  # type: ignore[arg-type]
        if task is not None:
            self._cancel(task, "the task was cancelled")

    def _withdraw(self, connection: Connection, message: Message) -> None:
        """Hands back the listed tasks that have not started (the node is going away): each is dropped
        and answered with ``withdrawn``, so the client runs it elsewhere; started ones carry on."""
        ids = message.get("ids")
        if type(ids) is not list:
            return
        for task_id in ids:
            task = self.tasks.get(task_id) if isinstance(task_id, str) else None
            if task is None or task.state != "queued":
                continue
            if task in self._waiting:
                self._waiting.remove(task)
            elif not self._executor_for(task).cancel_queued(task):
                continue
            task.state = "done"
            del self.tasks[task.id]
            connection.send({"t": "withdrawn", "id": task.id})

    def _input(self, connection: Connection, message: Message) -> None:
        task = self.tasks.get(message.get("id"))  # type: ignore[arg-type]
        if task is None or task.state != "running":
            return
        kind = message["t"]
        value = message.get("value") if kind == "in" else message.get("message", "the input stream failed")
        stream = message.get("stream")
        if type(stream) is int:
            self._executor_for(task).deliver_input(task, stream, kind, value)

    def _subresult(self, connection: Connection, message: Message) -> None:
        task = self.tasks.get(message.get("id"))  # type: ignore[arg-type]
        sub = message.get("sub")
        if task is None or task.subtasks is None or type(sub) is not int or sub not in task.subtasks:
            return  # the parent ended (its futures were cancelled) or this is a repeat
        task.subtasks.discard(sub)
        if task.ops is not None:
            task.ops.pop(sub, None)
        if message["t"] == "subresult":
            outcome: SubtaskOutcome = ("value", message.get("value"))
        else:
            outcome = ("error", {
                "kind": message.get("kind"), "type": message.get("type"), "message": message.get("message"),
                "traceback": message.get("traceback"), "node": message.get("node"),
            })
        self._executor_for(task).deliver_subresult(task, sub, outcome)

    def _ping(self, connection: Connection, message: Message) -> None:
        connection.send({"t": "pong", "ts": message.get("ts")})

    def _pong(self, connection: Connection, message: Message) -> None:
        pass  # receiving it already counted as traffic

    def _release(self, connection: Connection, message: Message) -> None:
        ttl = message.get("ttl")
        if isinstance(ttl, (int, float)) and not isinstance(ttl, bool):
            self._ttl = float(ttl)
        if message.get("keep") is not True:
            self.refs.clear()  # the pool is done with them (a detached client comes back for them)
        cap = message.get("keep_items_bytes")
        if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 0:
            self._kept_cap = cap
        deadline = message.get("deadline")
        if isinstance(deadline, (int, float)) and not isinstance(deadline, bool) and message.get("keep") is True:
            self._cancel_budget()
            self.log(f"the pool's budget runs out in {float(deadline):.1f} s: stopping then unless a pool attaches")
            self._budget_handle = self.loop.call_later(max(float(deadline), 0.0), self._budget_expired)
        if message.get("keep") is True and not self.detached:
            # A detached client: results wait for it until collected, and the end of the process that
            # started this worker (its stdin) no longer stops it; only the TTL does.
            self.detached = True
            self._keep_results = True
        if message.get("keep") is True:
            self._parking = True
            if self.on_detach is not None:
                self.on_detach()
        self.log(f"released by the client; ttl {self._ttl}{'; detached, results kept' if self.detached else ''}")
        self._start_ttl()

    def _collect(self, connection: Connection, message: Message) -> None:
        ids = message.get("ids")
        if type(ids) is not list:
            return
        for task_id in ids:
            if not isinstance(task_id, str):
                continue
            # Stream items kept while detached go first (a running task's later ones follow directly).
            self._flush_kept(task_id, connection)
            entry = self._finished.get(task_id)
            if entry is not None:
                connection.send(entry[1])
                if self._keep_results:
                    # Kept for a detached client: handed over once.
                    del self._finished[task_id]

    def _shutdown(self, connection: Connection, message: Message) -> None:
        self._track(self.loop.create_task(self.stop("shutdown requested by the client")))

    _handlers: Dict[str, Callable[[Worker, Connection, Message], None]] = {
        "hello": _hello,
        "cluster": _cluster,
        "submit": _submit,
        "cancel": _cancel_message,
        "withdraw": _withdraw,
        "in": _input,
        "in_end": _input,
        "in_error": _input,
        "subresult": _subresult,
        "suberror": _subresult,
        "ping": _ping,
        "pong": _pong,
        "release": _release,
        "unref": _unref,
        "collect": _collect,
        "shutdown": _shutdown,
    }

    def _track(self, task: asyncio.Task[Any]) -> None:
        def report(done: asyncio.Task[Any]) -> None:
            if not done.cancelled() and done.exception() is not None:
                self.log(f"internal error: {done.exception()!r}")

        task.add_done_callback(report)

    # -- stopping tasks -------------------------------------------------------------------------

    def _start_clock(self, task: Task) -> None:
        """Times ``task`` out ``task.timeout`` seconds from now (once: a task started again keeps its clock)."""
        if task.id in self._timed:
            return
        deadline = self.loop.time() + task.timeout  # type: ignore[operator]
        self._deadline_seq += 1
        self._timed[task.id] = (self._deadline_seq, task)
        heapq.heappush(self._deadlines, (deadline, self._deadline_seq, task.id))
        if deadline < self._deadline_at:
            self._arm_deadline_timer(deadline)
        elif len(self._deadlines) > 2 * len(self._timed) + 1024:
            # Mostly entries of tasks that finished in time: keep only the running ones (in place).
            timed, deadlines = self._timed, self._deadlines
            deadlines[:] = [entry for entry in deadlines if timed.get(entry[2], (0,))[0] == entry[1]]
            heapq.heapify(deadlines)

    def restart_clock(self, task: Task) -> None:
        """Times ``task`` out ``task.timeout`` seconds from now, replacing its clock (a declared timeout)."""
        self._timed.pop(task.id, None)  # its old heap entry no longer matches: dropped when due
        if task.state == "running" and task.timeout is not None:
            self._start_clock(task)

    def _arm_deadline_timer(self, deadline: float) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._deadline_at = deadline
        self._deadline_timer = self.loop.call_at(deadline, self._deadlines_due)

    def _deadlines_due(self) -> None:
        self._deadline_timer = None
        self._deadline_at = math.inf
        deadlines, timed = self._deadlines, self._timed
        now = self.loop.time()
        while deadlines:
            deadline, seq, task_id = deadlines[0]
            entry = timed.get(task_id)
            if entry is None or entry[0] != seq:
                heapq.heappop(deadlines)  # the task finished in time
            elif deadline <= now:
                heapq.heappop(deadlines)
                self._on_timeout(entry[1])
            else:
                self._arm_deadline_timer(deadline)
                return

    def _on_timeout(self, task: Task) -> None:
        if task.state != "running":
            return
        self._executor_for(task).stop_task(task)
        self._finish(task, error_outcome("timeout", "TimeoutError", f"the task ran past its timeout of {task.timeout} s"))

    def _cancel(self, task: Task, reason: str) -> None:
        if task.state == "queued" and (task in self._waiting or self._executor_for(task).cancel_queued(task)):
            self._finish(task, error_outcome("cancelled", "CancelledError", reason))
        elif task.state == "running":
            self._executor_for(task).stop_task(task)
            self._finish(task, error_outcome("cancelled", "CancelledError", reason))

    # -- reports from the executor (on the loop) ------------------------------------------------

    def on_started(self, task: Task) -> None:
        if task.state == "running" and task.timeout is not None:
            self._start_clock(task)

    def on_item(self, task: Task, seq: int, value: Any) -> None:
        if task.state != "running":
            return
        connection = task.connection
        kept = self._kept_items.get(task.id)
        if kept is None and (not self.detached or (connection is not None and connection.alive)):
            if connection is not None:
                connection.send({"t": "item", "id": task.id, "seq": seq, "value": value})
            return
        # Detached with no client (or items already kept, which go first): kept until collected, in
        # order, up to the byte cap; those over it are counted and dropped.
        message: Message = {"t": "item", "id": task.id, "seq": seq, "value": value}
        if kept is None:
            kept = self._kept_items[task.id] = []
        try:
            size = len(encode_frame([message]))
        except (ProtocolError, SerializationError):
            size = -1
        if size < 0 or self._kept_bytes + size > self._kept_cap:
            self._kept_dropped[task.id] = self._kept_dropped.get(task.id, 0) + 1
            return
        self._kept_bytes += size
        kept.append((message, size))

    def _flush_kept(self, task_id: str, connection: Connection) -> None:
        """Hands a task's kept stream items over to ``connection``, in order, and forgets them."""
        kept = self._kept_items.pop(task_id, None)
        if not kept:
            return
        for message, size in kept:
            self._kept_bytes -= size
            connection.send(message)

    def on_pull(self, task: Task, stream_index: int, n: int) -> None:
        if task.state != "running":
            return
        connection = task.connection
        if connection is not None and connection.alive:
            connection.send({"t": "pull", "id": task.id, "stream": stream_index, "n": n})
        else:  # nobody can feed the stream any more
            self._executor_for(task).deliver_input(task, stream_index, "in_error", "the connection to the client was lost")

    # -- nested dispatch and around_app -----------------------------------------------------------

    def _send_subtask(self, context: TaskContext, sub: int, fn: str, args: List[Any], kwargs: Dict[str, Any],
                      node: int | None) -> None:
        """``runtime.subtask_sender`` for tasks on this process's threads (any thread)."""
        self.post(self.on_subtask, context.key, sub, fn, args, kwargs, node)

    def on_subtask(self, task: Task, sub: int, fn: str, args: List[Any], kwargs: Dict[str, Any],
                   node: int | None) -> None:
        if task.state != "running":
            return  # stopped meanwhile: its futures are cancelled already
        message: Message = {"t": "subtask", "id": task.id, "sub": sub, "fn": fn, "args": args, "kwargs": kwargs,
                            "node": node}
        if fn == COLLECTION_REF and self._parking:
            # The client detached: the collections wait in its state file for the next one.
            if len(self._parked) >= self._parked_max:
                kind, name = (list(args) + [None, None])[:2]
                text = (
                    f"{kind} {name!r}: the pool is detached, and {self._parked_max} collection calls already wait on "
                    "this worker for a client to attach (SKYWARD_DETACHED_CALLS_MAX)"
                )
                self._executor_for(task).deliver_subresult(
                    task, sub, error_fields("exception", "RuntimeError", text, self.node)
                )
                return
            if task.subtasks is None:
                task.subtasks = set()
            task.subtasks.add(sub)
            self._parked.append((task, message))
            return
        connection = task.connection
        if connection is None or not connection.alive:
            self._executor_for(task).deliver_subresult(task, sub, self._lost_subtask())
            return
        if task.subtasks is None:
            task.subtasks = set()
        task.subtasks.add(sub)
        if fn == COLLECTION_REF:
            if task.ops is None:
                task.ops = {}
            task.ops[sub] = message
        connection.send(message)

    def _send_parked(self, client: Connection) -> None:
        """A client attached: the collection operations that waited for it go to it, in order."""
        parked, self._parked = self._parked, []
        for task, message in parked:
            if task.state != "running":
                client.send(message)  # a write of a task that has ended: applied, its answer ignored
                continue
            if task.subtasks is None or message["sub"] not in task.subtasks:
                continue
            connection = task.connection
            if connection is None or not connection.alive:
                task.subtasks.discard(message["sub"])
                self._executor_for(task).deliver_subresult(task, message["sub"], self._lost_subtask())
                continue
            if task.ops is None:
                task.ops = {}
            task.ops[message["sub"]] = message
            connection.send(message)

    def fail_subtask(self, task_id: str, sub: int, text: str) -> None:
        task = self.tasks.get(task_id)
        if task is not None and task.subtasks is not None and sub in task.subtasks:
            task.subtasks.discard(sub)
            self._executor_for(task).deliver_subresult(
                task, sub, error_fields("serialization", "SerializationError", text, self.node)
            )

    def _lost_subtask(self) -> SubtaskOutcome:
        return error_fields("cancelled", "CancelledError", "the connection to the client was lost", self.node)

    def app_gate(self, retry: Callable[[], None]) -> Outcome | bool:
        """For the process executor: around_app runs here, in a thread, before any child's first task."""
        app = self.app
        if app.done and not self._app_entering:  # (entering is over once its env changes reached the children)
            return app.failure or True
        if retry not in self._app_waiters:
            self._app_waiters.append(retry)
        if not self._app_entering:
            self._app_entering = True
            threading.Thread(target=self._enter_app, name="skyward-around-app", daemon=True).start()
        return False

    def _enter_app(self) -> None:
        before = dict(os.environ)
        self.app.enter()
        after = dict(os.environ)
        changes: Dict[str, str | None] = {key: value for key, value in after.items() if before.get(key) != value}
        changes.update({key: None for key in before if key not in after})
        self.post(self._app_entered, changes)

    def _app_entered(self, changes: Dict[str, str | None]) -> None:
        self._app_entering = False
        if changes:
            for executor in self._executors():
                executor.apply_env(changes)
        waiters, self._app_waiters = self._app_waiters, []
        for retry in waiters:
            retry()

    def on_done(self, task: Task, outcome: Outcome) -> None:
        if task.state != "running":
            return  # stopped earlier (cancel, timeout): its late outcome is discarded
        self._finish(task, outcome)

    def on_output(self, task: Task | None, slot: int | None, stream: str, data: str) -> None:
        if task is not None:
            connection = task.connection
            if task.state == "running" and connection is not None and connection.alive:
                connection.send(
                    {"t": "out", "id": task.id, "stream": stream, "node": self.node, "worker": task.slot, "data": data}
                )
                return
        else:
            sent = False
            for connection in self.connections:
                if connection.authenticated and connection.alive:
                    connection.send(
                        {"t": "out", "id": None, "stream": stream, "node": self.node, "worker": slot, "data": data}
                    )
                    sent = True
            if sent:
                return
        original = self._originals[0 if stream == "stdout" else 1]
        if original is not None:
            try:
                original.write(data)
                original.flush()
            except (OSError, ValueError):
                pass

    def _send_metric(self, name: str, value: float, unit: str | None, gpu: int | None) -> None:
        """A sample goes to every connected client; with none connected it is dropped."""
        if not math.isfinite(value):
            return
        message: Message = {"t": "metric", "node": self.node, "name": name, "value": value, "unit": unit, "ts": time.time()}
        if gpu is not None:
            message["gpu"] = gpu
        for connection in self.connections:
            if connection.authenticated and connection.alive:
                connection.send(message)

    # -- finishing ------------------------------------------------------------------------------

    def error_message(self, task_id: str, kind: str, type_name: str, text: str, traceback_text: str = "",
                      slot: int | None = None) -> Message:
        return {
            "t": "error", "id": task_id, "kind": kind, "type": type_name, "message": text,
            "traceback": traceback_text, "node": self.node, "worker": slot,
        }

    def _finish(self, task: Task, outcome: Outcome) -> None:
        task.state = "done"
        entry = self._timed.get(task.id)
        if entry is not None and entry[1] is task:
            del self._timed[task.id]  # its heap entry is now stale: skipped or swept later
        self.tasks.pop(task.id, None)
        kind = outcome[0]
        if kind == "result":
            message: Message = {"t": "result", "id": task.id, "value": outcome[1]}
        elif kind == "kept":
            kept: Kept = outcome[1]
            ref_id = f"r{self.node}-{secrets.token_hex(8)}"
            self.refs[ref_id] = kept
            message = {"t": "result", "id": task.id, "value": {"$r": {
                "id": ref_id, "node": self.node, "type": kept.type_name, "size": kept.size,
            }}}
        elif kind == "end":
            message = {"t": "end", "id": task.id}
        else:
            message = self.error_message(
                task.id, outcome[1], outcome[2], outcome[3], outcome[4], task.slot if task.slot >= 0 else None
            )
        task.subtasks = None  # the client cancels the nested tasks still running
        task.ops = None
        if self._parked:
            # Its waits go with it; its writes still reach the next client.
            self._parked = [entry for entry in self._parked if entry[0] is not task or _outlives_its_task(entry[1])]
        dropped = self._kept_dropped.pop(task.id, 0)
        if dropped:
            message["dropped"] = dropped
        finished = self._finished
        finished[task.id] = (time.monotonic(), message)
        if len(finished) > RESULT_KEEP_MAX:
            finished.popitem(last=False)
        connection = task.connection
        if connection is not None:
            if connection.alive:
                self._flush_kept(task.id, connection)
            connection.send(message)

    def _prune_results(self) -> None:
        if self._keep_results:
            return  # a detached client's results wait until collected (RESULT_KEEP_MAX still bounds them)
        horizon = time.monotonic() - RESULT_KEEP_SECONDS
        finished = self._finished
        while finished:
            first = next(iter(finished.values()))
            if first[0] >= horizon:
                break
            finished.popitem(last=False)

    # -- connections, liveness, TTL -------------------------------------------------------------

    def on_connection_lost(self, connection: Connection) -> None:
        self.connections.discard(connection)
        for task in self.tasks.values():
            if task.connection is connection and task.state == "running":
                executor = self._executor_for(task)
                for index in task.stream_indices:
                    executor.deliver_input(task, index, "in_error", "the connection to the client was lost")
                if task.subtasks:
                    # The subtasks went with the connection: a client that reconnects does not know them.
                    # Except a detached client's unanswered collection operations: those were waits
                    # (queue get, lock acquire, barrier wait) it dropped without effect, so they are
                    # asked again of the next client.
                    ops = task.ops or {}
                    kept: set[int] = set()
                    for sub in sorted(task.subtasks):
                        if self._parking and sub in ops:
                            self._parked.append((task, ops[sub]))
                            kept.add(sub)
                        else:
                            executor.deliver_subresult(task, sub, self._lost_subtask())
                    task.subtasks = kept or None
                    task.ops = None
        if connection.authenticated and not self.stopping:
            if not any(other.authenticated and other.alive for other in self.connections):
                self.log("the client connection was lost")
                self._start_ttl()

    def _tick(self) -> None:
        now = time.monotonic()
        for connection in list(self.connections):
            if now - connection.last_received > SILENCE_LIMIT:
                self.log(f"no traffic from {connection.peer} for {SILENCE_LIMIT:.0f} s: connection lost")
                connection.abort()  # connection_lost follows and starts the TTL clock
            elif connection.authenticated and now - connection.last_sent >= PING_INTERVAL:
                connection.send({"t": "ping", "ts": time.time()})
            connection.decoder.trim()  # a large-frame buffer unused for a tick is let go
        self._prune_results()
        self._periodic = self.loop.call_later(PING_INTERVAL, self._tick)

    def _start_ttl(self, initial: bool = False) -> None:
        """Starts the TTL clock: the worker stops (self-destructing) unless a client comes within it.

        A TTL of 0 means no grace period: stop as soon as the client lets go. Before the first client
        has connected the clock gives it at least two minutes, since it is on its way.
        """
        self._cancel_ttl()
        if self._ttl is None or self.stopping:
            return
        delay = max(self._ttl, 120.0) if initial else max(self._ttl, 0.0)
        self._ttl_handle = self.loop.call_later(delay, self._ttl_expired)

    def _cancel_ttl(self) -> None:
        if self._ttl_handle is not None:
            self._ttl_handle.cancel()
            self._ttl_handle = None

    def _cancel_budget(self) -> None:
        if self._budget_handle is not None:
            self._budget_handle.cancel()
            self._budget_handle = None

    def _budget_expired(self) -> None:
        self._budget_handle = None
        self._track(self.loop.create_task(self.stop("the pool's budget ran out while detached", self_destruct=True)))

    def _ttl_expired(self) -> None:
        self._ttl_handle = None
        self._track(self.loop.create_task(self.stop(f"no client for {self._ttl} s (ttl)", self_destruct=True)))


#: the built-in task the worker answers itself with :meth:`Worker.held_refs`
HELD_REFS = "skyward.refs:held"


def _watch_stdin(loop: asyncio.AbstractEventLoop, on_eof: Callable[[], None]) -> None:
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    loop.call_soon_threadsafe(on_eof)


async def serve(options: Options, token: str) -> int:
    originals = (sys.stdout, sys.stderr)

    loop = asyncio.get_running_loop()
    worker_box: List[Worker] = []

    def sink(key: Any, stream: str, data: str) -> None:
        worker = worker_box[0]
        worker.post(worker.on_output, key, None, stream, data)

    router = OutputRouter(sink)
    worker = Worker(options, token, router, originals)
    worker_box.append(worker)
    port = await worker.start()
    router.install()

    def stop_soon(reason: str) -> None:
        worker._track(loop.create_task(worker.stop(reason)))

    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, stop_soon, f"signal {signal.Signals(signum).name}")
        except (NotImplementedError, RuntimeError):
            pass
    def on_stdin_eof() -> None:
        if not worker.detached:
            stop_soon("stdin closed")

    def on_detach() -> None:
        # Whoever read this worker's stdout/stderr is about to go: its own lines go to a file instead.
        try:
            log = os.open(f"skyward-worker-{options.node}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            for stream in originals:
                stream.flush()
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
        except OSError:
            pass

    worker.on_detach = on_detach
    if options.exit_on_stdin_eof:
        threading.Thread(target=_watch_stdin, args=(loop, on_stdin_eof), name="skyward-stdin", daemon=True).start()

    ready_line = "SKYWARD_WORKER_READY " + json.dumps({"port": port, "pid": os.getpid(), "node": options.node})
    originals[0].write(ready_line + "\n")
    originals[0].flush()
    code = await worker.stopped
    await asyncio.sleep(0)  # let the transports write what the stop queued
    return code


def main(argv: Sequence[str] | None = None) -> None:
    options = Options(argv)
    token = os.environ.pop("SKYWARD_TOKEN", None)
    if not token:
        sys.stderr.write("skyward worker: SKYWARD_TOKEN is not set; refusing to start without a token\n")
        sys.exit(2)
    if options.workdir:
        os.makedirs(options.workdir, exist_ok=True)
        os.chdir(options.workdir)
    workdir = os.getcwd()
    # The work directory (where `includes` land) comes first on sys.path.
    sys.path[:] = [workdir] + [entry for entry in sys.path if entry not in ("", workdir)]
    code = 1
    try:
        code = asyncio.run(serve(options, token))
    finally:
        for stream in (sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None and not isinstance(stream, TaskStream):
                    stream.flush()
            except (OSError, ValueError):
                pass
        # Abandoned task threads may still be running user code: do not wait for them.
        os._exit(code)


if __name__ == "__main__":
    main()
