"""A 64 MiB echo through worker runtimes side by side (not a test: `python tests/bench_echo.py ROOT...`).

Each ROOT is a directory holding a ``skyward`` package (this checkout's is ``packages/core/python``;
an older one can be unpacked with ``git archive <commit> packages/core/python/skyward | tar -x -C DIR``
and given as ``DIR/packages/core/python``). One worker is started per ROOT; a blocking client that
receives into one reused buffer (so the client costs little) sends each the same frame, a submit of
``bench_tasks:echo`` with a 64 MiB argument, in turns. Printed per ROOT: MB/s (2 × 64 MiB per round
trip, MB = 10^6 bytes) and the worker's CPU time per echo, which depends little on other load.

Usage: python tests/bench_echo.py [--mib 64] [--rounds 8] ROOT [ROOT...]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyward.protocol import encode_frame  # noqa: E402

BENCH_TASKS = Path(__file__).resolve().parents[2] / "bench"  # bench_tasks.py: echo(value) -> value
TOKEN = "bench-echo"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Worker:
    def __init__(self, root: str, buffer: bytearray) -> None:
        environment = dict(os.environ, PYTHONPATH=str(Path(root).resolve()), SKYWARD_TOKEN=TOKEN)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "skyward.worker", "--port", "0", "--exit-on-stdin-eof"],
            cwd=str(BENCH_TASKS), env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        if not line.startswith("SKYWARD_WORKER_READY "):
            raise RuntimeError(f"the worker from {root} did not start: {line!r}")
        port = json.loads(line.split(" ", 1)[1])["port"]
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = buffer
        self.call(encode_frame([{"t": "hello", "version": 1, "token": TOKEN, "client": "bench-echo"}]))
        self.call(encode_frame([{
            "t": "cluster", "node": 0, "total_nodes": 1, "workers_per_node": 1, "head_addr": "127.0.0.1",
            "head_port": 29500, "job_id": "bench", "peers": [{"node": 0, "private_ip": "127.0.0.1", "public_ip": None}],
            "accelerators": 0, "accelerator": None, "network": None, "env": {},
        }]))

    def call(self, frame: bytes) -> List[Any]:
        """Sends ``frame``, receives one frame into the reused buffer; returns its parsed header."""
        self.sock.sendall(frame)
        view = memoryview(self.buffer)
        received = 0
        while True:
            count = self.sock.recv_into(view[received:])
            if not count:
                raise RuntimeError("the worker closed the connection")
            received += count
            if received >= 8:
                header_length, body_length = struct.unpack_from(">II", self.buffer, 0)
                if received >= 8 + header_length + body_length:
                    return json.loads(bytes(self.buffer[8 : 8 + header_length]))

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.sock.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("roots", nargs="+")
    options = parser.parse_args()
    size = options.mib * 1024 * 1024
    payload = os.urandom(1024) * (size // 1024)
    frame = encode_frame([{"t": "submit", "id": "echo", "fn": "bench_tasks:echo", "args": [payload], "kwargs": {},
                           "timeout": None, "stream": False, "worker": None}])
    buffer = bytearray(size + 64 * 1024)
    workers = {root: Worker(root, buffer) for root in options.roots}
    results: Dict[str, List[Tuple[float, float]]] = {root: [] for root in options.roots}
    try:
        for worker in workers.values():
            worker.call(frame)  # warm-up
        for _ in range(options.rounds):
            for root, worker in workers.items():
                cpu_before = cpu_seconds(worker.process.pid)
                start = time.perf_counter()
                header = worker.call(frame)
                elapsed = time.perf_counter() - start
                assert header[0] == {"seg": [size]} and header[1]["t"] == "result", header
                results[root].append((2 * size / elapsed / 1e6, (cpu_seconds(worker.process.pid) - cpu_before) * 1e3))
    finally:
        for worker in workers.values():
            worker.close()
    for root, runs in results.items():
        rates = sorted(rate for rate, _ in runs)
        cpu = sorted(ms for _, ms in runs)
        print(f"{root}: {rates[len(rates) // 2]:.0f} MB/s median ({', '.join(f'{rate:.0f}' for rate, _ in runs)}); "
              f"worker CPU per echo {cpu[len(cpu) // 2]:.0f} ms median")


if __name__ == "__main__":
    main()
