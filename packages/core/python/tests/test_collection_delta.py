"""The collections' copy carries what changed, not whole collections (docs/protocol.md,
"Distributed collections"): after any sequence of operations the replica holds what the head
holds, and a write's frame is the size of the change. The head's ``Replication`` with real stores,
every frame through the wire encoding; the sizes on a real worker's copy channel."""

from __future__ import annotations

import asyncio
import random
import socket
import threading
from typing import Any, Dict, List, Tuple

from worker_client import TOKEN, Client, WorkerProcess
from skyward import collection_frames, peer_auth
from skyward.collection_delta import load
from skyward.collection_replica import Replication
from skyward.collection_store import CollectionStore
from skyward.protocol import pack_frame, to_wire

#: keys Python holds as one (1, True, 1.0), strings, nested values, and a NaN
KEYS: List[Any] = [0, 1, True, 1.0, 2, "a", "b", "", [1, 2], {"x": 1}, float("nan"), None]
OWNERS = ["0/t-1", "0/t-2", "1/t-3", "client:h"]


class FakeReplica:
    """The replica's end in process: each frame encoded as the channel sends it, decoded, loaded
    into a store of its own as the node does, and acknowledged when the test says so."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.store = CollectionStore(loop)
        self.frames: List[Dict[str, Any]] = []
        self.sizes: List[int] = []
        self.decoder = collection_frames.decoder()  # the head's frames may be compact
        #: one object: the head knows its replica by it
        self.send = self._receive

    def _receive(self, frame: Dict[str, Any]) -> None:
        data = pack_frame([to_wire(frame, "message")])
        self.sizes.append(len(data))
        for messages in self.decoder.feed(data):
            self.frames.extend(messages)

    def take(self, head: Replication) -> None:
        frames, self.frames = self.frames, []
        for frame in frames:
            if frame["full"]:
                self.store = CollectionStore(self.loop)
            for state in frame["states"]:
                load(self.store, state)
            head.acked(self.send, frame["seq"])


def contents(store: CollectionStore) -> Dict[str, Any]:
    """What a store holds, empty collections left out (a read creates one and copies nothing)."""
    def keyed(entries: Dict[Any, Any]) -> List[str]:
        # The keys as stored (what items() answers): which of two equal keys, 1 or 1.0, indexes the
        # entry is Python's business.
        return sorted(repr(entry) for entry in entries.values())

    return {
        "dicts": {name: keyed(entries) for name, entries in store.dicts.items() if entries},
        "sets": {name: keyed(members) for name, members in store.sets.items() if members},
        "counters": {name: value for name, value in store.counters.items() if value},
        "queues": {name: [repr(item) for item in items] for name, items in store.queues.items() if items},
        "locks": {name: lock.holder for name, lock in store.locks.items() if lock.holder is not None},
    }


def random_operation(rng: random.Random) -> Tuple[str, List[Any]]:
    owner = rng.choice(OWNERS)
    name = rng.choice(["x", "y"])
    key, value = rng.choice(KEYS), rng.choice(KEYS + [rng.random()])
    choices: List[List[Any]] = [
        ["dict", name, "set", key, value], ["dict", name, "pop", key], ["dict", name, "get", key],
        ["dict", name, "update", [[rng.choice(KEYS), value] for _ in range(rng.randrange(4))]],
        ["set", name, "add", key], ["set", name, "discard", key], ["set", name, "has", key],
        ["counter", name, "increment", rng.randrange(-3, 4)], ["counter", name, "reset", rng.randrange(9)],
        ["queue", name, "put", value], ["queue", name, "get", 0], ["queue", name, "get", None],
        ["lock", name, "acquire", None], ["lock", name, "release"], ["lock", name, "acquire", 0],
    ]
    if rng.random() < 0.03:
        choices.append(["dict", name, "clear"])
    return owner, rng.choice(choices)


def run_sequence(seed: int, on_loop: bool) -> None:
    rng = random.Random(seed)
    loop = asyncio.new_event_loop()
    head = Replication(CollectionStore(loop), loop)
    replica = FakeReplica(loop)
    answers: List[Any] = []

    def step(count: int) -> None:
        for _ in range(count):
            owner, request = random_operation(rng)
            if rng.random() < 0.02:
                head.owner_ended(owner)
            else:
                head.apply(owner, request, answers.append, len(answers), threadsafe=not on_loop)

    async def on_the_loop() -> None:
        # Several operations per loop turn: one frame carries them all.
        head.offer(replica.send, "1")
        for _ in range(60):
            step(rng.randrange(1, 6))
            await asyncio.sleep(0)
            replica.take(head)
            await asyncio.sleep(0)

    if on_loop:
        loop.run_until_complete(on_the_loop())
    else:  # a task's thread: each write's frame goes at once
        head.offer(replica.send, "1")
        for _ in range(200):
            step(1)
            if rng.random() < 0.7:
                replica.take(head)
        replica.take(head)
    loop.close()
    assert contents(replica.store) == contents(head.store), f"seed {seed}"
    assert answers, "nothing was answered"


def test_the_replica_holds_what_the_head_holds_after_any_sequence_of_operations() -> None:
    for seed in range(150):
        run_sequence(seed, on_loop=seed % 2 == 0)


def test_a_replica_that_comes_late_takes_everything_then_changes() -> None:
    loop = asyncio.new_event_loop()
    head = Replication(CollectionStore(loop), loop)
    for index in range(1_000):
        head.apply("client", ["dict", "d", "set", index, index], lambda _answer: None, index, threadsafe=True)
        head.apply("client", ["queue", "q", "put", index], lambda _answer: None, index, threadsafe=True)
    replica = FakeReplica(loop)
    head.offer(replica.send, "1")
    head.apply("client", ["queue", "q", "get", 0], lambda _answer: None, "g", threadsafe=True)
    head.apply("client", ["dict", "d", "pop", 3], lambda _answer: None, "p", threadsafe=True)
    replica.take(head)
    assert len(replica.sizes) == 3 and max(replica.sizes[1:]) < 200, replica.sizes  # the change, not everything
    assert contents(replica.store) == contents(head.store)
    loop.close()


def test_a_one_key_write_on_a_large_dict_sends_a_frame_the_size_of_the_change() -> None:
    """A real head worker; the test is its copy channel (the pool's peer handshake, ``replica``):
    the full frame holds 100,000 entries, a one-key ``set`` then sends a frame of a few hundred
    bytes, a queue ``put`` and ``get`` one item's."""
    with WorkerProcess("--concurrency", "1") as worker:
        client = Client(worker.port)
        client.hello()
        authority = client.cluster(0, 2)["collections"]
        request = 1

        def write(*operation: Any) -> None:
            nonlocal request
            request += 1
            client.send({"t": "coll", "id": request, "owner": "client", "op": list(operation)})

        def answered() -> Dict[str, Any]:
            return client.wait_for(lambda m: m["t"] == "coll_answer" and m["id"] == request, timeout=30)

        write("dict", "big", "update", [[f"key-{index}", index] for index in range(100_000)])
        answered()
        write("queue", "q", "put", "x" * 10_000)
        answered()
        sock = peer_auth.connect_blocking(authority["addr"], authority["port"], TOKEN.encode(), "job-1",
                                          {"node": "1", "replica": True}, "node", 20)
        try:
            sizes = frame_sizes(sock, 1)  # everything, to the replica that came
            write("dict", "big", "set", "key-7", "changed")
            sizes += frame_sizes(sock, 1)
            write("queue", "q", "put", "item")
            sizes += frame_sizes(sock, 1)
            write("queue", "q", "get", 0)
            sizes += frame_sizes(sock, 1)
            assert answered()["value"] == [True, "x" * 10_000]
        finally:
            sock.close()
        assert sizes[0] > 1_000_000, sizes
        assert sizes[1] < 400 and sizes[2] < 400 and sizes[3] < 400, sizes
        client.close()


def frame_sizes(sock: socket.socket, count: int) -> List[int]:
    """The sizes of the next ``count`` ``replicate`` frames, each acknowledged."""
    decoder = collection_frames.decoder()  # the head's frames may be compact
    sizes: List[int] = []
    received = 0
    while len(sizes) < count:
        data = sock.recv(1 << 20)
        assert data, "the head closed the copy channel"
        received += len(data)
        for messages in decoder.feed(data):
            for message in messages:
                assert message["t"] == "replicate", message
                sizes.append(received)
                received = 0
                sock.sendall(pack_frame([{"t": "acked", "seq": message["seq"]}]))
    return sizes


def test_a_task_stopped_while_its_write_is_applied_on_the_head_leaves_the_replica_whole() -> None:
    # A head-node task thread applies its operations itself (Replication.apply_here); the thread
    # executor stops a task with an exception raised at its thread's next bytecode, wherever that is.
    # Landing between the store's change and its note for the copy, it would leave the replica
    # without a write the head holds.
    from skyward import deferred_interrupts
    from skyward.executors import TaskInterrupted

    loop = asyncio.new_event_loop()
    head = Replication(CollectionStore(loop), loop)
    replica = FakeReplica(loop)
    head.offer(replica.send, "1")
    head.apply("0/t-1", ["dict", "d", "set", "before", 1], lambda _answer: None, 0, threadsafe=True)
    replica.take(head)
    apply_to_store = head.store.apply

    def stopped_while_applying(*args: Any) -> None:
        apply_to_store(*args)
        deferred_interrupts.send(threading.get_ident(), TaskInterrupted)  # the task is stopped now

    head.store.apply = stopped_while_applying  # type: ignore[method-assign]
    stopped = False
    try:
        head.apply_here("0/t-1", ["dict", "d", "set", "stopped", 2], lambda _answer: None, 1)
    except TaskInterrupted:
        stopped = True
    finally:
        deferred_interrupts.forget(threading.get_ident())
    head.store.apply = apply_to_store  # type: ignore[method-assign]
    assert stopped, "the interrupt was never raised"
    replica.take(head)
    head.apply("0/t-2", ["counter", "c", "increment", 1], lambda _answer: None, 2, threadsafe=True)
    replica.take(head)
    loop.close()
    assert contents(head.store)["dicts"] == {"d": ["('before', 1)", "('stopped', 2)"]}
    assert contents(replica.store) == contents(head.store)
