"""Whose thread writes a copy frame and reads its ack (``collection_channel.HeadChannel``,
``Replication.apply_here``), on real loopback TCP with a node holding the copy in a thread: two
task threads writing at once take turns reading the acks, every write is answered once the copy
holds it, in the order the frames were numbered; a copy that stops reading ends the channel at the
send's deadline, and what it never acknowledged stays unanswered until the client's verdict that
its node is lost (then answered by the head alone), waking the thread waiting on the socket."""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, List

import pytest
import worker_client  # noqa: F401  (puts the runtime on sys.path)
from worker_client import stop_process
from skyward import collection_channel, collection_frames
from skyward.collection_channel import send_all
from skyward.collection_copy_head import HeadChannel
from skyward.collection_delta import load
from skyward.collection_replica import Replication
from skyward.collection_store import CollectionStore
from skyward.protocol import pack_frame, to_wire


def hold_copy_in_process(port: int) -> None:
    """Node "1" as a process of its own (it can be stopped): answers each frame with its ack."""
    sock = socket.create_connection(("127.0.0.1", port))
    decoder = collection_frames.decoder()  # the head's frames may be compact
    while data := sock.recv(256 * 1024):
        for messages in decoder.feed(data):
            for message in messages:
                send_all(sock, pack_frame([to_wire({"t": "acked", "seq": message["seq"]}, "message")]))


class Bed:
    """A head (its store, its copy channel) and node "1" holding the copy: on a thread of its own,
    or in a process of its own (``in_process=False``: a process that can be stopped)."""

    def __init__(self, in_process: bool = True) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.head = Replication(CollectionStore(self.loop), self.loop)
        self.copy = CollectionStore(self.loop)
        #: the seq of every ``replicate`` frame the copy took, in the order it took them
        self.seqs: List[int] = []
        #: the names of the threads that read each ack at the head
        self.readers: List[str] = []
        self.logs: List[str] = []
        #: node "1" (on a thread) answers ``superseded`` from now on: it knows a newer holder
        self.refuse = False
        self.on_superseded: Callable[[Dict[str, Any]], None] = lambda message: None
        listener = socket.create_server(("127.0.0.1", 0))
        self.process: Any = None
        if in_process:
            self.node_end = socket.create_connection(listener.getsockname())
        else:
            self.process = multiprocessing.get_context("spawn").Process(
                target=hold_copy_in_process, args=(listener.getsockname()[1],), daemon=True)
            self.process.start()
        accepted, _ = listener.accept()
        listener.close()
        self.channel = HeadChannel(accepted, self._acked, self.head.gone, lambda message: self.on_superseded(message),
                                   self.logs.append)
        self.channel.start(b"")
        if in_process:
            threading.Thread(target=self._hold_copy, daemon=True).start()
        self.head.offer(self.channel.send, "1")
        poll_until(lambda: self.readers, "the copy to take the first (full) frame")

    def _acked(self, send: Any, seq: Any) -> None:
        self.readers.append(threading.current_thread().name)
        self.head.acked(send, seq)

    def _hold_copy(self) -> None:
        decoder = collection_frames.decoder()  # the head's frames may be compact
        try:
            while True:
                data = self.node_end.recv(256 * 1024)
                if not data:
                    return
                for messages in decoder.feed(data):
                    for message in messages:
                        for state in message.get("states") or []:
                            load(self.copy, state)
                        answer = {"t": "superseded", "epoch": 1} if self.refuse else {"t": "acked", "seq": message["seq"]}
                        if not self.refuse:
                            self.seqs.append(message["seq"])
                        send_all(self.node_end, pack_frame([to_wire(answer, "message")]))
        except OSError:
            pass

    def write(self, request: List[Any]) -> "concurrent.futures.Future[Any]":
        """``request`` applied on this thread, as a task thread on the head applies it."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.head.apply_here("0/task", request, future.set_result, ("direct", id(future)))
        return future

    def stop_copy(self) -> None:
        """The copy's process stops (SIGSTOP): it reads and answers nothing more, its socket stays open."""
        stop_process(self.process.pid)

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join(30)
        else:
            self.node_end.close()
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture()
def bed() -> Iterator[Bed]:
    each = Bed()
    try:
        yield each
    finally:
        each.close()


@pytest.fixture()
def stoppable() -> Iterator[Bed]:
    each = Bed(in_process=False)
    try:
        yield each
    finally:
        each.close()


def poll_until(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.01)


def writer_in_thread(bed: Bed, request: List[Any]) -> "concurrent.futures.Future[Any]":
    """``request`` written from a thread of its own (it waits there for the ack); its answer."""
    outcome: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def run() -> None:
        bed.write(request).add_done_callback(lambda done: outcome.set_result(done.result()))

    threading.Thread(target=run, name="writer", daemon=True).start()
    return outcome


def test_two_threads_writing_at_once_take_turns_reading_the_acks_in_order(bed: Bed) -> None:
    per_thread = 300
    answers: Dict[str, List[Any]] = {}

    def increments(name: str) -> None:
        answers[name] = [bed.write(["counter", "c", "increment", 1]).result(timeout=60) for _ in range(per_thread)]

    threads = [threading.Thread(target=increments, args=(f"writer-{index}",), name=f"writer-{index}")
               for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(answer[1] for each in answers.values() for answer in each) == list(range(1, 2 * per_thread + 1))
    # Every answer was held until the copy had the write: the copy holds all of them.
    assert bed.copy.counters["c"] == 2 * per_thread
    # The frames went out in the order they were numbered, none lost or repeated.
    assert bed.seqs == list(range(1, len(bed.seqs) + 1))
    # The writing threads read acks themselves (the channel's own thread may have read some).
    assert {name for name in bed.readers} <= {"writer-0", "writer-1", "skyward-collections-copy-channel"}
    assert any(name.startswith("writer-") for name in bed.readers)


def test_a_thread_waiting_on_the_socket_is_woken_by_the_verdict_that_the_copys_node_is_lost(stoppable: Bed) -> None:
    bed = stoppable
    bed.stop_copy()
    answer = writer_in_thread(bed, ["counter", "c", "increment", 5])
    poll_until(lambda: bed.channel._reader is not None and bed.channel._reader.name == "writer",
               "the writer to wait for its ack on the socket")
    assert not answer.done()  # not acknowledged: the copy does not hold it
    bed.head.node_lost("1")  # the client's verdict: now the head answers alone
    assert answer.result(timeout=60) == ("value", 5)


def test_a_copy_that_stops_reading_ends_the_channel_at_the_deadline_and_its_writes_wait_for_the_verdict(
        stoppable: Bed, monkeypatch: pytest.MonkeyPatch) -> None:
    bed = stoppable
    monkeypatch.setattr(collection_channel, "SEND_TIMEOUT", 1.0)
    monkeypatch.setattr(collection_channel, "_SEND_SLOW_BYTES", 1 << 40)
    bed.stop_copy()
    # Far more than both ends' socket buffers: the writer's own write leaves the rest to the sender thread.
    answer = writer_in_thread(bed, ["dict", "d", "set", "k", bytes(64 * 1024 * 1024)])
    poll_until(lambda: any("TimeoutError" in line for line in bed.logs), "the send's deadline")
    poll_until(lambda: bed.head._replica is None, "the channel to end")
    # The copy may be alive (stopped, not dead): nothing it did not acknowledge is answered yet.
    assert not answer.done()
    bed.head.node_lost("1")
    assert answer.result(timeout=60) == ("value", None)


def test_a_superseded_answer_read_by_a_task_thread_is_handled_on_another(bed: Bed) -> None:
    """Following a newer holder may say farewell to an old one (up to 30 s): never on the thread of
    a task that happened to read the node's answer, which gets its refusal meanwhile."""
    farewell_may_end = threading.Event()
    handled_on: List[str] = []

    def superseded(message: Dict[str, Any]) -> None:
        handled_on.append(threading.current_thread().name)
        bed.head.supersede(message["epoch"], "serves them elsewhere")
        farewell_may_end.wait(60)

    bed.on_superseded = superseded
    bed.refuse = True
    try:
        answer = writer_in_thread(bed, ["counter", "c", "increment", 1]).result(timeout=60)
    finally:
        farewell_may_end.set()
    assert answer[0] == "error" and "the collections moved" in answer[2], answer
    assert handled_on and handled_on[0] != "writer", handled_on
