"""What the collections' copy costs the head (docs/protocol.md, "Distributed collections"): a
replica that stops reading holds up only the frames it owes, never the head's event loop. Real
workers on loopback, a real SIGSTOP."""

from __future__ import annotations

import signal
from typing import Any, Dict, Iterator, Tuple

import pytest

from test_collection_epochs import answer_of, holder_of_copy, pool_of, send_op, value
from worker_client import Client, WorkerProcess


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
    workers[1].process.send_signal(signal.SIGSTOP)
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
