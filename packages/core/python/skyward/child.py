"""A process-executor child: ``python -m skyward.child FD``, started by the worker.

It talks to its worker over the inherited socket ``FD`` with length-prefixed pickles, runs one
task at a time on its main thread, and relays the task's output, stream items and input-stream
credit requests to the worker. It exits when the worker closes the socket (so it never outlives
the worker) or asks it to.
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
    from .context import current_task, set_cluster
    from .execution import InputStream, TaskRunner
    from .info import instance_info_from_cluster
    from .output import OutputRouter

    if settings.get("cluster") is not None:
        set_cluster(instance_info_from_cluster(settings["cluster"]))

    def sink(key: Any, stream: str, data: str) -> None:
        link.send(("out", key, stream, data))

    router = OutputRouter(sink)
    router.install()
    runner = TaskRunner()  # plugin `decorate` hooks go here; `around_process` wraps the loop below

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
        _, task_id, fn, args, kwargs, stream = job

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
        try:
            outcome = runner.run(fn, args, kwargs, stream, emit, context)
        finally:
            current_task.reset(token)
        context.close()
        with inputs_lock:
            for key in [key for key in inputs if key[0] == task_id]:
                del inputs[key]
        link.send(("done", task_id, outcome))

    router.flush()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
