"""A write from the node holding the copy, on loopback, without a pool: a head process (a
``Replication`` behind its ``AuthorityServer``, as a head worker serves them) and a node-1 process
holding the copy with the runtime's own ``CopyChannel`` and sending a task thread's operations with
its own ``DirectCaller`` — the shape of a 2-node pool, where the copy is always on node 1. Prints
microseconds per strong counter increment and per lock acquire + release in node 1's task thread,
beside the floor (a blocking 1-byte echo between two processes), how many answers the copy gave
(``collection_mailbox``; -1 for a runtime without it), and the CPU per operation of each process.
Figures are printed, never asserted.

    python packages/core/bench/collection_copy_answers.py [--ops 2000] [--rounds 3]
    SKYWARD_RUNTIME=<another checkout>/packages/core/python python … (that runtime, side by side)
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

#: the runtime measured (another checkout's, for a side-by-side comparison)
sys.path.insert(0, os.environ.get("SKYWARD_RUNTIME") or os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))

from collection_loopback import _cpu_seconds, _timed, start  # noqa: E402
from skyward.collection_channel import CopyChannel  # noqa: E402
from skyward.collection_delta import load  # noqa: E402
from skyward.collection_direct import DirectCaller  # noqa: E402
from skyward.collection_link import AuthorityServer  # noqa: E402
from skyward.collection_replica import Replication  # noqa: E402
from skyward.collection_store import CollectionStore  # noqa: E402

TOKEN = b"b" * 32


def _node1(address: Tuple[str, int], ops: int, rounds: int, results: Any) -> None:
    """Node 1: holds the copy (its copy channel's thread) and runs a task thread's operations."""
    loop = asyncio.new_event_loop()
    store = CollectionStore(loop)
    try:
        from skyward.collection_mailbox import Mailbox
        mailbox: Any = Mailbox()
        extra: List[Any] = [mailbox]
    except ImportError:  # a runtime before it
        mailbox, extra = None, []

    def replicated(message: Dict[str, Any]) -> Dict[str, Any]:
        for state in message.get("states") or []:
            load(store, state)
        return {"t": "acked", "seq": message.get("seq")}

    channel = CopyChannel(TOKEN, lambda: "job", lambda: 1, replicated, print, *extra)
    channel.open(address[0], address[1], 30)
    caller = DirectCaller(TOKEN, lambda: "job", lambda: 1, 30, *extra)
    # The copy channel connects on a thread of its own: the first operations wait for it to be up.
    deadline = time.monotonic() + 30
    while mailbox is not None and mailbox.copy_address != address and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the head's first (full) frame and its ack
    spent = _cpu_seconds()
    figures = _timed(lambda op: caller.call(address, "1/task", op), ops, rounds)
    results.put((figures, (_cpu_seconds() - spent) / (ops * rounds * 3) * 1e6,
                 -1 if mailbox is None else mailbox.delivered))
    channel.close()


def main() -> None:
    flags, context, floor, loop = start()
    head = Replication(CollectionStore(loop), loop)
    server = AuthorityServer(head, TOKEN, lambda: "job", print)

    async def listen() -> Tuple[str, int]:
        return server.listen("127.0.0.1")

    address = asyncio.run_coroutine_threadsafe(listen(), loop).result(30)
    results = context.Queue()
    spent = _cpu_seconds()
    node1 = context.Process(target=_node1, args=(address, flags.ops, flags.rounds, results), daemon=True)
    node1.start()
    figures, node1_cpu, answered = results.get(timeout=600)
    head_cpu = (_cpu_seconds() - spent) / (flags.ops * flags.rounds * 3) * 1e6
    print(f"floor (1-byte echo between two processes): {floor:.1f} µs")
    for what, value in figures.items():
        print(f"{what:>9} in a task on node 1 (it holds the copy): {value:7.1f} µs = {value / floor:5.1f}× the floor")
    print(f"answers the copy gave: {answered}")
    print(f"CPU per operation (an increment, or half a lock cycle): head {head_cpu:.1f} µs, node 1 {node1_cpu:.1f} µs")
    node1.join(30)


if __name__ == "__main__":
    main()
