"""A small test client speaking the wire protocol to a real worker subprocess."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

PYTHON_ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = Path(__file__).resolve().parent / "tasks"
PLUGINS_DIR = Path(__file__).resolve().parent / "plugins"
#: the environment of a worker that can import the test plugins (the client ships them in real use)
PLUGIN_ENV = {"PYTHONPATH": f"{PYTHON_ROOT}{os.pathsep}{PLUGINS_DIR}"}
sys.path.insert(0, str(PYTHON_ROOT))

from skyward.protocol import FrameDecoder, encode_frame  # noqa: E402

TOKEN = "test-token-123"
TERMINAL = ("result", "end", "error")


def stop_process(pid: int, timeout: float = 30.0) -> None:
    """SIGSTOPs ``pid`` and returns once every thread of it has stopped. A stop is not instant: each
    thread stops when it is next scheduled, so on a loaded machine a thread already running or just
    woken by a packet can still read and answer for a while after ``kill`` returns (seen: a copy
    acknowledged after the signal was sent). A test that means "from now on it answers nothing"
    waits for this."""
    import signal

    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for name in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{name}/stat") as stat:
                    states.append(stat.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                continue  # a thread that ended meanwhile
        if all(state in ("T", "t", "Z", "X") for state in states):  # stopped, or a thread ending
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} did not stop in {timeout} s: its threads are {states}")
        time.sleep(0.005)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Returns once ``condition()`` holds; fails naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


class WorkerProcess:
    """``python -m skyward.worker`` started the way a provider starts it."""

    def __init__(self, *args: str, token: str = TOKEN, cwd: Path = TASKS_DIR, env: Optional[Dict[str, str]] = None,
                 new_session: bool = False) -> None:
        environment = dict(os.environ)
        environment["PYTHONPATH"] = str(PYTHON_ROOT)
        environment["SKYWARD_TOKEN"] = token
        environment.update(env or {})
        self.process = subprocess.Popen(
            [sys.executable, "-m", "skyward.worker", "--host", "127.0.0.1", "--port", "0", *args],
            cwd=str(cwd),
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=new_session,  # its own process group, to signal as a scheduler does
        )
        self.stdout_lines: List[str] = []
        self.stderr_lines: List[str] = []
        self.ready: Dict[str, Any] = self._wait_ready()
        self.port: int = self.ready["port"]
        self._drainers = [
            threading.Thread(target=self._drain, args=(self.process.stdout, self.stdout_lines), daemon=True),
            threading.Thread(target=self._drain, args=(self.process.stderr, self.stderr_lines), daemon=True),
        ]
        for drainer in self._drainers:
            drainer.start()

    def _wait_ready(self, timeout: float = 20.0) -> Dict[str, Any]:
        import json

        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.2)
            if ready:
                line = self.process.stdout.readline().decode()
                if not line:
                    break
                if line.startswith("SKYWARD_WORKER_READY "):
                    return json.loads(line[len("SKYWARD_WORKER_READY "):])
                self.stdout_lines.append(line)
        err = self.process.stderr.read().decode() if self.process.poll() is not None else ""
        raise RuntimeError(f"worker did not become ready: {err}")

    @staticmethod
    def _drain(stream: Any, lines: List[str]) -> None:
        for line in iter(stream.readline, b""):
            lines.append(line.decode(errors="replace"))

    def wait(self, timeout: float = 10.0) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        for stream in (self.process.stdin,):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class Client:
    """Blocking protocol client; messages are sorted by task id as they arrive."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.inbox: List[Dict[str, Any]] = []
        self.by_id: Dict[Any, List[Dict[str, Any]]] = defaultdict(list)
        self.frames_received = 0
        self.closed = False
        self.on_message: Optional[Callable[[Dict[str, Any]], None]] = None

    def send(self, *messages: Dict[str, Any]) -> None:
        self.sock.sendall(encode_frame(list(messages)))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _receive_once(self, timeout: float) -> bool:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except socket.timeout:
            return False
        except ConnectionResetError:  # the worker aborted the connection
            data = b""
        if not data:
            self.closed = True
            return False
        for frame in self.decoder.feed(data):
            self.frames_received += 1
            for message in frame:
                self.inbox.append(message)
                self.by_id[message.get("id")].append(message)
                if self.on_message is not None:
                    self.on_message(message)
        return True

    def wait_for(self, predicate: Callable[[Dict[str, Any]], bool], timeout: float = 10.0) -> Dict[str, Any]:
        """The first message (received or arriving) matching ``predicate``; it is consumed."""
        deadline = time.monotonic() + timeout
        while True:
            for index, message in enumerate(self.inbox):
                if predicate(message):
                    del self.inbox[index]
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closed:
                raise TimeoutError(f"no matching message; inbox: {self.inbox[-5:]} closed={self.closed}")
            self._receive_once(min(remaining, 0.5))

    def wait_closed(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            self._receive_once(0.2)
        assert self.closed, "the worker did not close the connection"

    def hello(self, token: str = TOKEN, version: int = 1) -> Dict[str, Any]:
        self.send({"t": "hello", "version": version, "token": token, "client": "skyward-test/0"})
        return self.wait_for(lambda m: m["t"] in ("welcome", "reject"))

    def cluster(self, node: int = 0, total_nodes: int = 1, **extra: Any) -> Dict[str, Any]:
        message = {
            "t": "cluster", "node": node, "total_nodes": total_nodes, "workers_per_node": 1,
            "head_addr": "127.0.0.1", "head_port": 29500, "job_id": "job-1",
            "peers": [{"node": i, "private_ip": "127.0.0.1", "public_ip": None} for i in range(total_nodes)],
            "accelerators": 0, "accelerator": None, "network": None, "env": {},
        }
        message.update(extra)
        self.send(message)
        return self.wait_for(lambda m: m["t"] == "ready")

    def submit(self, task_id: str, fn: str, *args: Any, stream: bool = False, timeout: Any = None,
               worker: Any = None, **kwargs: Any) -> None:
        self.send({"t": "submit", "id": task_id, "fn": fn, "args": list(args), "kwargs": kwargs,
                   "timeout": timeout, "stream": stream, "worker": worker})

    def terminal(self, task_id: str, timeout: float = 10.0) -> Dict[str, Any]:
        return self.wait_for(lambda m: m.get("id") == task_id and m["t"] in TERMINAL, timeout)

    def call(self, fn: str, *args: Any, task_id: Optional[str] = None, **kwargs: Any) -> Dict[str, Any]:
        task_id = task_id or f"call-{time.monotonic_ns()}"
        self.submit(task_id, fn, *args, **kwargs)
        return self.terminal(task_id)

    def value(self, fn: str, *args: Any, **kwargs: Any) -> Any:
        message = self.call(fn, *args, **kwargs)
        assert message["t"] == "result", message
        return message["value"]

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class NestedRelay:
    """Plays the TypeScript client's part in nested dispatch across ``clients`` (client i = node i).

    Each ``subtask`` a parent sends runs as a nested task (``submit`` with ``nested: true``) on the
    client of the node it names, or round robin over them; its ``result``/``error`` goes back to
    the parent's worker as ``subresult``/``suberror``. With ``hold`` set, subtasks are only recorded.
    """

    def __init__(self, clients: List[Client], hold: bool = False) -> None:
        self.clients = clients
        self.hold = hold
        self.subtasks: List[Dict[str, Any]] = []
        self.nested_ids: List[str] = []
        #: the ``subcancel`` messages received, as (parent id, sub)
        self.cancelled: List[tuple[str, int]] = []
        self._ran_on: Dict[str, Client] = {}
        self._running: Dict[str, tuple[Client, str, int]] = {}
        self._next = 0
        for client in clients:
            client.on_message = lambda message, client=client: self._on_message(client, message)

    def _on_message(self, client: Client, message: Dict[str, Any]) -> None:
        kind = message["t"]
        if kind == "subtask":
            self.subtasks.append(message)
            if self.hold:
                return
            node = message["node"]
            if node is None:
                node = self._next % len(self.clients)
                self._next += 1
            nested_id = f"nested:{message['id']}:{message['sub']}"
            self._running[nested_id] = (client, message["id"], message["sub"])
            self.nested_ids.append(nested_id)
            self._ran_on[nested_id] = self.clients[node]
            self.clients[node].send({
                "t": "submit", "id": nested_id, "fn": message["fn"], "args": message["args"],
                "kwargs": message["kwargs"], "timeout": None, "stream": False, "worker": None, "nested": True,
            })
        elif kind == "subcancel":
            self.cancelled.append((message["id"], message["sub"]))
            nested_id = f"nested:{message['id']}:{message['sub']}"
            entry = self._running.pop(nested_id, None)
            if entry is not None:  # as the TypeScript client does: the nested task is cancelled
                self._ran_on.pop(nested_id).send({"t": "cancel", "id": nested_id})
        elif kind in ("result", "error") and message.get("id") in self._running:
            parent, parent_id, sub = self._running.pop(message["id"])
            if kind == "result":
                parent.send({"t": "subresult", "id": parent_id, "sub": sub, "value": message["value"]})
            else:
                parent.send({"t": "suberror", "id": parent_id, "sub": sub,
                             **{key: message[key] for key in ("kind", "type", "message", "traceback", "node")}})

    def wait_for(self, client: Client, predicate: Callable[[Dict[str, Any]], bool],
                 timeout: float = 20.0) -> Dict[str, Any]:
        """Like ``client.wait_for``, while keeping every client's messages flowing."""
        deadline = time.monotonic() + timeout
        while True:
            for index, message in enumerate(client.inbox):
                if predicate(message):
                    del client.inbox[index]
                    return message
            if time.monotonic() > deadline:
                raise TimeoutError(f"no matching message; inbox: {client.inbox[-5:]}")
            for each in self.clients:
                each._receive_once(0.01)

    def terminal(self, client: Client, task_id: str, timeout: float = 20.0) -> Dict[str, Any]:
        return self.wait_for(client, lambda m: m.get("id") == task_id and m["t"] in TERMINAL, timeout)

    def value(self, client: Client, fn: str, *args: Any, **kwargs: Any) -> Any:
        task_id = f"parent-{time.monotonic_ns()}"
        client.submit(task_id, fn, *args, **kwargs)
        message = self.terminal(client, task_id)
        assert message["t"] == "result", message
        return message["value"]


def connect(worker: WorkerProcess, node: int = 0, total_nodes: int = 1, **cluster: Any) -> Client:
    client = Client(worker.port)
    welcome = client.hello()
    assert welcome["t"] == "welcome", welcome
    client.welcome = welcome  # type: ignore[attr-defined]
    client.cluster(node, total_nodes, **cluster)
    return client
