"""The collections' copy on real workers (docs/protocol.md, "Distributed collections"): a replica
that stops reading holds up only the frames it owes, never the head's event loop (a real SIGSTOP),
and the copy a node promoted holds what the head held after random writes carried as changes."""

from __future__ import annotations

import random
import signal
from collections import deque
from typing import Any, Deque, Dict, Iterator, List, Tuple

import pytest

from test_collection_epochs import answer_of, holder_of_copy, pool_of, send_op, value
from worker_client import Client, WorkerProcess, stop_process


@pytest.fixture
def two() -> Iterator[Tuple[Dict[int, WorkerProcess], Dict[int, Client], Dict[str, Any]]]:
    yield from pool_of(2)


def test_a_stopped_replica_does_not_stop_the_heads_event_loop(two: Any) -> None:
    """The replica SIGSTOPped while the head holds a large dict and writes go on: 32 MiB of copy
    frames, more than the loopback's socket buffers hold, so the head's send to it blocks. The head
    still dispatches a task and answers it; the held writes answer once the client says the replica
    is lost."""
    workers, clients, _authority = two
    value(clients[0], "dict", "d", "update", [[index, index] for index in range(100_000)])
    assert holder_of_copy(clients, (1,)) == 1
    stop_process(workers[1].process.pid)
    try:
        big = "x" * (2 << 20)
        pending = [send_op(clients[0], "dict", "d", "set", f"big-{index}", big) for index in range(16)]
        # Applied in order on the head's loop after the writes: it ran, so the loop was free.
        result = clients[0].call("demo_tasks:add", 2, 3, task_id="while-stopped")
        assert result["t"] == "result" and result["value"] == 5, result
        with pytest.raises(TimeoutError):  # not acknowledged alone: the replica may be alive
            answer_of(clients[0], pending[0], timeout=1)
        assert value(clients[0], "$lost", 1) is None
        for request_id in pending:
            answer = answer_of(clients[0], request_id, timeout=30)
            assert answer["ok"] is True, answer
        assert value(clients[0], "dict", "d", "len") == 100_016
    finally:
        workers[1].process.send_signal(signal.SIGCONT)


def test_the_promoted_replica_holds_what_the_head_held_after_random_writes(two: Any) -> None:
    """Random writes (keys Python holds as one among them) on the head, each answered once its
    change is on the replica; the head's contents read, then the replica promoted as the client
    does when it loses the head: it holds exactly those contents."""
    _workers, clients, _authority = two
    value(clients[0], "counter", "c", "increment", 0)
    assert holder_of_copy(clients, (1,)) == 1
    rng = random.Random(28)
    keys: List[Any] = [0, 1, True, 1.0, 2, "a", "b", [1, 2]]
    queue: Deque[Any] = deque()
    for step in range(400):
        key, item = rng.choice(keys), [step, rng.choice(keys)]
        operation = rng.choice([
            ["dict", "d", "set", key, item], ["dict", "d", "pop", key],
            ["dict", "d", "update", [[rng.choice(keys), item] for _ in range(rng.randrange(3))]],
            ["set", "s", "add", key], ["set", "s", "discard", key],
            ["counter", "c", "increment", rng.randrange(-3, 4)], ["queue", "q", "put", item],
            ["queue", "q", "get", 0], ["lock", "l", "acquire", 0], ["dict", "d", "clear"] if step % 97 == 0
            else ["lock", "l", "release"],
        ])
        answer = answer_of(clients[0], send_op(clients[0], *operation))
        if operation[:3] == ["queue", "q", "put"]:
            queue.append(item)
        elif operation[:3] == ["queue", "q", "get"]:
            assert answer["value"] == ([True, queue.popleft()] if queue else [False, None]), answer
    held = read_all(clients[0])
    assert held["dict"] and held["queue"] == len(queue) > 0, held
    # As the client does when it loses the head: fence the node at the next epoch, promote it.
    assert value(clients[1], "$replica", 1) is not None
    value(clients[1], "$promote", 0, 1)
    assert read_all(clients[1]) == held
    # The queue's items, in order (taking them on the head would have been copied too).
    assert [value(clients[1], "queue", "q", "get", 0) for _ in queue] == [[True, item] for item in queue]


def read_all(client: Client) -> Dict[str, Any]:
    """What the node holding the collections holds (of the queue, its length)."""
    return {
        "dict": sorted(repr(entry) for entry in value(client, "dict", "d", "items")),
        "set": sorted(repr(member) for member in value(client, "set", "s", "values")),
        "counter": value(client, "counter", "c", "value"),
        "locked": value(client, "lock", "l", "locked"),
        "queue": value(client, "queue", "q", "len"),
    }
