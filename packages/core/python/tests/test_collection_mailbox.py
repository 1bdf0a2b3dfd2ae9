"""A write from the node holding the copy is answered by that copy (``collection_mailbox``): on real
loopback TCP, a head (``Replication`` behind its ``AuthorityServer``) and node "1" in this process —
its copy channel (``CopyChannel``) and a task thread's own connection (``DirectCaller``) naming one
``Mailbox``. The answers come with the copy's frames, once the copy took them; a lock granted later
is answered once; a head that stops right after the frame left has its write answered by the copy,
which holds it; a copy whose node is lost mid-write leaves the answer to the head, given on the
task's connection at the client's verdict."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import worker_client  # noqa: F401  (puts the runtime on sys.path)
from skyward import deferred_interrupts
from skyward.collection_channel import CopyChannel
from skyward.collection_delta import load
from skyward.collection_direct import DirectCaller
from skyward.collection_link import AuthorityServer
from skyward.collection_mailbox import Mailbox
from skyward.collection_replica import Replication
from skyward.collection_store import CollectionStore
from test_collection_turns import poll_until

TOKEN = b"t" * 32


class Stopped(BaseException):
    """A task's interrupt (as the thread executor's ``TaskInterrupted``)."""


class Pool:
    """The head and node "1" (holding the copy, with a task thread's connection)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.logs: List[str] = []
        self.head = Replication(CollectionStore(self.loop), self.loop)
        #: the acks the head read (``head_reads_acks`` False: it reads none, as a head stopped
        #: right after its frame left)
        self.acks: List[Any] = []
        self.head_reads_acks = True
        acked = self.head.acked
        #: set: the task thread ``stopping`` is sent an interrupt as the head takes the next ack
        self.stop_acker = threading.Event()

        def head_acked(send: Any, seq: Any) -> None:
            self.acks.append(seq)
            if self.stop_acker.is_set():  # the task is stopped (its thread may be the one reading)
                self.stop_acker.clear()
                deferred_interrupts.send(self.stopping, Stopped)
            if self.head_reads_acks:
                acked(send, seq)

        self.head.acked = head_acked  # type: ignore[method-assign]
        self.server = AuthorityServer(self.head, TOKEN, lambda: "job", self.logs.append)

        async def listen() -> Tuple[str, int]:
            return self.server.listen("127.0.0.1")

        self.address = asyncio.run_coroutine_threadsafe(listen(), self.loop).result(30)
        self.copy = CollectionStore(self.loop)
        #: set: the task thread ``stopping`` is sent an interrupt as the copy takes the next frame
        self.stop_taker = threading.Event()
        self.stopping = 0
        #: the thread that took each of the copy's frames
        self.taken_on: List[int] = []
        #: set: node 1's copy takes no frame (it waits here, as a node stopped mid-write)
        self.copy_stops = threading.Event()
        self.copy_stopped = threading.Event()
        self.copy_resumes = threading.Event()
        #: set: the copy answers the next frame with this instead of taking it (a node that follows a
        #: newer holder says ``superseded``)
        self.copy_answer: Dict[str, Any] | None = None
        #: seconds the copy takes over each frame before it answers (a far copy's)
        self.copy_delay = 0.0
        self.mailbox = Mailbox()
        self.copy_channel = CopyChannel(TOKEN, lambda: "job", lambda: 1, self._replicated, self.logs.append,
                                        self.mailbox)
        self.copy_channel.open(self.address[0], self.address[1], 30)
        poll_until(lambda: self.mailbox.copy_address == self.address and self.acks, "node 1 to hold the copy")
        self.caller = DirectCaller(TOKEN, lambda: "job", lambda: 1, 30, self.mailbox)
        self.threads = concurrent.futures.ThreadPoolExecutor(4)

    def _replicated(self, message: Dict[str, Any]) -> Dict[str, Any]:
        self.taken_on.append(threading.get_ident())
        if self.stop_taker.is_set():
            # The task is stopped (a cancel) as the frame is taken (its thread may be the one taking it).
            self.stop_taker.clear()
            deferred_interrupts.send(self.stopping, Stopped)
        if self.copy_stops.is_set():
            # Its node is lost as the frame comes: the connection ends before the copy takes it
            # (the thread taking it may be the writing task's own, which must not wait here).
            self.copy_channel.close()
            self.copy_stopped.set()
            return {"t": "superseded", "epoch": 9}  # not sent: the connection is shut
        if self.copy_answer is not None:
            answer, self.copy_answer = self.copy_answer, None
            return answer
        if self.copy_delay:
            time.sleep(self.copy_delay)
        for state in message.get("states") or []:
            load(self.copy, state)
        return {"t": "acked", "seq": message["seq"]}

    def on_node_1(self, request: List[Any], owner: str = "1/t") -> "concurrent.futures.Future[Any]":
        """``request`` from a task thread of node 1 (in wire form), on a thread of the pool's."""
        return self.threads.submit(self.caller.call, self.address, owner, request)

    def on_node_1_taken_on(self, request: List[Any]) -> Tuple[Any, int, List[int]]:
        """``request`` from a task thread of node 1: its answer, that thread, and the threads that
        took the copy's frames meanwhile."""
        def call() -> Tuple[Any, int, List[int]]:
            before = len(self.taken_on)
            answer = self.caller.call(self.address, "1/t", request)
            return answer, threading.get_ident(), self.taken_on[before:]
        return self.threads.submit(call).result(60)

    def on_head(self, request: List[Any], owner: str = "0/t") -> Any:
        """``request`` from a task thread of the head, as it applies it."""
        answers: List[Any] = []
        self.head.apply_here(owner, request, answers.append, ("direct", object()))
        poll_until(lambda: answers, f"the head's {request}")
        return answers[0]

    def copy_value(self, name: str) -> Any:
        answers: List[Any] = []
        self.copy.apply("check", ["counter", name, "value"], answers.append, 1)
        return answers[0]

    def close(self) -> None:
        self.copy_resumes.set()
        self.copy_channel.close()

        async def close_server() -> None:
            # On the loop's thread: asyncio's Server is not thread-safe (closed from here, it raced
            # the loop's own close of the connection the copy channel just shut, and raised
            # "'NoneType' object is not iterable" as both woke its waiters).
            self.server.close()

        asyncio.run_coroutine_threadsafe(close_server(), self.loop).result(30)
        self.threads.shutdown(wait=False)
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture()
def pool() -> Iterator[Pool]:
    each = Pool()
    try:
        yield each
    finally:
        each.close()


def test_a_write_from_the_copys_node_is_answered_by_the_copy(pool: Pool) -> None:
    for expected in range(1, 6):
        assert pool.on_node_1(["counter", "steps", "increment", 1]).result(60) == ("value", expected)
    assert pool.on_node_1(["lock", "l", "acquire", None]).result(60) == ("value", True)
    assert pool.on_node_1(["lock", "l", "release"]).result(60) == ("value", None)
    # Every one came with the copy's frame; the copy holds them all.
    assert (pool.head.forwarded, pool.mailbox.delivered) == (7, 7)
    assert pool.copy_value("steps") == ("value", 5)
    # Their compact frames were read on the copy's fast path (collection_frames.take_replicate).
    assert pool.mailbox.copy_end.fast_frames > 0
    # A read is not copied: the head answers it.
    assert pool.on_node_1(["counter", "steps", "value"]).result(60) == ("value", 5)
    assert pool.mailbox.delivered == 7


def test_the_writing_task_thread_takes_the_copys_frame_itself(pool: Pool) -> None:
    # The frame carrying a node-1 write and its answer wakes the task's thread alone: it takes the
    # frame (acks it), and finds its answer in it — no hand-off from the copy channel's thread.
    for expected in range(1, 4):
        answer, task_thread, taken_on = pool.on_node_1_taken_on(["counter", "steps", "increment", 1])
        assert answer == ("value", expected)
        assert taken_on == [task_thread]
    answer, task_thread, taken_on = pool.on_node_1_taken_on(["lock", "l", "acquire", None])
    assert (answer, taken_on) == (("value", True), [task_thread])
    assert pool.mailbox.delivered == 4
    # A frame nobody on node 1 waits for (a head task's write) is taken by the channel's own thread,
    # once the task's thread let go: the head's write is answered, and the copy holds it.
    before = len(pool.taken_on)
    assert pool.on_head(["counter", "steps", "increment", 10]) == ("value", 13)
    assert pool.taken_on[before:] and task_thread not in pool.taken_on[before:]
    assert pool.copy_value("steps") == ("value", 13)


def test_a_task_stopped_as_its_thread_takes_the_copys_frame_stops_after_taking_it(pool: Pool) -> None:
    # The interrupt of a stopped task waits until its thread has taken the frame it read: the copy
    # holds the write and acks it (half a frame would be half a write in the copy, and the frames
    # after it would go unread), then the task stops.
    assert pool.on_node_1(["counter", "steps", "increment", 1]).result(60) == ("value", 1)
    pool.stop_taker.set()

    def task() -> Any:
        pool.stopping = threading.get_ident()
        try:
            return pool.caller.call(pool.address, "1/t", ["counter", "steps", "increment", 1])
        finally:  # its turn is over (as the thread executor's _close_turn says)
            deferred_interrupts.forget(threading.get_ident())

    stopped = pool.threads.submit(task)
    with pytest.raises(Stopped):
        stopped.result(60)
    poll_until(lambda: not pool.head._waiting, "the copy's ack of the stopped task's write")
    assert pool.copy_value("steps") == ("value", 2)
    # The channel goes on: the next writes, from node 1 and from the head, are taken and answered.
    assert pool.on_node_1(["counter", "steps", "increment", 1]).result(60) == ("value", 3)
    assert pool.on_head(["counter", "steps", "increment", 1]) == ("value", 4)
    assert pool.copy_value("steps") == ("value", 4)


def test_a_head_task_stopped_as_its_thread_reads_the_copys_ack_stops_after_taking_it(pool: Pool) -> None:
    # A task thread on the head reads the copy's acks while it waits for its own (HeadChannel's
    # wait_acks): its task's interrupt waits until the ack it read is taken, so the writes it acks
    # are answered (none left waiting for an ack already read).
    pool.stop_acker.set()

    def task() -> Any:
        pool.stopping = threading.get_ident()
        try:
            return pool.on_head(["counter", "steps", "increment", 1])
        finally:  # its turn is over (as the thread executor's _close_turn says)
            deferred_interrupts.forget(threading.get_ident())

    with pytest.raises(Stopped):
        pool.threads.submit(task).result(60)
    poll_until(lambda: not pool.head._waiting, "the head to take the copy's ack of the stopped task's write")
    assert pool.copy_value("steps") == ("value", 1)
    assert pool.on_head(["counter", "steps", "increment", 1]) == ("value", 2)


def test_a_lock_granted_later_is_answered_once_by_the_copy(pool: Pool) -> None:
    assert pool.on_head(["lock", "l", "acquire", None]) == ("value", True)
    waiting = pool.on_node_1(["lock", "l", "acquire", None])
    poll_until(lambda: bool(pool.head.store.locks["l"].waiters), "node 1's acquire to wait at the head")
    assert not waiting.done()
    assert pool.on_head(["lock", "l", "release"]) == ("value", None)
    assert waiting.result(60) == ("value", True)
    assert pool.mailbox.delivered == 1
    # The thread's next operations are answered with their own answers (none twice, none lost).
    assert pool.on_node_1(["lock", "l", "release"]).result(60) == ("value", None)
    assert pool.on_node_1(["counter", "c", "increment", 3]).result(60) == ("value", 3)
    assert pool.mailbox.delivered == 3


def test_a_head_stopped_after_the_frame_left_has_its_write_answered_by_the_copy(pool: Pool) -> None:
    pool.head_reads_acks = False
    acks = len(pool.acks)
    assert pool.on_node_1(["counter", "steps", "increment", 2]).result(60) == ("value", 2)
    # The head took no ack for it (it would hold the answer still): the copy answered, and holds
    # the write — what a promotion of that copy would serve.
    poll_until(lambda: len(pool.acks) == acks + 1, "the copy's ack to reach the head")
    assert pool.head._waiting, "the head still waits for the ack it never read"
    assert pool.copy_value("steps") == ("value", 2)
    assert pool.mailbox.delivered == 1


def test_a_copy_lost_mid_write_leaves_the_answer_to_the_head(pool: Pool) -> None:
    pool.copy_stops.set()
    writing = pool.on_node_1(["counter", "steps", "increment", 1])
    assert pool.copy_stopped.wait(60)
    pool.copy_channel.close()  # its node is lost: its connection ends
    poll_until(lambda: pool.head._replica is None, "the head to see the copy's connection end")
    # No other node holds a copy: the answer waits for the client's verdict on node 1.
    assert not writing.done()
    pool.head.node_lost("1")
    assert writing.result(60) == ("value", 1)
    assert pool.mailbox.delivered == 0
    assert pool.head.forwarded == 1
