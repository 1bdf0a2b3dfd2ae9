"""The copy's fast path (``collection_frames.take_replicate``, ``collection_copy_node.NodeEnd``): a
whole compact ``replicate`` frame is read with precompiled layouts and gives the very message the
general decoder gives; anything else (another frame, a partial one, a value the fast path does not
read, a malformed one) goes to the general decoder, so a stream mixing them is taken in order
however it is cut into reads, and what is malformed still ends the connection."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any, Dict, List

import pytest

import worker_client  # noqa: F401  (puts the runtime on sys.path)
from skyward import collection_frames
from skyward.collection_copy_node import NodeEnd
from skyward.protocol import ProtocolError, pack_frame, to_wire

REPLICATES: List[Dict[str, Any]] = [
    {"t": "replicate", "epoch": 3, "seq": 11, "full": False, "states": [
        {"kind": "counter", "name": "c", "value": -4},
        {"kind": "lock", "name": "ĺock", "holder": None},
        {"kind": "lock", "name": "m", "holder": "0/task-1"},
    ]},
    {"t": "replicate", "epoch": 0, "seq": 1, "full": False, "states": []},
    {"t": "replicate", "epoch": 1, "seq": 12, "full": False, "states": [{"kind": "counter", "name": "c", "value": 5}],
     "answers": [{"t": "answer", "id": 9, "value": 5}, {"t": "answer", "id": 10, "value": None},
                 {"t": "answer", "id": 11, "value": True}, {"t": "answer", "id": 12, "value": False}]},
]

#: compact frames the fast path leaves to the general decoder (a value it does not read)
GENERAL_COMPACT: List[Dict[str, Any]] = [
    {"t": "replicate", "epoch": 1, "seq": 13, "full": False, "states": [],
     "answers": [{"t": "answer", "id": 9, "value": 2.5}]},
    {"t": "replicate", "epoch": 1, "seq": 14, "full": False, "states": [{"kind": "lock", "name": "l", "holder": None}],
     "answers": [{"t": "answer", "id": 9, "value": "naïve"}]},
    {"t": "acked", "seq": 7},
]

JSON: List[Dict[str, Any]] = [
    {"t": "replicate", "epoch": 0, "seq": 1, "full": True, "states": [{"kind": "counter", "name": "c", "value": 1}]},
    {"t": "replicate", "epoch": 0, "seq": 2, "full": False,
     "states": [{"kind": "set", "name": "s", "delta": True, "removed": [], "values": [1]}]},
    {"t": "superseded", "epoch": 2, "addr": "10.0.0.1", "port": 4000},
]


def framed(message: Dict[str, Any]) -> bytes:
    return collection_frames.pack(message)


@pytest.mark.parametrize("message", REPLICATES, ids=range(len(REPLICATES)))
def test_a_compact_replicate_frame_is_taken_as_the_general_decoder_takes_it(message: Dict[str, Any]) -> None:
    data = bytearray(b"junk" + framed(message) + framed({"t": "acked", "seq": 1}))
    stop = 4 + len(framed(message))
    assert collection_frames.take_replicate(data, 4, len(data)) == (message, stop)
    assert collection_frames.decoder().feed(framed(message)) == [[message]]


@pytest.mark.parametrize("message", GENERAL_COMPACT + JSON, ids=lambda message: str(message["t"]))
def test_what_the_fast_path_does_not_read_is_left_to_the_general_decoder(message: Dict[str, Any]) -> None:
    data = bytearray(framed(message))
    assert collection_frames.take_replicate(data, 0, len(data)) is None


def test_a_partial_replicate_frame_is_left_to_the_general_decoder() -> None:
    data = bytearray(framed(REPLICATES[0]))
    for end in range(len(data)):
        assert collection_frames.take_replicate(data, 0, end) is None
    assert collection_frames.take_replicate(data, 0, len(data)) is not None


def _replicate(body: bytes) -> bytes:
    return struct.pack(">II", 0xFF010100, len(body)) + body


@pytest.mark.parametrize("data", [
    _replicate(struct.pack(">qqH", 0, 1, 2) + b"\x00\x00\x01c" + b"\x00" * 8),  # 1 state of 2
    _replicate(struct.pack(">qqH", 0, 1, 1) + b"\x07\x00\x01c"),  # an unknown kind
    _replicate(struct.pack(">qqH", 0, 1, 1) + b"\x00\x00\x02\xff\xfe" + b"\x00" * 8),  # a name not UTF-8
    _replicate(struct.pack(">qqH", 0, 1, 1) + b"\x00\x00\x09c" + b"\x00" * 8),  # a name past the frame
    _replicate(struct.pack(">qqH", 0, 1, 0) + b"\x00\x01" + struct.pack(">qB", 1, 9)),  # an unknown value tag
    _replicate(struct.pack(">qqH", 0, 1, 0) + b"\x00\x02" + struct.pack(">qB", 1, 0)),  # 1 answer of 2
    _replicate(struct.pack(">qqH", 0, 1, 0) + b"\x00\x00\x00"),  # more than the layout
], ids=["states", "kind", "utf8", "name", "tag", "answers", "long"])
def test_a_malformed_replicate_frame_is_refused_by_the_general_decoder(data: bytes) -> None:
    buffer = bytearray(data + framed(REPLICATES[1]))  # what follows must not be read as part of it
    assert collection_frames.take_replicate(buffer, 0, len(buffer)) is None
    with pytest.raises(ProtocolError):
        collection_frames.decoder().feed(data)


def test_the_ack_is_the_compact_frame_pack_makes() -> None:
    for seq in (0, 1, 2**53 - 1, 2**63 - 1, -(2**63)):
        assert collection_frames.acked(seq) == collection_frames.pack({"t": "acked", "seq": seq})
        assert collection_frames.decoder().feed(collection_frames.acked(seq)) == [[{"t": "acked", "seq": seq}]]
    assert collection_frames.pack({"t": "acked", "seq": 2**63}) == pack_frame([to_wire({"t": "acked", "seq": 2**63},
                                                                                      "message")])


class Copy:
    """A node's end of the copy channel on one end of a socket pair, read as a task thread reads it
    (``read_some`` after each write of the other end): what it took, in order."""

    def __init__(self) -> None:
        self.head, mine = socket.socketpair()
        self.taken: List[Dict[str, Any]] = []
        self.end = NodeEnd(mine, self.taken.append)

    def send(self, data: bytes) -> bool:
        self.head.sendall(data)
        return self.end.read_some()

    def close(self) -> None:
        self.head.close()
        self.end.sock.close()


STREAM = REPLICATES + JSON + REPLICATES + GENERAL_COMPACT + REPLICATES + JSON + REPLICATES


@pytest.mark.parametrize("size", [1, 3, 8, 29, 64, 1000, 1 << 20])
def test_a_stream_mixing_compact_and_general_frames_is_taken_in_order_however_it_is_read(size: int) -> None:
    copy = Copy()
    try:
        stream = b"".join(framed(message) for message in STREAM)
        for at in range(0, len(stream), size):
            assert copy.send(stream[at:at + size])
        assert copy.taken == STREAM
        if size >= 1000:  # whole frames reach the fast path
            assert copy.end.fast_frames > 0
        if size >= len(stream):  # one read: every replicate frame before the first other one is fast
            assert copy.end.fast_frames == len(REPLICATES)
    finally:
        copy.close()


def test_a_frame_larger_than_a_fast_read_continues_in_the_general_decoder() -> None:
    copy = Copy()
    try:
        large = {"t": "replicate", "epoch": 0, "seq": 1, "full": True,
                 "states": [{"kind": "dict", "name": "d", "entries": [["k", "x" * 300_000]]}]}
        data = framed(large) + framed(REPLICATES[0])
        sender = threading.Thread(target=copy.head.sendall, args=(data,))
        sender.start()
        while len(copy.taken) < 2:
            assert copy.end.read_some()
        sender.join()
        assert copy.taken == [large, REPLICATES[0]]
    finally:
        copy.close()


def test_a_malformed_frame_on_the_fast_path_ends_the_connection_after_the_frames_before_it() -> None:
    copy = Copy()
    try:
        bad = _replicate(struct.pack(">qqH", 0, 1, 1) + b"\x07\x00\x01c")
        assert not copy.send(framed(REPLICATES[0]) + bad + framed(REPLICATES[1]))
        assert copy.taken == [REPLICATES[0]]  # nothing after the malformed frame is taken
    finally:
        copy.close()


def test_the_head_lost_mid_frame_takes_the_frames_before_it_and_not_the_half() -> None:
    copy = Copy()
    try:
        whole, half = framed(REPLICATES[0]), framed(REPLICATES[2])
        assert copy.send(whole + half[:len(half) // 2])
        copy.head.close()  # the head's node goes with half a frame sent
        assert not copy.end.read_some()
        assert copy.taken == [REPLICATES[0]]
    finally:
        copy.end.sock.close()


def test_the_channel_thread_takes_the_frames_on_the_fast_path_and_acks_each_after_it() -> None:
    """The channel's own thread (``run``) reading as a node holding the copy does: each frame is
    applied, then acked (the ack after the apply), in order."""
    head, mine = socket.socketpair()
    applied: List[int] = []

    def each(message: Dict[str, Any]) -> None:
        applied.append(message["seq"])
        mine.sendall(collection_frames.pack({"t": "acked", "seq": message["seq"]}))

    end = NodeEnd(mine, each)
    thread = threading.Thread(target=end.run)
    thread.start()
    try:
        decoder = collection_frames.decoder()
        for seq in range(1, 51):
            head.sendall(framed({**REPLICATES[0], "seq": seq}))
            acks: List[Dict[str, Any]] = []
            while not acks:
                for frame in decoder.feed(head.recv(64)):
                    acks.extend(frame)
            assert acks == [{"t": "acked", "seq": seq}]
            assert applied[-1] == seq
        assert applied == list(range(1, 51))
        assert end.fast_frames == 50
    finally:
        head.close()
        thread.join(10)
        mine.close()
    assert not thread.is_alive()


@pytest.mark.parametrize("size", [1, 5, 16, 23, 1000])
def test_the_heads_channel_takes_acks_and_other_frames_in_order_however_they_are_read(size: int) -> None:
    """The head's end (``HeadChannel``, the general decoder: a fast path for the acks was measured
    and did not pay, docs/benchmarks.md) reading as a writing task's thread does: every ack and
    ``superseded`` is handled in the order sent, however the node's stream is cut into reads, and a
    malformed frame ends the connection."""
    from skyward.collection_copy_head import HeadChannel

    listener = socket.create_server(("127.0.0.1", 0))
    node = socket.create_connection(listener.getsockname())
    head, _ = listener.accept()
    listener.close()
    handled: List[Dict[str, Any]] = []

    class Recording(HeadChannel):
        def handle(self, message: Dict[str, Any]) -> None:
            handled.append(message)

    channel = Recording(head, lambda *_: None, lambda *_: None, lambda _message: None, lambda _text: None)
    try:
        sent = [{"t": "acked", "seq": 1}, {"t": "acked", "seq": 2},
                {"t": "superseded", "epoch": 2, "addr": "10.0.0.1", "port": 4000},
                {"t": "acked", "seq": 3}, {"t": "acked", "seq": 4}]
        stream = b"".join(collection_frames.pack(message) for message in sent)
        for at in range(0, len(stream), size):
            node.sendall(stream[at:at + size])
            assert channel._read_now(block=True)
        for _ in range(100):  # a read that took part of what was sent: the rest (each waits 0.1 s at most)
            if len(handled) == len(sent):
                break
            assert channel._read_now(block=True)
        assert handled == sent
        node.sendall(b"\xff\x01\x63\x00" + b"\x00" * 12)  # a compact frame of no known kind: the end
        assert not channel._read_now(block=True)
    finally:
        head.close()
        node.close()
