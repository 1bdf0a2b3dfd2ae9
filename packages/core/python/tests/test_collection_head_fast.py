"""The head's fast path for a counter's write, a free lock's acquire and a release nobody waits on,
by the only writer on an idle copy channel (``Replication._fast``, ``HeadChannel.take_idle`` /
``read_ack``): taken when it applies, and every other case answered by the general path with nothing
lost or answered twice. Real sockets: the
head and node 1's copy of test_collection_mailbox's pool."""

from __future__ import annotations

import concurrent.futures
import socket
import threading
import time
from typing import Any, List

import worker_client  # noqa: F401  (puts the runtime on sys.path)
from skyward import deferred_interrupts
from skyward.collection_channel import PeerThread, after_writes, writing_here
from skyward.collection_spin import MISSES, Spinner
from test_collection_mailbox import Pool, Stopped, pool  # noqa: F401  (the fixture)
from test_collection_turns import poll_until


def _channel(pool: Pool) -> Any:
    return pool.head._replica.__self__  # type: ignore[union-attr]


def _stopped_as_the_ack_is_taken(pool: Pool, request: List[Any], owner: str) -> None:
    """``request`` from a head task that is stopped as the head takes its write's ack."""
    pool.stop_acker.set()

    def task() -> Any:
        pool.stopping = threading.get_ident()
        try:
            return pool.on_head(request, owner=owner)
        finally:
            deferred_interrupts.forget(threading.get_ident())

    try:
        pool.threads.submit(task).result(60)
        raise AssertionError("the task was not stopped")
    except Stopped:
        pass


def test_a_lone_counter_write_on_the_head_takes_the_fast_path(pool: Pool) -> None:
    before = _channel(pool).fast_writes
    for step in range(1, 21):
        assert pool.on_head(["counter", "c", "increment", 1]) == ("value", step)
    assert _channel(pool).fast_writes - before == 20
    assert pool.copy_value("c") == ("value", 20)
    assert not pool.head._waiting


def _looks(spinner: Spinner) -> int:
    return spinner.caught + spinner.missed + spinner.paused


def test_the_fast_paths_ack_is_looked_for_before_the_head_blocks_for_it(pool: Pool) -> None:
    """Each ack read by the spin (a budget it surely comes within); then, from a copy slower than
    the spin (a far copy's 5 ms against 100 µs), each spin misses and the blocking read after it
    takes the ack, until a run of misses pauses the spin; every write answered once, in order."""
    channel = _channel(pool)
    channel.spinner = Spinner(50_000_000)
    before = channel.fast_writes
    for step in range(1, 11):
        assert pool.on_head(["counter", "spun", "increment", 1]) == ("value", step)
    assert (channel.spinner.caught, channel.spinner.missed, channel.spinner.paused) == (10, 0, 0)

    channel.spinner = Spinner(100_000)
    pool.copy_delay = 0.005
    for step in range(11, 21):
        assert pool.on_head(["counter", "spun", "increment", 1]) == ("value", step)
    assert (channel.spinner.caught, channel.spinner.missed, channel.spinner.paused) == (0, MISSES, 10 - MISSES)
    assert channel.fast_writes - before == 20
    assert pool.copy_value("spun") == ("value", 20)
    assert not pool.head._waiting


def test_concurrent_writers_on_the_head_are_linearizable(pool: Pool) -> None:
    threads, each = 6, 40

    def writer(_: int) -> List[Any]:
        return [pool.on_head(["counter", "n", "increment", 1]) for _ in range(each)]

    with concurrent.futures.ThreadPoolExecutor(threads) as executor:
        answers = [answer for chunk in executor.map(writer, range(threads)) for answer in chunk]
    values = sorted(value for kind, value in answers)
    assert all(kind == "value" for kind, _ in answers)
    assert values == list(range(1, threads * each + 1))  # each answer distinct, none lost
    assert pool.copy_value("n") == ("value", threads * each)
    assert not pool.head._waiting


def test_a_lock_cycle_with_a_waiter_stays_fifo_beside_fast_counter_writes(pool: Pool) -> None:
    assert pool.on_head(["lock", "l", "acquire", None], owner="0/a") == ("value", True)
    order: List[str] = []

    def waiter(owner: str) -> None:
        assert pool.on_head(["lock", "l", "acquire", None], owner=owner) == ("value", True)
        order.append(owner)
        pool.on_head(["counter", "c", "increment", 1], owner=owner)
        assert pool.on_head(["lock", "l", "release"], owner=owner) == ("value", None)

    first = threading.Thread(target=waiter, args=("0/b",))
    first.start()
    poll_until(lambda: len(pool.head.store.locks["l"].waiters) == 1, "b to wait")
    second = threading.Thread(target=waiter, args=("0/c",))
    second.start()
    poll_until(lambda: len(pool.head.store.locks["l"].waiters) == 2, "c to wait")
    assert pool.on_head(["lock", "l", "release"], owner="0/a") == ("value", None)
    first.join(60)
    second.join(60)
    assert order == ["0/b", "0/c"]
    assert pool.copy_value("c") == ("value", 2)


def test_a_head_task_stopped_mid_fast_write_has_it_answered_and_copied(pool: Pool) -> None:
    assert pool.on_head(["counter", "s", "increment", 1]) == ("value", 1)
    _stopped_as_the_ack_is_taken(pool, ["counter", "s", "increment", 1], "0/t")
    poll_until(lambda: not pool.head._waiting, "the head to take the ack of the stopped task's write")
    assert pool.copy_value("s") == ("value", 2)
    assert pool.on_head(["counter", "s", "increment", 1]) == ("value", 3)  # the channel's turn was let go


def test_a_copy_lost_mid_fast_write_leaves_it_unanswered_until_its_loss_is_confirmed(pool: Pool) -> None:
    assert pool.on_head(["counter", "k", "increment", 1]) == ("value", 1)
    pool.copy_stops.set()
    answers: List[Any] = []
    writer = threading.Thread(target=lambda: pool.head.apply_here(
        "0/t", ["counter", "k", "increment", 1], answers.append, ("direct", object())))
    writer.start()
    assert pool.copy_stopped.wait(60)
    poll_until(lambda: pool.head._replica is None, "the head to see the copy's connection end")
    writer.join(60)  # its thread returned with no ack to read
    assert not answers, "answered before the copy acked it or its loss was confirmed"
    pool.head.node_lost("1")
    poll_until(lambda: answers, "the write's answer once node 1's loss is confirmed")
    assert answers == [("value", 2)]


def test_a_superseded_instead_of_the_ack_refuses_the_fast_write_once(pool: Pool) -> None:
    pool.server.on_superseded = lambda message: pool.head.supersede(message["epoch"], "at the test's holder")
    assert pool.on_head(["counter", "v", "increment", 1]) == ("value", 1)
    channel = _channel(pool)
    before = channel.fast_writes
    pool.copy_answer = {"t": "superseded", "epoch": pool.head.epoch + 1}
    answers: List[Any] = []
    pool.head.apply_here("0/t", ["counter", "v", "increment", 1], answers.append, ("direct", object()))
    poll_until(lambda: answers, "the write's refusal")
    time.sleep(0.2)  # a second answer would come by now
    assert len(answers) == 1, answers
    kind, type_name, message = answers[0]
    assert (kind, type_name) == ("error", "RuntimeError") and "newer holder" in message
    assert channel.fast_writes == before  # read as a superseded, not as an ack
    assert pool.on_head(["counter", "v", "increment", 1])[0] == "error"  # refused from now on
    assert pool.copy_value("v") == ("value", 1)


def test_a_value_past_64_bits_goes_the_general_way_and_reaches_the_copy(pool: Pool) -> None:
    before = _channel(pool).fast_writes
    assert pool.on_head(["counter", "big", "reset", 1 << 63]) == ("value", 1 << 63)
    assert _channel(pool).fast_writes == before  # no compact frame carries it
    poll_until(lambda: not pool.head._waiting, "the copy's ack")
    assert pool.copy_value("big") == ("value", 1 << 63)
    assert pool.on_head(["counter", "big", "decrement", 1]) == ("value", (1 << 63) - 1)
    assert _channel(pool).fast_writes == before + 1  # back in range: the fast path again
    assert pool.copy_value("big") == ("value", (1 << 63) - 1)
    assert pool.on_head(["counter", "big", "increment", "x"])[0] == "error"  # refused: nothing changed
    assert pool.copy_value("big") == ("value", (1 << 63) - 1)


def _copy_holder(pool: Pool, name: str) -> Any:
    lock = pool.copy.locks.get(name)
    return None if lock is None else lock.holder


def test_a_lone_lock_cycle_on_the_head_takes_the_fast_path_and_reaches_the_copy(pool: Pool) -> None:
    channel = _channel(pool)
    before = channel.fast_writes
    assert pool.on_head(["lock", "f", "acquire", None], owner="0/a") == ("value", True)
    assert _copy_holder(pool, "f") == "0/a"  # acknowledged: the copy holds it
    assert pool.on_head(["lock", "f", "release"], owner="0/a") == ("value", None)
    assert _copy_holder(pool, "f") is None
    assert channel.fast_writes - before == 2
    assert not pool.head._waiting


def test_a_lock_that_is_held_or_not_ones_to_release_goes_the_general_way(pool: Pool) -> None:
    channel = _channel(pool)
    assert pool.on_head(["lock", "g", "acquire", None], owner="0/a") == ("value", True)
    before = channel.fast_writes
    assert pool.on_head(["lock", "g", "acquire", 0], owner="0/b") == ("value", False)  # held: not taken
    kind, type_name, message = pool.on_head(["lock", "g", "release"], owner="0/b")
    assert (kind, type_name) == ("error", "RuntimeError") and "held by another holder" in message
    assert channel.fast_writes == before
    assert _copy_holder(pool, "g") == "0/a"
    assert pool.on_head(["lock", "g", "release"], owner="0/a") == ("value", None)
    assert _copy_holder(pool, "g") is None


def test_concurrent_lock_cycles_on_the_head_exclude_each_other(pool: Pool) -> None:
    threads, each = 4, 25

    def cycles(index: int) -> None:
        owner = f"0/{index}"
        for _ in range(each):
            assert pool.on_head(["lock", "m", "acquire", None], owner=owner) == ("value", True)
            kind, value = pool.on_head(["counter", "x", "increment", 0], owner=owner)  # a read that writes
            assert pool.on_head(["counter", "x", "reset", value + 1], owner=owner) == ("value", value + 1)
            assert pool.on_head(["lock", "m", "release"], owner=owner) == ("value", None)

    with concurrent.futures.ThreadPoolExecutor(threads) as executor:
        list(executor.map(cycles, range(threads)))
    assert pool.head.store.counters["x"] == threads * each  # no two read-then-write inside at once
    poll_until(lambda: not pool.head._waiting, "the last acks")
    assert pool.copy_value("x") == ("value", threads * each)
    assert _copy_holder(pool, "m") is None


def test_a_task_stopped_mid_fast_acquire_holds_the_lock_until_its_end_is_copied(pool: Pool) -> None:
    assert pool.on_head(["lock", "s", "acquire", None], owner="0/t") == ("value", True)
    assert pool.on_head(["lock", "s", "release"], owner="0/t") == ("value", None)
    _stopped_as_the_ack_is_taken(pool, ["lock", "s", "acquire", None], "0/t")
    poll_until(lambda: not pool.head._waiting, "the head to take the ack of the stopped task's acquire")
    assert _copy_holder(pool, "s") == "0/t"  # taken, and on the copy: the task's end releases it
    ended: List[Any] = []
    pool.head.owner_ended("0/t", lambda: ended.append(True))
    poll_until(lambda: ended, "the stopped task's end to reach the copy")
    assert _copy_holder(pool, "s") is None
    assert pool.on_head(["lock", "s", "acquire", None], owner="0/u") == ("value", True)


def test_node_1s_writes_answered_by_its_copy_take_the_fast_path(pool: Pool) -> None:
    channel = _channel(pool)
    before = channel.fast_writes

    def on_node_1(request: List[Any]) -> Any:
        answer = pool.on_node_1(request).result(60)
        # The copy gives the answer before its ack reaches the head: the next write finds the channel
        # idle (and takes the fast path) only once the head took that ack.
        poll_until(lambda: not pool.head._waiting, "the head to take the copy's ack")
        return answer

    for expected in range(1, 4):
        assert on_node_1(["counter", "n1", "increment", 1]) == ("value", expected)
    assert on_node_1(["lock", "l1", "acquire", None]) == ("value", True)
    assert on_node_1(["lock", "l1", "release"]) == ("value", None)
    assert channel.fast_writes - before == 5
    # node 1's thread looked for each answer before blocking for it (collection_spin.py)
    assert sum(_looks(connection.spinner) for connection in list(pool.caller._connections)) >= 5
    # Each answer went with the copy's frame, and the copy gave it (none by the head, none twice).
    assert (pool.head.forwarded, pool.mailbox.delivered) == (5, 5)
    assert pool.copy_value("n1") == ("value", 3)
    assert _copy_holder(pool, "l1") is None
    assert not pool.head._waiting


def test_a_write_for_another_mailbox_is_answered_by_the_head_the_general_way(pool: Pool) -> None:
    channel = _channel(pool)
    before, forwarded = channel.fast_writes, pool.head.forwarded
    answers: List[Any] = []
    pool.head.apply_here("2/t", ["counter", "o", "increment", 4], answers.append, ("direct", object()),
                         forward=("another process's mailbox", 17))
    poll_until(lambda: answers, "the head's answer")
    assert answers == [("value", 4)]
    assert (channel.fast_writes, pool.head.forwarded, pool.mailbox.delivered) == (before, forwarded, 0)
    assert pool.copy_value("o") == ("value", 4)


def test_the_threads_serving_requests_look_for_the_next_before_blocking(pool: Pool) -> None:
    """The copy's reader (a writer on the head in a loop: its next frame comes within the spin) and
    the head's thread serving node 1's connection look for the next message before they block."""
    end = pool.mailbox.copy_end
    end.spinner = Spinner(200_000_000)
    for step in range(1, 11):
        assert pool.on_head(["counter", "served", "increment", 1]) == ("value", step)
    # Each frame after the first came while the copy's thread looked for it (a head write waits
    # for its ack, then the next goes at once).
    assert end.spinner.caught >= 9
    assert pool.copy_value("served") == ("value", 10)

    for step in range(1, 4):
        assert pool.on_node_1(["counter", "served1", "increment", 1]).result(60) == ("value", step)
    assert sum(_looks(direct.request_spinner) for direct in list(pool.server._direct)) >= 3


def test_a_waiter_woken_by_another_threads_write_is_woken_after_that_threads_frames_left() -> None:
    """``after_writes``: inside a ``writing_here`` block a callback waits until the frames the
    thread owes are written (a remote caller's answer leaves before a local waiter is woken);
    outside one it runs at once."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        theirs = socket.create_connection(listener.getsockname())
        ours, _ = listener.accept()
    try:
        peer = PeerThread(ours, "test connection", lambda line: None)
        seen: List[bytes] = []

        def look() -> None:
            try:
                seen.append(theirs.recv(65536, socket.MSG_DONTWAIT))
            except BlockingIOError:
                seen.append(b"")

        with writing_here():
            peer.send_message({"t": "answer", "id": 1, "value": None})
            after_writes(look)
            assert seen == []  # not yet: the frame is still owed
        assert len(seen) == 1 and seen[0] != b""  # the frame was there when the callback ran
        after_writes(look)  # no block: at once
        assert seen[1] == b""
    finally:
        ours.close()
        theirs.close()
