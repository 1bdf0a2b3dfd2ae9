"""No split brain in the collections' replication (docs/protocol.md, "Distributed collections"): the
authority holds an epoch, a node fenced at a newer epoch refuses an older holder's ``replicate``
frames, a superseded head acknowledges nothing more, and a head whose replica's connection closed
answers nothing alone until the client confirms that node lost. Real workers on loopback, real
SIGKILLs; the frame-level rule against a fake head speaking the peer protocol."""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from worker_client import TOKEN, Client, WorkerProcess, stop_process
from skyward import collection_frames, peer_auth
from skyward.protocol import pack_frame

_ids = itertools.count(1)


def send_op(client: Client, *request: Any) -> int:
    request_id = next(_ids)
    client.send({"t": "coll", "id": request_id, "owner": "client", "op": list(request)})
    return request_id


def answer_of(client: Client, request_id: int, timeout: float = 20) -> Dict[str, Any]:
    return client.wait_for(lambda m: m["t"] == "coll_answer" and m["id"] == request_id, timeout=timeout)


def value(client: Client, *request: Any) -> Any:
    answer = answer_of(client, send_op(client, *request))
    assert answer["ok"] is True, answer
    return answer["value"]


def holder_of_copy(clients: Dict[int, Client], nodes: Tuple[int, ...]) -> int:
    """The node that took the head's copy (polled: the head picks one as they connect)."""
    deadline = time.monotonic() + 20
    while True:
        holders = [node for node in nodes if value(clients[node], "$replica") is not None]
        if holders:
            return holders[0]
        assert time.monotonic() < deadline, "no node took the copy"
        time.sleep(0.05)


def pool_of(count: int, env: Dict[str, str] | None = None,
            announce: bool = True) -> Iterator[Tuple[Dict[int, WorkerProcess], Dict[int, Client], Dict[str, Any]]]:
    """``count`` workers told they form one pool; unless ``announce`` is False (a pool's first
    moments), every other node is told where the head serves."""
    workers = [WorkerProcess("--concurrency", "2", *(["--node", str(node)] if node else []), env=env)
               for node in range(count)]
    try:
        for each in workers:
            each.__enter__()
        clients = {node: Client(each.port) for node, each in enumerate(workers)}
        authority: Dict[str, Any] = {}
        for node, client in clients.items():
            assert client.hello()["t"] == "welcome"
            ready = client.cluster(node, count)
            if node == 0:
                authority = ready["collections"]
        assert authority["epoch"] == 0
        for node in range(1, count if announce else 1):
            clients[node].send({"t": "authority", **authority})
        yield dict(enumerate(workers)), clients, authority
        for client in clients.values():
            client.close()
    finally:
        for each in workers:
            each.__exit__(None, None, None)


@pytest.fixture
def three() -> Iterator[Tuple[Dict[int, WorkerProcess], Dict[int, Client], Dict[str, Any]]]:
    yield from pool_of(3)


@pytest.fixture
def two() -> Iterator[Tuple[Dict[int, WorkerProcess], Dict[int, Client], Dict[str, Any]]]:
    yield from pool_of(2)


def test_a_head_the_client_lost_but_still_running_loses_no_acknowledged_write(three: Any, tmp_path: Any) -> None:
    """The client's link to the head is gone, the head is not: its task keeps writing while the
    client fences the other nodes at epoch 1 and promotes the newest copy. Every add the old head
    acknowledged is on the new holder; the adds it could not get copied fail with an error naming
    where the collections moved, and the task's later adds reach the new holder over the link."""
    workers, clients, _authority = three
    value(clients[0], "set", "s", "add", -1)
    holder_of_copy(clients, (1, 2))
    refused = tmp_path / "refused"
    clients[0].submit("writer", "collection_wire_tasks:add_steadily", "s", 300, 0.01, str(refused))
    deadline = time.monotonic() + 20
    while value(clients[0], "set", "s", "len") < 30:
        assert time.monotonic() < deadline, "the head's task did not write"
        time.sleep(0.02)
    # As the client does when it loses the head: fence every node it still reaches, then promote.
    copies = {node: value(clients[node], "$replica", 1) for node in (1, 2)}
    held = {node: copy for node, copy in copies.items() if copy is not None}
    # The task's next add is copied to a fenced node, refused: the head stops acknowledging at once,
    # before any node is promoted (the client's own reads of it are refused from then on too).
    deadline = time.monotonic() + 20
    while answer_of(clients[0], send_op(clients[0], "set", "s", "len"))["ok"]:
        assert time.monotonic() < deadline, "the old head went on answering"
        time.sleep(0.01)
    # Until a node is promoted the task's adds are refused: wait for one (a loaded machine can put
    # the task's thread to sleep past the whole window otherwise, and no add would be refused).
    deadline = time.monotonic() + 20
    while not (refused.exists() and refused.read_text().strip()):
        assert time.monotonic() < deadline, "the superseded head refused none of its task's adds"
        time.sleep(0.01)
    promoted = max(held, key=lambda node: (held[node]["epoch"], held[node]["seq"]))
    address = value(clients[promoted], "$promote", 0, 1)
    assert address["epoch"] == 1
    clients[3 - promoted].send({"t": "authority", **address})
    result = clients[0].terminal("writer", timeout=60)
    assert result["t"] == "result", result
    acked: List[int] = result["value"]["acked"]
    errors: List[List[Any]] = result["value"]["errors"]
    members = set(value(clients[promoted], "set", "s", "values"))
    assert [index for index in acked if index not in members] == []
    assert errors, "no add was refused when the head was superseded"
    assert all("the collections moved" in message for _index, message in errors), errors
    where = f"{address['addr']}:{address['port']}"
    # The task's adds after the move reached the new holder.
    assert max(acked) > errors[-1][0]
    # The old head refuses the client's own operations, naming where the collections are now.
    refusal = answer_of(clients[0], send_op(clients[0], "counter", "c", "increment", 1))
    assert refusal["ok"] is False and where in refusal["message"], refusal
    assert workers[0].process.poll() is None


@pytest.mark.parametrize("compact", [False, True], ids=["json", "compact"])
def test_a_node_fenced_at_a_newer_epoch_refuses_the_older_heads_frames(compact: bool) -> None:
    """A fake head of epoch 0 speaking the peer protocol to a real node: its ``replicate`` frames are
    acked until the client fences the node at epoch 1 (``$replica``), refused with ``superseded``
    after; a frame of epoch 1 is taken again. The same in JSON frames and in compact ones (the
    ``full`` first frame is JSON either way: it has no compact layout)."""
    with WorkerProcess("--concurrency", "1", "--node", "1") as node:
        client = Client(node.port)
        client.hello()
        client.cluster(1, 2)

        async def fake_head() -> List[Any]:
            offered: asyncio.Queue[Tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

            async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                first = await peer_auth.accept(reader, writer, TOKEN.encode(), "job-1", "node", 10)
                assert first is not None and first["replica"] is True and first["node"] == "1", first
                writer.write(peer_auth.frame({"ok": True}))
                await offered.put((reader, writer))
                await asyncio.sleep(60)  # the connection stays open while the test uses it

            server = await asyncio.start_server(serve, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            # The node connects when told where the head is, offering to hold the copy.
            client.send({"t": "authority", "addr": "127.0.0.1", "port": port, "epoch": 0})
            reader, writer = await asyncio.wait_for(offered.get(), 20)
            decoder = collection_frames.decoder()
            backlog: List[Dict[str, Any]] = []

            async def replicate(seq: int, epoch: int) -> Dict[str, Any]:
                frame = {"t": "replicate", "epoch": epoch, "seq": seq, "full": seq == 1,
                         "states": [{"kind": "counter", "name": "c", "value": seq}]}
                packed = collection_frames.pack(frame) if compact else pack_frame([frame])
                assert packed[:1] == (b"\xff" if compact and seq > 1 else b"\x00")
                writer.write(packed)
                while not backlog:
                    data = await asyncio.wait_for(reader.read(65536), 20)
                    assert data, "the node closed the connection"
                    for messages in decoder.feed(data):
                        backlog.extend(messages)
                return backlog.pop(0)

            answers: List[Any] = [await replicate(1, 0), value(client, "$replica", 1)]
            answers += [await replicate(2, 0), value(client, "$replica"), await replicate(3, 1)]
            answers.append(value(client, "$replica"))
            writer.close()
            server.close()
            return answers

        answers = asyncio.run(fake_head())
        assert answers[0] == {"t": "acked", "seq": 1}
        assert answers[1] == {"epoch": 0, "seq": 1}  # fenced: the copy it holds is epoch 0's
        assert answers[2] == {"t": "superseded", "epoch": 1}
        assert answers[3] == {"epoch": 0, "seq": 1}  # the refused frame changed nothing
        assert answers[4] == {"t": "acked", "seq": 3}
        assert answers[5] == {"epoch": 1, "seq": 3}
        client.close()


def test_a_head_whose_replica_died_answers_alone_only_once_the_client_confirms_the_loss(two: Any) -> None:
    """Two nodes: the replica is SIGKILLed. Its connection closing is no proof it is gone (a node
    cut off from the head may be alive and promoted), so the head's next write is held until the
    client's verdict (``$lost``); then it is answered, and later writes at once."""
    workers, clients, _authority = two
    assert value(clients[0], "counter", "c", "increment", 1) == 1
    assert holder_of_copy(clients, (1,)) == 1
    workers[1].process.kill()
    workers[1].process.wait(timeout=20)
    pending = send_op(clients[0], "counter", "c", "increment", 1)
    # Held, not acknowledged alone: no answer while the loss is unconfirmed.
    with pytest.raises(TimeoutError):
        answer_of(clients[0], pending, timeout=2)
    assert value(clients[0], "$lost", 1) is None
    answer = answer_of(clients[0], pending)
    assert answer["ok"] is True and answer["value"] == 2, answer
    assert value(clients[0], "counter", "c", "increment", 1) == 3


def test_a_replica_that_comes_back_takes_everything_again(two: Any) -> None:
    """The replica's connection to the head drops but the node lives (a cut, then healed): it
    connects again on its own and takes the whole copy, and the held writes are answered then."""
    workers, clients, authority = two
    assert value(clients[0], "counter", "c", "increment", 1) == 1
    assert holder_of_copy(clients, (1,)) == 1
    # Told of the same holder at a new port and back: its link leaves the head and returns.
    clients[1].send({"t": "authority", **{**authority, "port": 1}})
    pending = send_op(clients[0], "counter", "c", "increment", 1)
    clients[1].send({"t": "authority", **authority})
    answer = answer_of(clients[0], pending, timeout=30)
    assert answer["ok"] is True and answer["value"] == 2, answer
    assert value(clients[1], "$replica")["seq"] >= 1


def test_a_stopped_replica_holds_the_heads_answers_until_the_client_says_it_is_lost(two: Any) -> None:
    """The replica's worker SIGSTOPped: its connection stays open and acks nothing, so the head's
    write waits; the client's verdict (``$lost``, from the pool's liveness deadline) lets the head
    drop that copy and answer alone. The node, resumed, is no longer the replica."""
    workers, clients, _authority = two
    assert value(clients[0], "counter", "c", "increment", 1) == 1
    assert holder_of_copy(clients, (1,)) == 1
    stop_process(workers[1].process.pid)
    try:
        pending = send_op(clients[0], "counter", "c", "increment", 1)
        with pytest.raises(TimeoutError):
            answer_of(clients[0], pending, timeout=2)
        assert value(clients[0], "$lost", 1) is None
        answer = answer_of(clients[0], pending)
        assert answer["ok"] is True and answer["value"] == 2, answer
    finally:
        workers[1].process.send_signal(signal.SIGCONT)
    assert value(clients[0], "counter", "c", "increment", 1) == 3
    # Its copy: what it had, and perhaps the frame sent before the verdict; nothing sent after it.
    assert value(clients[1], "$replica")["seq"] in (1, 2)


def test_a_new_head_holds_its_first_writes_until_another_node_has_the_copy() -> None:
    """A head whose pool has another node answers no write alone before that node has the copy:
    a head lost in the pool's first moments loses nothing acknowledged either."""
    for _workers, clients, authority in pool_of(2, {"SKYWARD_COLLECTIONS_COPY_WAIT": "600"}, announce=False):
        pending = send_op(clients[0], "counter", "c", "increment", 1)
        with pytest.raises(TimeoutError):
            answer_of(clients[0], pending, timeout=2)
        clients[1].send({"t": "authority", **authority})
        answer = answer_of(clients[0], pending)
        assert answer["ok"] is True and answer["value"] == 1, answer
        copy = value(clients[1], "$replica")
        assert copy is not None and copy["seq"] >= 1, copy


def test_a_new_head_answers_alone_once_no_node_came_for_the_copy_in_time() -> None:
    """No node connects for the copy (a peer network that does not let them): after the wait the
    head answers alone and says so in its log, rather than holding every write for ever; the
    client's verdict on the node ends the wait at once too."""
    for workers, clients, _authority in pool_of(2, {"SKYWARD_COLLECTIONS_COPY_WAIT": "1"}, announce=False):
        pending = send_op(clients[0], "counter", "c", "increment", 1)
        answer = answer_of(clients[0], pending)
        assert answer["ok"] is True and answer["value"] == 1, answer
        deadline = time.monotonic() + 20
        while not any("no other node connected to hold a copy" in line for line in workers[0].stderr_lines):
            assert time.monotonic() < deadline, workers[0].stderr_lines[-5:]
            time.sleep(0.05)
    for _workers, clients, _authority in pool_of(2, {"SKYWARD_COLLECTIONS_COPY_WAIT": "600"}, announce=False):
        pending = send_op(clients[0], "counter", "c", "increment", 1)
        with pytest.raises(TimeoutError):
            answer_of(clients[0], pending, timeout=1)
        assert value(clients[0], "$lost", 1) is None
        assert answer_of(clients[0], pending)["value"] == 1
