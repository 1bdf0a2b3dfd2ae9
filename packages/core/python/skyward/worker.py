"""The Skyward worker: ``python -m skyward.worker`` (see docs/protocol.md, "Starting a worker").

An asyncio server speaking the wire protocol. It runs submitted tasks on its executor, streams
their output back, keeps finished results for a while for clients that reconnect, and stops when
told to, when its stdin closes (``--exit-on-stdin-eof``) or when its TTL runs out without a client
(then running the ``--self-destruct`` command).

:class:`Worker` wires the parts, each in a module of its own:

- ``connection``: a client connection, its frames and its handshake;
- ``message_router``: which part handles each client message;
- ``task_table`` (with ``deadlines``): intake, cancel, withdraw, timeouts, results kept;
- ``subtasks``: nested dispatch through the client;
- ``detach_keeping``: what a detached worker keeps for the client that comes back;
- ``lifecycle``: the TTL, a detached pool's budget, the self-destruct and the root-owner check;
- ``keeper``: the process, started with the worker, that ends what its tasks started once it ends;
- ``cluster_setup``: the ``cluster`` message, the plugins and their ``around_app`` hooks;
- ``ref_store``: the objects kept for remote references; ``ref_peers``: moving them node to node;
- ``collection_service`` (``collection_store``, ``collection_replica``, ``collection_delta``,
  ``collection_link``): the distributed collections, held on the head node, copied to a second
  one (what changed, per write), reached node to node.

It is also the executors' host (:class:`~skyward.task.Host`): what they report reaches the parts
through it, on the event loop thread.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import os
import platform
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Sequence

from . import interruption, keeper
from .cluster_setup import ClusterSetup
from .collection_service import CollectionService
from .connection import Connection, check_hello, reject
from .context import TaskContext, runtime
from .detach_keeping import DetachKeeping
from .execution import Outcome
from .executors import ThreadExecutor
from .lifecycle import Lifetime, run_self_destruct
from .message_router import MessageRouter
from .metrics import MetricsSampler, parse_collectors
from .output import OutputRouter, TaskStream
from .process_executor import ProcessExecutor
from .protocol import PROTOCOL_VERSION, Message
from .ref_store import RefStore
from .subtasks import SubtaskRelay, local_nested_slots
from .task import Executor, Task
from .task_table import TaskTable

PING_INTERVAL = 5.0
SILENCE_LIMIT = 30.0
#: A connection must complete the handshake (a good ``hello``) within this many seconds.
HANDSHAKE_SECONDS = 10.0
APP_EXIT_LIMIT = 60.0  # seconds the around_app exits get when the worker stops
STREAM_NAMES = ("stdout", "stderr")
#: Characters of output one ``out`` message carries at most (a character is at most 6 bytes of JSON).
OUT_PIECE_CHARS = 1 << 20

__all__ = ["Connection", "Options", "Worker", "main", "serve"]


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
        if parsed.interruption_notice is not None and parsed.interruption_notice.partition("=")[0] not in (
            interruption.SOURCES
        ):
            parser.error("--interruption-notice must be aws-imds=<endpoint> or gcp-metadata=<endpoint>")
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


def _send_notice(connection: Connection, node: int, notice: Dict[str, Any]) -> None:
    connection.send({"t": "event", "node": node, "event": {"type": "interruption", **notice}})


def _send_out(connection: Connection, task_id: str | None, stream: str, node: int, slot: int | None, data: str) -> None:
    """Output as ``out`` messages of at most :data:`OUT_PIECE_CHARS` characters: a single write may be
    more than a frame's header holds (64 MiB of JSON), and would fail its task instead of reaching
    the client."""
    for start in range(0, len(data), OUT_PIECE_CHARS):
        piece = data[start : start + OUT_PIECE_CHARS]
        connection.send({"t": "out", "id": task_id, "stream": stream, "node": node, "worker": slot, "data": piece})


def _utc_now() -> str:
    """The time now in UTC, as ISO 8601 to the second (an interruption notice's ``time``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _write_log(stream: Any, node: int, text: str) -> None:
    """One line of the worker's own log on its original stderr (nothing when it is gone)."""
    if stream is not None:
        try:
            stream.write(f"[skyward worker {node}] {text}\n")
            stream.flush()
        except (OSError, ValueError):
            pass


class Worker:
    """The worker: its connections, and the parts it wires (see the module's docstring)."""

    def __init__(self, options: Options, token: str, router: OutputRouter, originals: Sequence[Any]) -> None:
        self.options = options
        self.loop = asyncio.get_running_loop()
        self.node = options.node
        self._token = token.encode("utf-8")
        self._output = router
        self._originals = originals
        self.connections: set[Connection] = set()
        #: called once when a client detaches (the process entry point points stdout/stderr at a file)
        self.on_detach: Callable[[], None] | None = None
        self._inbox: Deque[tuple[Callable[..., None], tuple[Any, ...]]] = collections.deque()
        self._wake_pending = False
        self.stopped: asyncio.Future[int] = self.loop.create_future()
        self._server: asyncio.AbstractServer | None = None
        self._periodic: asyncio.TimerHandle | None = None
        #: interruption notices received so far: sent to every client, again to one that connects later
        self.notices: List[Dict[str, Any]] = []
        self._notice_watch: threading.Event | None = None
        self.lifetime = Lifetime(self.loop, options.ttl, self.log, self._stop_soon)
        #: results kept on this node for remote references, by ref id (see docs/protocol.md)
        self.refs = RefStore()
        self.detach = DetachKeeping()
        self.cluster = ClusterSetup(self.log, self.post, self._apply_env)
        runtime.concurrency = options.concurrency
        runtime.subtask_sender = self._send_subtask
        runtime.subtask_canceller = lambda context, sub: self.post(self.on_subcancel, context.key, sub)
        runtime.metric_sender = self._send_task_metric
        self.table = TaskTable(
            self.loop, options.concurrency, self._new_executor, self._node, self.refs, self.detach, self.lifetime,
            self.log, self._token,
        )
        self.table.mask = self.cluster.secret_mask.mask
        # A detached pool's tasks still running hold its TTL off (their results are what it comes back for).
        self.lifetime.busy = lambda: self.detach.detached and bool(self.table.tasks)
        self.subtasks = SubtaskRelay(self.table, self._node, local_nested_slots(options.concurrency))
        self.on_subcancel = self.subtasks.cancel  # a task cancelled a subtask's future (Host)
        self.collections = CollectionService(self, self._token)  # held on the head, reached node to node
        #: the image's metrics collectors, sampled from the first ``cluster`` message on
        self.metrics = MetricsSampler(self.loop, self._send_metric, self.log)
        table = self.table
        self.router = MessageRouter(self._hello, {
            "cluster": self._cluster,
            "submit": table.submit,
            "cancel": table.cancel_message,
            "withdraw": table.withdraw,
            "in": table.input,
            "in_end": table.input,
            "in_error": table.input,
            "subresult": self.subtasks.answer,
            "suberror": self.subtasks.answer,
            "release": self._release,
            "unref": self._unref,
            "collect": table.collect,
            "shutdown": self._shutdown,
            **self.collections.handlers(),
        })
        self.handle = self.router.handle  # what a connection hands each message to

    @property
    def stopping(self) -> bool:
        return self.lifetime.stopping

    @property
    def detached(self) -> bool:
        """A client detached (``release`` with ``keep``) and will come back for its results."""
        return self.detach.detached

    def _node(self) -> int:
        return self.node

    def _new_executor(self, nested: bool) -> Executor:
        options = self.options
        first_slot = options.concurrency if nested else 0
        if options.executor == "process":
            return ProcessExecutor(options.concurrency, options.reuse_processes, self, self.log, first_slot)
        return ThreadExecutor(
            options.concurrency, self.cluster.nested_runner if nested else self.cluster.runner, self, self._output,
            self.log, first_slot,
            "nested-slot" if nested else "slot",
        )

    def _apply_env(self, changes: Dict[str, str | None]) -> None:
        for executor in self.table.executors():
            executor.apply_env(changes)

    # -- startup and shutdown -------------------------------------------------------------------

    async def start(self) -> int:
        self._server = await self.loop.create_server(
            lambda: Connection(self), self.options.host, self.options.port, reuse_address=True
        )
        port = self._server.sockets[0].getsockname()[1]
        self._periodic = self.loop.call_later(PING_INTERVAL, self._tick)
        self.lifetime.start_ttl(initial=True)  # a client that never comes is the same as one that left
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
                _send_notice(connection, self.node, notice)

    def preempted(self, signal_name: str) -> None:
        """A signal the client did not ask for (a scheduler preempting or cancelling the job, a spot
        cloud's shutdown): the clients hear an interruption of kind ``preempted``, and the running
        tasks are interrupted, not cancelled, so the pool runs them again elsewhere. A stop the
        client asked for (``shutdown``) began earlier, and a signal after it changes nothing."""
        if self.stopping:
            return
        self.on_interruption({"kind": "preempted", "action": signal_name, "time": _utc_now()})
        self._track(self.loop.create_task(self.stop(f"preempted ({signal_name})", interrupted=True)))

    def log(self, text: str) -> None:
        # The worker's stderr is its log file on a node: what it quotes (a command's stderr, a
        # plugin's exception) may hold a secret it was given. (No cluster yet while it is being built.)
        _write_log(self._originals[1], self.node, self.cluster.secret_mask.mask(text) if hasattr(self, "cluster") else text)

    async def stop(self, reason: str, self_destruct: bool = False, interrupted: bool = False) -> None:
        if not self.lifetime.begin_stop():
            return
        self.log(f"stopping: {reason}")
        if self._notice_watch is not None:
            self._notice_watch.set()
        if self._periodic is not None:
            self._periodic.cancel()
        self.metrics.stop()
        self.table.deadlines.close()
        if self._server is not None:
            self._server.close()
        for executor in self.table.executors():
            executor.begin_close()
        if interrupted:
            self.table.interrupt_all()
        else:
            self.table.cancel_all("the worker is stopping")
        self._drain()
        for connection in list(self.connections):
            connection.close()
        for executor in self.table.executors():
            await executor.close()
        app = self.cluster.app
        if app.active:
            try:
                await asyncio.wait_for(self.loop.run_in_executor(None, app.exit, self.log), APP_EXIT_LIMIT)
            except asyncio.TimeoutError:
                self.log(f"the plugins' around_app exits did not finish within {APP_EXIT_LIMIT:.0f} s")
        self._output.flush()
        if self_destruct and self.options.self_destruct:
            await run_self_destruct(self.loop, self.options.self_destruct, self.options.root_owner, self.log)
        if not self.stopped.done():
            self.stopped.set_result(0)

    def _stop_soon(self, reason: str, self_destruct: bool = False) -> None:
        self._track(self.loop.create_task(self.stop(reason, self_destruct)))

    def _track(self, task: asyncio.Task[Any]) -> None:
        def report(done: asyncio.Task[Any]) -> None:
            if not done.cancelled() and done.exception() is not None:
                self.log(f"internal error: {done.exception()!r}")

        task.add_done_callback(report)

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

    # -- messages the worker handles itself (the router has the rest) ---------------------------

    def _hello(self, connection: Connection, message: Message) -> None:
        problem = check_hello(message, self._token, self.lifetime.stopping)
        if problem is not None:
            reject(connection, problem)
            return
        connection.handshake_done()
        self.lifetime.cancel_ttl()
        adopted = self.table.adopt(connection)
        self.table.prune_results()
        connection.send(
            {
                "t": "welcome",
                "version": PROTOCOL_VERSION,
                "node": self.node,
                "pid": os.getpid(),
                "hostname": socket.gethostname(),
                "python": platform.python_version(),
                "executor": self.table.executor.name,
                "concurrency": self.options.concurrency,
                "buffer": self.options.buffer,
                "results": self.table.result_ids(),
                "running": adopted,
                "ready": self.table.ready,
                # The cluster settings it runs with (no env): a client attaching to a detached pool
                # sends them back rather than its own (it does not know the pool's plugins).
                "cluster": self.cluster.message,
            }
        )

    def _cluster(self, connection: Connection, message: Message) -> None:
        checked = ClusterSetup.check(message)
        if checked.problem is not None:
            self.log(f"cannot apply the cluster message: {checked.problem}")
            reject(connection, checked.problem)
            return
        # A pool took the worker over (attached): its own budget watch applies from now on.
        self.lifetime.cancel_budget()
        self.node = checked.info.node
        problem = self.cluster.apply(message, checked)
        if problem is not None:
            self.log(f"cannot apply the cluster message: {problem}")
            reject(connection, problem)
            return
        assert self.cluster.message is not None
        self.table.apply_cluster(self.cluster.message, checked.env)
        if not self.lifetime.stopping:
            self.metrics.configure(parse_collectors(message.get("metrics")))
        connection.send(self.collections.ready(self.node))  # the head's says where it serves the collections
        for notice in self.notices:  # a client that comes after a notice learns of it too
            _send_notice(connection, self.node, notice)
        self.table.cluster_ready()

    def _release(self, connection: Connection, message: Message) -> None:
        ttl = message.get("ttl")
        if isinstance(ttl, (int, float)) and not isinstance(ttl, bool):
            self.lifetime.ttl = float(ttl)
        keep = message.get("keep") is True
        if not keep:
            self.refs.clear()  # the pool is done with them (a detached client comes back for them)
        deadline = message.get("deadline")
        if isinstance(deadline, (int, float)) and not isinstance(deadline, bool) and keep:
            self.lifetime.start_budget(float(deadline))
        self.detach.release(keep, message.get("keep_items_bytes"))
        if keep and self.on_detach is not None:
            self.on_detach()
        detached = "; detached, results kept" if self.detach.detached else ""
        self.log(f"released by the client; ttl {self.lifetime.ttl}{detached}")
        self.lifetime.start_ttl()

    def _unref(self, connection: Connection, message: Message) -> None:
        ids = message.get("ids")
        if type(ids) is list:
            self.refs.drop(ids)

    def _shutdown(self, connection: Connection, message: Message) -> None:
        self._stop_soon("shutdown requested by the client")

    # -- reports from the executors (the Host protocol, on the loop) ----------------------------

    def on_started(self, task: Task) -> None:
        if task.state == "running" and task.timeout is not None:
            self.table.deadlines.start(task)

    def restart_clock(self, task: Task) -> None:
        self.table.deadlines.restart(task)

    def on_item(self, task: Task, seq: int, value: Any) -> None:
        if task.state == "running":
            self.detach.item(task, seq, value)

    def on_pull(self, task: Task, stream_index: int, n: int) -> None:
        if task.state != "running":
            return
        connection = task.connection
        if connection is not None and connection.alive:
            connection.send({"t": "pull", "id": task.id, "stream": stream_index, "n": n})
        else:  # nobody can feed the stream any more
            self.table.executor_for(task).deliver_input(
                task, stream_index, "in_error", "the connection to the client was lost"
            )

    def _send_subtask(self, context: TaskContext, sub: int, fn: str, args: List[Any], kwargs: Dict[str, Any],
                      node: int | None) -> None:
        """``runtime.subtask_sender`` for tasks on this process's threads (any thread)."""
        self.post(self.on_subtask, context.key, sub, fn, args, kwargs, node)

    def on_subtask(self, task: Task, sub: int, fn: str, args: List[Any], kwargs: Dict[str, Any],
                   node: int | None) -> None:
        if not self.collections.take(task, sub, fn, args):  # a collection operation is not the client's
            self.subtasks.send(task, sub, fn, args, kwargs, node)

    def _send_task_metric(self, context: TaskContext, name: str, value: float, step: int | None) -> None:
        """``runtime.metric_sender`` for tasks on this process's threads (any thread)."""
        self.post(self.on_metric, context.key, name, value, step)

    def on_metric(self, task: Task, name: str, value: float, step: int | None) -> None:
        """A value the task reported goes to its client, tagged with the task and its worker slot."""
        connection = task.connection
        if task.state != "running" or connection is None or not connection.alive:
            return  # ended meanwhile, or its client is away: a reported value is a sample, not a result
        message: Message = {"t": "metric", "node": self.node, "name": name, "value": value, "unit": None,
                            "ts": time.time(), "worker": task.slot, "task": task.id}
        if step is not None:
            message["step"] = step
        connection.send(message)

    def fail_subtask(self, task_id: str, sub: int, text: str) -> None:
        self.subtasks.fail(task_id, sub, text)

    def app_gate(self, retry: Callable[[], None], nested: bool = False) -> Outcome | bool:
        busy = any(getattr(executor, "running", False) for executor in self.table.executors())
        return self.cluster.app_gate(retry, busy, nested)

    def on_done(self, task: Task, outcome: Outcome) -> None:
        self.table.on_done(task, outcome)

    def error_message(self, task_id: str, kind: str, type_name: str, text: str, traceback_text: str = "",
                      slot: int | None = None) -> Message:
        return self.table.error_message(task_id, kind, type_name, text, traceback_text, slot)

    def on_output(self, task: Task | None, slot: int | None, stream: str, data: str) -> None:
        # Masked here too, for what no client hears and the worker's own stream keeps (its log file).
        data = self.cluster.secret_mask.mask(data)
        if task is not None:
            connection = task.connection
            if task.state == "running" and connection is not None and connection.alive:
                _send_out(connection, task.id, stream, self.node, task.slot, data)
                return
        else:
            sent = False
            for connection in self.connections:
                if connection.authenticated and connection.alive:
                    _send_out(connection, None, stream, self.node, slot, data)
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

    # -- connections and liveness ---------------------------------------------------------------

    def on_connection_lost(self, connection: Connection) -> None:
        self.connections.discard(connection)
        self.collections.connection_lost(connection)
        for task in self.table.running_on(connection):
            self.table.inputs_lost(task)
            self.subtasks.connection_lost(task)
        if connection.authenticated and not self.lifetime.stopping:
            if not any(other.authenticated and other.alive for other in self.connections):
                self.log("the client connection was lost")
                self.lifetime.start_ttl()

    def _tick(self) -> None:
        now = time.monotonic()
        for connection in list(self.connections):
            if now - connection.last_received > SILENCE_LIMIT:
                self.log(f"no traffic from {connection.peer} for {SILENCE_LIMIT:.0f} s: connection lost")
                connection.abort()  # connection_lost follows and starts the TTL clock
            elif connection.authenticated and now - connection.last_sent >= PING_INTERVAL:
                connection.send({"t": "ping", "ts": time.time()})
            connection.decoder.trim()  # a large-frame buffer unused for a tick is let go
        self.table.prune_results()
        self._periodic = self.loop.call_later(PING_INTERVAL, self._tick)


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
        worker._stop_soon(reason)

    try:
        # SIGTERM is what a scheduler or a cloud sends a node it takes back; SIGINT is someone's ^C.
        loop.add_signal_handler(signal.SIGTERM, worker.preempted, "SIGTERM")
        loop.add_signal_handler(signal.SIGINT, stop_soon, "signal SIGINT")
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


#: the keeper process (see keeper.py), referenced for as long as the worker runs
_keeper: Any = None


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
    # Before any thread starts (it sets the scope in the environment): what tasks start ends with us.
    global _keeper
    _keeper = keeper.start()
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
