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
sys.path.insert(0, str(PYTHON_ROOT))

from skyward.protocol import FrameDecoder, encode_frame  # noqa: E402

TOKEN = "test-token-123"
TERMINAL = ("result", "end", "error")


class WorkerProcess:
    """``python -m skyward.worker`` started the way a provider starts it."""

    def __init__(self, *args: str, token: str = TOKEN, cwd: Path = TASKS_DIR, env: Optional[Dict[str, str]] = None) -> None:
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


def connect(worker: WorkerProcess, node: int = 0, total_nodes: int = 1, **cluster: Any) -> Client:
    client = Client(worker.port)
    welcome = client.hello()
    assert welcome["t"] == "welcome", welcome
    client.welcome = welcome  # type: ignore[attr-defined]
    client.cluster(node, total_nodes, **cluster)
    return client
