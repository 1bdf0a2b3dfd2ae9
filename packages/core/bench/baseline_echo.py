"""The benchmark's baseline: a bare asyncio echo over loopback, the floor any asyncio RPC over TCP sits on.

    python3 baseline_echo.py --calls 5000 --messages 100000 --payload-mib 64 --repetitions 5 --starts 5

runs a client (this process) against an echo server in a separate Python process — the same shape
as the TypeScript client and a Python worker, both sides plain ``asyncio.Protocol``s as the worker's
connection is — and prints one JSON object:

- ``latency_ms``: p50/p99/mean of one-at-a-time round trips of a small (128-byte) frame;
- ``messages_per_s``: small frames echoed per second with all of them pipelined (the client writes
  them all, honouring flow control, while it counts the echoes coming back);
- ``mb_per_s``: a 64 MiB frame echoed back whole (the server reads the whole frame before it
  answers, as a worker must), counted as 2 x 64 MiB moved per round trip, MB = 10^6 bytes: the
  median over the repetitions, and each one;
- ``ready_ms``: the time to start N echo servers (one Python process each), connect to all of them
  and make one round trip on each: the bare floor under "a 4-node pool is ready".

Frames are a 4-byte big-endian length and a body; both sides set TCP_NODELAY.

    python3 baseline_echo.py serve

is the server: it listens on a free loopback port, prints ``PORT <n>`` and echoes every frame back
until its client goes away.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import struct
import sys
import time
from typing import Callable, List, Optional

from bench_stats import latency_summary

HEADER = struct.Struct(">I")
SMALL = b"x" * 128


class FramedProtocol(asyncio.Protocol):
    """Splits the byte stream into length-prefixed frames and hands each to ``on_frame``."""

    def __init__(self) -> None:
        self.transport: Optional[asyncio.Transport] = None
        self.buffer = bytearray()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.can_write = asyncio.Event()
        self.can_write.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        offset = 0
        size = len(buffer)
        while size - offset >= 4:
            (length,) = HEADER.unpack_from(buffer, offset)
            end = offset + 4 + length
            if end > size:
                break
            self.on_frame(buffer[offset + 4 : end])
            offset = end
        if offset:
            del buffer[:offset]

    def on_frame(self, frame: bytearray) -> None:
        raise NotImplementedError

    def send(self, frame: bytearray) -> None:
        assert self.transport is not None
        self.transport.write(HEADER.pack(len(frame)))
        self.transport.write(frame)

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


# ————————————————————————————————————————————————————————————————— server


class EchoServer(FramedProtocol):
    def on_frame(self, frame: bytearray) -> None:
        self.send(frame)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        super().connection_lost(exc)
        asyncio.get_running_loop().stop()


def serve() -> None:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = loop.run_until_complete(loop.create_server(EchoServer, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()
    loop.run_forever()


# ————————————————————————————————————————————————————————————————— client


class EchoClient(FramedProtocol):
    def __init__(self) -> None:
        super().__init__()
        self.waiter: Optional[asyncio.Future[bytearray]] = None
        self.counter: Optional[Callable[[], None]] = None

    def on_frame(self, frame: bytearray) -> None:
        if self.counter is not None:
            self.counter()
        elif self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(frame)

    async def round_trip(self, frame: bytes) -> bytearray:
        self.waiter = asyncio.get_running_loop().create_future()
        self.send(frame)
        return await self.waiter


class Server:
    """An echo server process and the client's connection to it."""

    def __init__(self, process: asyncio.subprocess.Process, client: EchoClient) -> None:
        self.process = process
        self.client = client

    @classmethod
    async def start(cls) -> "Server":
        process = await asyncio.create_subprocess_exec(
            sys.executable, os.path.abspath(__file__), "serve", stdout=asyncio.subprocess.PIPE
        )
        assert process.stdout is not None
        line = (await process.stdout.readline()).decode()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the echo server did not start: {line!r}")
        loop = asyncio.get_running_loop()
        _, client = await loop.create_connection(EchoClient, "127.0.0.1", int(line.split()[1]))
        return cls(process, client)

    async def stop(self) -> None:
        if self.client.transport is not None:
            self.client.transport.close()
        try:
            await asyncio.wait_for(self.process.wait(), 5)
        except asyncio.TimeoutError:
            self.process.kill()
            await self.process.wait()


async def _latency(client: EchoClient, calls: int) -> dict:
    for _ in range(min(500, calls)):
        await client.round_trip(SMALL)
    samples: List[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        await client.round_trip(SMALL)
        samples.append((time.perf_counter() - started) * 1000)
    return latency_summary(samples)


async def _pipelined(client: EchoClient, messages: int) -> float:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    remaining = messages

    def count() -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0:
            done.set_result(None)

    frame = HEADER.pack(len(SMALL)) + SMALL
    batch = frame * 256
    assert client.transport is not None
    client.counter = count
    started = time.perf_counter()
    sent = 0
    while sent < messages:
        await client.can_write.wait()
        n = min(256, messages - sent)
        client.transport.write(batch if n == 256 else frame * n)
        sent += n
        await asyncio.sleep(0)  # let the echoes be read while writing
    await done
    elapsed = time.perf_counter() - started
    client.counter = None
    return messages / elapsed


async def _bulk(client: EchoClient, mib: int, repetitions: int) -> dict:
    payload = os.urandom(mib * 1024 * 1024)
    moved = 2 * len(payload)

    async def once() -> float:
        started = time.perf_counter()
        echoed = await client.round_trip(payload)
        elapsed = time.perf_counter() - started
        if len(echoed) != len(payload) or echoed[:64] != payload[:64] or echoed[-64:] != payload[-64:]:
            raise RuntimeError("the echoed payload differs")
        return moved / elapsed / 1e6

    await once()  # warm-up
    runs = [await once() for _ in range(repetitions)]
    return {"median": statistics.median(runs), "runs": runs, "payload_mib": mib}


async def _ready(nodes: int, starts: int) -> dict:
    runs: List[float] = []
    for _ in range(starts):
        started = time.perf_counter()
        servers = await asyncio.gather(*(Server.start() for _ in range(nodes)))
        await asyncio.gather(*(server.client.round_trip(SMALL) for server in servers))
        runs.append((time.perf_counter() - started) * 1000)
        await asyncio.gather(*(server.stop() for server in servers))
    return {"median": statistics.median(runs), "runs": runs, "nodes": nodes}


async def measure(options: argparse.Namespace) -> dict:
    server = await Server.start()
    try:
        latency = await _latency(server.client, options.calls)
        await _pipelined(server.client, min(10_000, options.messages))  # warm-up
        rates = [await _pipelined(server.client, options.messages) for _ in range(options.runs)]
        bulk = await _bulk(server.client, options.payload_mib, options.repetitions)
    finally:
        await server.stop()
    ready = await _ready(options.nodes, options.starts)
    return {
        "python": sys.version.split()[0],
        "latency_ms": latency,
        "messages_per_s": {"median": statistics.median(rates), "runs": rates, "messages": options.messages},
        "mb_per_s": bulk,
        "ready_ms": ready,
    }


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        serve()
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="one-at-a-time round trips timed")
    parser.add_argument("--messages", type=int, default=100_000, help="small frames per pipelined run")
    parser.add_argument("--runs", type=int, default=3, help="pipelined runs (the median is reported)")
    parser.add_argument("--payload-mib", type=int, default=64)
    parser.add_argument("--repetitions", type=int, default=5, help="timed bulk echoes (after one warm-up)")
    parser.add_argument("--nodes", type=int, default=4, help="servers started at once for ready_ms")
    parser.add_argument("--starts", type=int, default=5, help="timed starts for ready_ms")
    print(json.dumps(asyncio.run(measure(parser.parse_args()))))


if __name__ == "__main__":
    main()
