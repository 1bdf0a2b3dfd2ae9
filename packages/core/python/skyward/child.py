"""A process-executor child: ``python -m skyward.child FD``, started by the worker.

It talks to its worker over the inherited socket ``FD`` with length-prefixed pickles, runs one
task at a time on its main thread, and relays the task's output, stream items, input-stream
credit requests and subtasks (nested dispatch) to the worker. It imports the plugins' worker
modules when it starts, enters their ``around_process`` hooks on its first task and wraps every
task with their ``decorate`` hooks. It exits when the worker asks it to (after exiting its
``around_process`` hooks) or when the worker is gone, whatever its task is doing: the reader thread
leaves at the socket's end (a close, or a reset when the worker died with messages of the child
unread), and on Linux the kernel kills the child when the worker dies (``PR_SET_PDEATHSIG``), for a
child whose reader cannot run (a task holding the interpreter); elsewhere a watchdog thread polls
the parent's pid. The reader only reads and hands over: subtask answers (whose callbacks are the
task's code) are settled on a thread of their own, so no lock of the task's can keep it from the
socket's end.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import queue
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, Tuple

_LENGTH = struct.Struct(">I")
_PR_SET_PDEATHSIG = 1
#: seconds between two looks at the parent's pid where the kernel cannot watch it (not Linux)
PARENT_POLL_INTERVAL = 1.0


class ParentLink:
    """The child's end of the socket: blocking sends (from any thread) and receives."""

    def __init__(self, sock: socket.socket) -> None:
        self._socket = sock
        self._send_lock = threading.Lock()
        self._reader = sock.makefile("rb")

    def send(self, message: Any) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._send_lock:
            self._socket.sendall(_LENGTH.pack(len(payload)) + payload)

    def receive(self) -> Any:
        """The next message, or ``None`` when the worker is gone: it closed the socket, or it died
        with messages of the child still unread, which ends the socket with a reset, not an EOF."""
        try:
            header = self._reader.read(4)
            if len(header) < 4:
                return None
            (length,) = _LENGTH.unpack(header)
            payload = self._reader.read(length)
        except OSError:
            return None
        if len(payload) < length:
            return None
        return pickle.loads(payload)


def die_with_parent(poll_interval: float = PARENT_POLL_INTERVAL, kernel: bool = True) -> str:
    """Make this process end when its parent (the worker) does, whatever its threads are doing.

    On Linux the kernel sends SIGKILL at the parent's death (``PR_SET_PDEATHSIG``: strictly, at the
    end of the parent's thread that started it; the worker starts children from its event loop's
    thread, which lives as long as it does); elsewhere, or without ``kernel``, a daemon thread polls
    ``os.getppid()``. A parent that died before the guard was set ends the process at once (one
    gone even earlier closed the socket, which the child reads first). Returns the guard set:
    ``"pdeathsig"`` or ``"watchdog"``.
    """
    parent = os.getppid()
    guard = "watchdog"
    if kernel and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None)
            unused = ctypes.c_ulong(0)
            if libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(int(signal.SIGKILL)), unused, unused, unused) == 0:
                guard = "pdeathsig"
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_interval)
        os._exit(0)

    if guard == "watchdog":
        threading.Thread(target=watch, name="skyward-child-watchdog", daemon=True).start()
    return guard


def _report(text: str) -> None:
    """Write to the worker's own stderr at the file descriptor (no lock of the task's output)."""
    try:
        os.write(2, text.encode("utf-8", "replace"))
    except OSError:
        pass


def _serve_in_order(name: str) -> Callable[[Callable[[], None]], None]:
    """Starts a daemon thread that runs the calls handed to it one at a time, in order; returns the
    function that hands it a call."""
    calls: "queue.SimpleQueue[Callable[[], None]]" = queue.SimpleQueue()

    def serve() -> None:
        while True:
            call = calls.get()
            try:
                call()
            except Exception:
                _report(f"[skyward executor] {name} failed:\n{traceback.format_exc()}")

    threading.Thread(target=serve, name=name, daemon=True).start()
    return calls.put


def main() -> None:
    die_with_parent()
    link = ParentLink(socket.socket(fileno=int(sys.argv[1])))
    init = link.receive()
    if init is None or init[0] != "init":
        os._exit(1)
    settings: Dict[str, Any] = init[1]
    sys.path[:] = [entry for entry in settings["sys_path"]]
    os.environ.update(settings.get("env") or {})
    slot: int = settings["slot"]

    # Imported only now, from the worker's sys.path.
    from .context import TaskContext, current_task, runtime, set_cluster
    from .dispatch import end_subtasks
    from .execution import InputStream, TaskRunner, error_outcome
    from .info import instance_info_from_cluster
    from .output import OutputRouter
    from .plugins import Lifecycle, PluginLoadError, decorators, load_plugins

    cluster = settings.get("cluster")
    if cluster is not None:
        set_cluster(instance_info_from_cluster(cluster))
        if cluster.get("pin_accelerators") is True:
            # One worker per accelerator: this child is worker slot % workers_per_node of its node,
            # pinned to that device before anything imports a CUDA library.
            from .devices import pin_accelerator

            pin_accelerator(slot % max(1, int(cluster.get("workers_per_node") or 1)))
    runtime.concurrency = int(settings.get("concurrency") or 1)
    runtime.nested = slot >= runtime.concurrency

    def sink(key: Any, stream: str, data: str) -> None:
        link.send(("out", key, stream, data))

    router = OutputRouter(sink)
    router.install()

    def process_info() -> Any:
        info = runtime.cluster
        return info.for_worker(slot % info.workers_per_node) if info is not None else None

    lifecycle = Lifecycle("around_process", process_info)
    runner = TaskRunner(prepare=lifecycle.enter, finish=lifecycle.leave)
    runner.on_declared_timeout = lambda context, seconds: link.send(("timeout", context.key, seconds))
    try:
        plugins = load_plugins(cluster.get("plugins") if cluster is not None else None)
    except PluginLoadError as error:
        load_failure = error_outcome("exception", "PluginError", str(error))
        runner.prepare = lambda: load_failure
    else:
        lifecycle.set_plugins(plugins)
        runner.set_decorators(decorators(plugins))

    def send_subtask(context: TaskContext, sub: int, fn: str, args: Any, kwargs: Any, node: Any) -> None:
        link.send(("subtask", context.key, sub, fn, args, kwargs, node))

    runtime.subtask_sender = send_subtask
    runtime.subtask_canceller = lambda context, sub: link.send(("subcancel", context.key, sub))
    runtime.metric_sender = lambda context, name, value, step: link.send(("metric", context.key, name, value, step))
    running: Dict[str, TaskContext] = {}

    jobs: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
    inputs: Dict[Tuple[str, int], InputStream] = {}
    inputs_lock = threading.Lock()

    # Subtask answers settle their futures, whose done-callbacks are the task's own code (they may
    # take its locks or wait): on a thread of their own, never the reader's.
    settle = _serve_in_order("skyward-child-settler")

    def handle(message: Any) -> None:
        kind = message[0]
        if kind == "run":
            jobs.put(message)
        elif kind in ("in", "in_end", "in_error"):
            with inputs_lock:
                stream = inputs.get((message[1], message[2]))
            if stream is None:
                return
            if kind == "in":
                stream.push(message[3])
            elif kind == "in_end":
                stream.finish()
            else:
                stream.fail(str(message[3]))
        elif kind == "subresult":
            with inputs_lock:
                context = running.get(message[1])
            subtasks = context.subtasks if context is not None else None
            if subtasks is not None:
                settle(lambda: subtasks.resolve(message[2], message[3]))
        elif kind == "env":
            for key, value in message[1].items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        elif kind == "cluster":
            os.environ.update(message[2] or {})
            set_cluster(instance_info_from_cluster(message[1]))
        elif kind == "exit":
            jobs.put(None)

    def read_parent() -> None:
        # Whatever ends this loop, the child ends with it: without its reader it would never hear
        # of another task nor of the worker's end, and would keep its task's memory for ever.
        try:
            while True:
                try:
                    message = link.receive()
                    if message is None:
                        break  # the worker is gone
                    handle(message)
                except Exception:  # a message that does not unpickle or apply: the link goes on
                    _report(f"[skyward executor {slot}] a message from the worker failed:\n{traceback.format_exc()}")
        finally:
            os._exit(0)

    threading.Thread(target=read_parent, name="skyward-child-reader", daemon=True).start()
    link.send(("ready", os.getpid()))

    from .protocol import StreamRef

    while True:
        job = jobs.get()
        if job is None:
            break
        _, task_id, fn, args, kwargs, stream, keep = job

        def make(index: int, task_id: str = task_id) -> InputStream:
            created = InputStream(index, lambda n: link.send(("pull", task_id, index, n)))
            with inputs_lock:
                inputs[(task_id, index)] = created
            return created

        args = [make(arg.index) if type(arg) is StreamRef else arg for arg in args]
        kwargs = {key: make(value.index) if type(value) is StreamRef else value for key, value in kwargs.items()}
        context = router.new_context(task_id, slot)

        def emit(seq: int, value: Any, task_id: str = task_id) -> None:
            link.send(("item", task_id, seq, value))

        token = current_task.set(context)
        with inputs_lock:
            running[task_id] = context
        runtime.running.add(context)
        try:
            outcome = runner.run(fn, args, kwargs, stream, emit, context, keep)
        finally:
            runtime.running.discard(context)
            current_task.reset(token)
            end_subtasks(context)
        context.close()
        with inputs_lock:
            running.pop(task_id, None)
            for key in [key for key in inputs if key[0] == task_id]:
                del inputs[key]
        link.send(("done", task_id, outcome))

    lifecycle.exit(lambda text: sys.stderr.write(f"[skyward executor {slot}] {text}\n"))
    router.flush()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
