"""A process-executor child: ``python -m skyward.child FD``, started by the worker.

It talks to its worker over the inherited socket ``FD`` with length-prefixed pickles, runs one
task at a time on its main thread, and relays the task's output, stream items, input-stream
credit requests and subtasks (nested dispatch) to the worker. It imports the plugins' worker
modules when it starts, enters their ``around_process`` hooks on its first task and wraps every
task with their ``decorate`` hooks. It exits when the worker closes the socket (so it never
outlives the worker) or, after exiting its ``around_process`` hooks, when the worker asks it to.
"""

from __future__ import annotations

import os
import pickle
import queue
import socket
import struct
import sys
import threading
from typing import Any, Dict, Tuple

_LENGTH = struct.Struct(">I")


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
        """The next message, or ``None`` when the worker closed the socket."""
        header = self._reader.read(4)
        if len(header) < 4:
            return None
        (length,) = _LENGTH.unpack(header)
        payload = self._reader.read(length)
        if len(payload) < length:
            return None
        return pickle.loads(payload)


def main() -> None:
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
    runner = TaskRunner(prepare=lifecycle.enter)
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
    runtime.metric_sender = lambda context, name, value, step: link.send(("metric", context.key, name, value, step))
    running: Dict[str, TaskContext] = {}

    jobs: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
    inputs: Dict[Tuple[str, int], InputStream] = {}
    inputs_lock = threading.Lock()

    def read_parent() -> None:
        while True:
            message = link.receive()
            if message is None:
                os._exit(0)  # the worker is gone
            kind = message[0]
            if kind == "run":
                jobs.put(message)
            elif kind in ("in", "in_end", "in_error"):
                with inputs_lock:
                    stream = inputs.get((message[1], message[2]))
                if stream is None:
                    continue
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
                    subtasks.resolve(message[2], message[3])
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
