"""Throughput and latency of a worker over loopback (not a test: `python tests/bench_worker.py`).

Usage: python tests/bench_worker.py [--executor thread|process] [--concurrency N] [--tasks N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import WorkerProcess, connect  # noqa: E402

from skyward.protocol import encode_frame  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executor", default="thread")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--window", type=int, default=256, help="tasks in flight")
    parser.add_argument("--batch", type=int, default=32, help="submits per frame")
    options = parser.parse_args()

    with WorkerProcess("--executor", options.executor, "--concurrency", str(options.concurrency)) as worker:
        client = connect(worker)
        client.value("demo_tasks:noop")  # warm up (import)

        rounds = 2000
        start = time.perf_counter()
        for _ in range(rounds):
            client.value("demo_tasks:noop")
        latency = (time.perf_counter() - start) / rounds
        print(f"round trip (one at a time): {latency * 1e6:.0f} us")

        total = options.tasks
        done = 0
        sent = 0
        start = time.perf_counter()
        while done < total:
            while sent < total and sent - done < options.window:
                count = min(options.batch, total - sent, options.window - (sent - done))
                client.send_raw(encode_frame([
                    {"t": "submit", "id": f"b{sent + i}", "fn": "demo_tasks:noop", "args": [], "kwargs": {},
                     "timeout": None, "stream": False, "worker": None}
                    for i in range(count)
                ]))
                sent += count
            client._receive_once(5)
            done += sum(1 for m in client.inbox if m["t"] == "result")
            client.inbox.clear()
            client.by_id.clear()
        elapsed = time.perf_counter() - start
        print(f"pipelined: {total / elapsed:.0f} tasks/s ({total} tasks, {client.frames_received} frames received)")


if __name__ == "__main__":
    main()
