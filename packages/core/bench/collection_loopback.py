"""The collections' thread path on loopback, without a pool: a head process (a ``Replication`` with
its copy channel, as a head worker holds them), a replica process answering ``replicate`` frames
as a node holding the copy does, and a node-1 process whose task thread sends its operations on a
connection of its own (``collection_direct``). Prints microseconds per strong counter increment and
per lock acquire + release, timed in a task thread on the head and on node 1, beside the floor: a
blocking 1-byte echo between two processes; and the head process's CPU per operation (an increment,
or half a lock cycle) and its task thread's own, which a busy machine sways less than the wall-clock
figures; the copy's process's CPU per operation; a lean path's bound (:func:`_lean`: what one writer
on an idle copy channel could cost at best, the store's apply and one hand-packed frame); and this
Python's speed (figures compare only between interpreters of the same speed). A profiling aid for the far bench's collection rows
(docs/benchmarks.md, "The far client"); figures are printed, never asserted.

    python packages/core/bench/collection_loopback.py [--ops 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import math
import multiprocessing
import os
import resource
import socket
import sys
import threading
import time
from typing import Any, Callable, List, Tuple

#: the runtime measured (another checkout's, for a side-by-side comparison)
sys.path.insert(0, os.environ.get("SKYWARD_RUNTIME") or os.path.join(os.path.dirname(__file__), "..", "python"))

from skyward.collection_channel import read_messages, send_all, tune  # noqa: E402
from skyward.collection_copy_head import HeadChannel  # noqa: E402
from skyward.collection_delta import load  # noqa: E402
from skyward.collection_direct import DirectConnection, message_answer  # noqa: E402
from skyward.collection_replica import Replication  # noqa: E402
from skyward.collection_store import CollectionStore  # noqa: E402
from skyward.protocol import FrameDecoder, pack_frame, to_wire  # noqa: E402

from reference_loop import interpreter  # noqa: E402

try:  # the compact frames (a runtime before them speaks JSON frames only)
    from skyward.collection_frames import decoder as frame_decoder, pack  # noqa: E402
except ImportError:
    def frame_decoder() -> FrameDecoder:
        return FrameDecoder()

    def pack(message: Any, wire: bool = False) -> bytes:
        return pack_frame([message if wire else to_wire(message, "message")])


def _replica(port: int) -> None:
    """Holds the copy: answers each ``replicate`` frame with ``acked``, read by the runtime's own
    reader of the copy channel (``NodeEnd``, its channel thread's loop) as a node holding the copy
    does (a runtime before it: a blocking read of every frame)."""
    loop = asyncio.new_event_loop()
    store = CollectionStore(loop)
    sock = socket.create_connection(("127.0.0.1", port))
    tune(sock)

    def each(message: Any) -> None:  # as CopyChannel's: the copy takes it, then the ack goes
        for state in message.get("states") or []:
            load(store, state)
        send_all(sock, pack({"t": "acked", "seq": message.get("seq")}))

    try:
        try:
            from skyward.collection_copy_node import NodeEnd
        except ImportError:
            read_messages(sock, each)
        else:
            NodeEnd(sock, each).run()
    except OSError:
        pass


def _echo(port: int) -> None:
    listener = socket.create_server(("127.0.0.1", port))
    connection, _ = listener.accept()
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := connection.recv(65536):
        connection.sendall(data)


def _floor(port: int, tries: int) -> float:
    deadline = time.monotonic() + 60
    while True:  # the echo process may take a while to listen on a busy machine
        try:
            connection = socket.create_connection(("127.0.0.1", port))
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    samples = []
    for _ in range(tries):
        started = time.perf_counter_ns()
        connection.sendall(b"x")
        connection.recv(1)
        samples.append(time.perf_counter_ns() - started)
    connection.close()
    return sorted(samples)[len(samples) // 2] / 1000


def _node1(port: int, ops: int, rounds: int, results: Any) -> None:
    """A task thread on node 1: operations on its own connection to the head, as DirectCaller sends them."""
    sock = socket.create_connection(("127.0.0.1", port))
    tune(sock)
    decoder = frame_decoder()
    ids = iter(range(1, 10**9))

    def call(op: List[Any]) -> Any:
        request_id = next(ids)
        send_all(sock, pack({"t": "op", "id": request_id, "owner": "1/task", "op": op}, wire=True))
        while True:
            if hasattr(decoder, "get_buffer"):  # into the decoder's memory, as DirectCaller reads
                with decoder.get_buffer() as buffer:
                    count = sock.recv_into(buffer)
                batches = decoder.buffer_updated(count)
            else:  # a runtime before it
                batches = decoder.feed(sock.recv(262144))
            for messages in batches:
                for message in messages:
                    if message.get("id") == request_id:
                        return message_answer(message)

    results.put(("node 1", _timed(call, ops, rounds)))


def _timed(call: Callable[[List[Any]], Any], ops: int, rounds: int) -> dict:
    figures: dict = {"increment": [], "lock": []}
    for _ in range(rounds):
        started = time.perf_counter_ns()
        for _ in range(ops):
            call(["counter", "c", "increment", 1])
        figures["increment"].append((time.perf_counter_ns() - started) / ops / 1000)
        started = time.perf_counter_ns()
        for _ in range(ops):
            call(["lock", "l", "acquire", None])
            call(["lock", "l", "release"])
        figures["lock"].append((time.perf_counter_ns() - started) / ops / 1000)
    return {what: sorted(values)[len(values) // 2] for what, values in figures.items()}


def start() -> Tuple[argparse.Namespace, Any, float, asyncio.AbstractEventLoop]:
    """The flags, a process context, the floor (measured now) and a running loop for the head."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    flags = parser.parse_args()
    context = multiprocessing.get_context("spawn")

    echo_port = _free_port()
    echo = context.Process(target=_echo, args=(echo_port,), daemon=True)
    echo.start()
    floor = _floor(echo_port, 2000)

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return flags, context, floor, loop


def main() -> None:
    flags, context, floor, loop = start()
    head = Replication(CollectionStore(loop), loop)
    listener = socket.create_server(("127.0.0.1", 0))
    replica = context.Process(target=_replica, args=(listener.getsockname()[1],), daemon=True)
    replica.start()
    accepted, _ = listener.accept()
    channel = HeadChannel(accepted, head.acked, head.gone, lambda message: None, print)
    channel.start(b"")
    head.offer(channel.send)

    ids = iter(range(1, 10**9))

    def call(op: List[Any]) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if hasattr(head, "apply_here"):  # as a task thread does
            head.apply_here("0/task", op, future.set_result, ("direct", next(ids)))
        else:  # a runtime before it
            head.apply("0/task", op, future.set_result, ("direct", next(ids)), threadsafe=True)
        return future.result()

    operations = flags.ops * flags.rounds * 3  # an increment, or half a lock cycle
    spent, spent_here, spent_copy = _cpu_seconds(), time.thread_time_ns(), _process_cpu(replica.pid)
    on_head = _timed(call, flags.ops, flags.rounds)
    head_cpu = {"head": (_cpu_seconds() - spent) / operations * 1e6}
    copy_cpu = (_process_cpu(replica.pid) - spent_copy) / operations * 1e6
    task_thread_cpu = (time.thread_time_ns() - spent_here) / operations / 1000

    lean, lean_cpu = _lean(context, loop, flags.ops, flags.rounds)

    direct_listener = socket.create_server(("127.0.0.1", 0))
    results = context.Queue()
    node1 = context.Process(target=_node1, args=(direct_listener.getsockname()[1], flags.ops, flags.rounds, results),
                            daemon=True)
    node1.start()
    connection, _ = direct_listener.accept()
    spent = _cpu_seconds()
    DirectConnection(connection, lambda: head, lambda: None, print).start(b"")
    _, on_node1 = results.get(timeout=600)
    head_cpu["node 1"] = (_cpu_seconds() - spent) / operations * 1e6

    print(f"floor (1-byte echo between two processes): {floor:.1f} µs")
    for where, figures in (("head", on_head), ("node 1", on_node1)):
        for what, value in figures.items():
            print(f"{what:>9} in a task on {where:<6}: {value:7.1f} µs = {value / floor:5.1f}× the floor")
        print(f"the head process's CPU per operation (tasks on {where}): {head_cpu[where]:.1f} µs")
    print(f"the head's task thread's own CPU per operation: {task_thread_cpu:.1f} µs")
    print(f"the copy's process's CPU per operation (tasks on head): {copy_cpu:.0f} µs (clock ticks: ±10 µs)")
    for what, value in lean.items():
        print(f"{what:>9}, the lean path's bound: {value:7.1f} µs = {value / floor:5.1f}× the floor")
    print(f"the lean path's task thread's own CPU per operation: {lean_cpu:.1f} µs")
    print(interpreter())


def _lean(context: Any, loop: asyncio.AbstractEventLoop, ops: int, rounds: int) -> Tuple[dict, float]:
    """What a lean path for one writer on an idle copy channel could cost at best (a reference, not
    the runtime's path): the store's apply under its lock, the copy's compact ``replicate`` frame
    packed by hand and sent, a blocking ``recv`` of its ``acked``, its seq checked — no ``Future``, no
    decoder, no turns between readers, no interrupt holds; to a replica process of its own. The
    figures and the task thread's own CPU per operation."""
    import struct

    listener = socket.create_server(("127.0.0.1", 0))
    replica = context.Process(target=_replica, args=(listener.getsockname()[1],), daemon=True)
    replica.start()
    sock, _ = listener.accept()
    tune(sock)
    store = CollectionStore(loop)
    prefix, head, i64, u16 = struct.Struct(">II"), struct.Struct(">qqH"), struct.Struct(">q"), struct.Struct(">H")
    mark = 0xFF010000 | 1 << 8  # a compact frame of kind 1: replicate (collection_frames.py)
    name = u16.pack(1) + b"c"
    holder = u16.pack(6) + b"0/task"
    seqs = iter(range(1, 10**9))
    ids = iter(range(1, 10**9))

    def call(op: List[Any]) -> Any:
        answers: List[Any] = []
        with store.lock:
            store.apply("0/task", op, answers.append, ("direct", next(ids)))
            seq = next(seqs)
            if op[0] == "counter":
                state = b"\x00" + name + i64.pack(answers[0][1])
            else:
                state = b"\x01" + u16.pack(1) + b"l" + (holder if op[2] == "acquire" else b"\xff\xff")
            body = head.pack(0, seq, 1) + state
            sock.send(prefix.pack(mark, len(body)) + body)
        ack = sock.recv(64)
        if len(ack) != 16 or i64.unpack_from(ack, 8)[0] != seq:
            raise RuntimeError(f"unexpected ack {ack!r} for seq {seq}")
        return answers[0]

    spent = time.thread_time_ns()
    figures = _timed(call, ops, rounds)
    cpu = (time.thread_time_ns() - spent) / (ops * rounds * 3) / 1000
    sock.close()
    return figures, cpu


def _cpu_seconds() -> float:
    """This process's CPU time (all its threads): less swayed by a busy machine than the wall's."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int) -> float:
    """Another process's CPU seconds (user + system), from /proc (NaN where there is none)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


if __name__ == "__main__":
    main()
