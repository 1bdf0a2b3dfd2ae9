"""The compact layout of the collections' hot frames (``collection_frames.py``): each one round-trips
to the very message a JSON frame carries, what has no layout stays JSON, both go on one connection in
order, and a short, corrupt, unknown or oversized compact frame is refused — as is any compact frame
on a connection whose decoder does not take them (the client's, a worker's)."""

from __future__ import annotations

import struct
from typing import Any, Dict, List

import pytest

import worker_client  # noqa: F401  (puts the runtime on sys.path)
from skyward import collection_frames
from skyward.protocol import COMPACT_MAX_BYTES, FrameDecoder, ProtocolError, decode_frame, pack_frame, to_wire

COMPACT: List[Dict[str, Any]] = [
    {"t": "acked", "seq": 7},
    {"t": "acked", "seq": 2**62},
    {"t": "answer", "id": 3, "value": 41},
    {"t": "answer", "id": 3, "value": None},
    {"t": "answer", "id": 3, "value": True},
    {"t": "answer", "id": 3, "value": False},
    {"t": "answer", "id": 3, "value": -2.5},
    {"t": "answer", "id": 3, "value": "naïve $x"},
    {"t": "op", "id": 9, "owner": "1/task-4", "op": ["counter", "c", "increment", 1]},
    {"t": "op", "id": 9, "owner": "1/task-4", "op": ["counter", "c", "decrement", None]},
    {"t": "op", "id": 9, "owner": "1/task-4", "op": ["counter", "c", "reset", 0]},
    {"t": "op", "id": 9, "owner": "1/task-4", "op": ["lock", "ĺock", "acquire", 2.5]},
    {"t": "op", "id": 9, "owner": "1/task-4", "op": ["lock", "l", "release"]},
    {"t": "replicate", "epoch": 3, "seq": 11, "full": False, "states": [
        {"kind": "counter", "name": "c", "value": -4},
        {"kind": "lock", "name": "l", "holder": None},
        {"kind": "lock", "name": "m", "holder": "0/task-1"},
    ]},
    {"t": "replicate", "epoch": 0, "seq": 1, "full": False, "states": []},
    # answered by the copy (collection_mailbox.py): the op's mark, the answers the frame carries
    {"t": "op", "id": 9, "owner": "1/task-4", "op": ["counter", "c", "increment", 1], "copy": True},
    {"t": "op", "id": 9, "owner": "1/task-4", "op": ["lock", "l", "release"], "copy": True},
    {"t": "replicate", "epoch": 1, "seq": 12, "full": False, "states": [{"kind": "counter", "name": "c", "value": 5}],
     "answers": [{"t": "answer", "id": 9, "value": 5}, {"t": "answer", "id": 10, "value": None}]},
]

JSON_ONLY: List[Dict[str, Any]] = [
    {"t": "answer", "id": 3, "value": [1, 2]},  # not a scalar
    {"t": "answer", "id": 3, "value": 2**60},  # over the safe integers: a tagged form in JSON
    {"t": "refused", "id": 3, "type": "RuntimeError", "message": "no"},
    {"t": "op", "id": 9, "owner": "1/t", "op": ["dict", "d", "set", "k", 1]},
    {"t": "op", "id": 9, "owner": "1/t", "op": ["counter", "c", "value"]},
    {"t": "replicate", "epoch": 0, "seq": 1, "full": True, "states": [{"kind": "counter", "name": "c", "value": 1}]},
    {"t": "replicate", "epoch": 0, "seq": 2, "full": False, "states": [{"kind": "counter", "name": "c", "value": 0.5}]},
    {"t": "replicate", "epoch": 0, "seq": 2, "full": False,
     "states": [{"kind": "set", "name": "s", "delta": True, "removed": [], "values": [1]}]},
    {"t": "superseded", "epoch": 2, "addr": "10.0.0.1", "port": 4000},
    {"t": "op", "id": 9, "owner": "1/t", "op": ["dict", "d", "set", "k", 1], "copy": True},
    {"t": "replicate", "epoch": 0, "seq": 2, "full": False, "states": [{"kind": "counter", "name": "c", "value": 1}],
     "answers": [{"t": "refused", "id": 9, "type": "RuntimeError", "message": "no"}]},  # a refusal is JSON
    {"t": "replicate", "epoch": 0, "seq": 2, "full": False, "states": [{"kind": "counter", "name": "c", "value": 1}],
     "answers": [{"t": "answer", "id": 9, "value": [1]}]},  # not a scalar
]


def decoded(data: bytes) -> List[List[Dict[str, Any]]]:
    return collection_frames.decoder().feed(data)


@pytest.mark.parametrize("message", COMPACT, ids=lambda message: str(message["t"]))
def test_a_hot_frame_is_compact_and_round_trips(message: Dict[str, Any]) -> None:
    data = collection_frames.pack(message, wire=message["t"] == "op")
    assert data[:1] == b"\xff"
    assert len(data) < len(pack_frame([to_wire(message, "message")]))
    assert decoded(data) == [[message]]


@pytest.mark.parametrize("kind, value", [("counter", -(1 << 63)), ("counter", 7), ("lock", "0/task-é"), ("lock", None)])
def test_the_head_fast_paths_frame_is_the_one_pack_makes(kind: str, value: Any) -> None:
    state = {"kind": kind, "name": "n", "value" if kind == "counter" else "holder": value}
    message = {"t": "replicate", "epoch": 3, "seq": 41, "full": False, "states": [state]}
    data = collection_frames.one_replicate(3, 41, kind, "n", value)
    assert data == collection_frames.pack(message)
    assert decoded(data) == [[message]]


@pytest.mark.parametrize("message", JSON_ONLY, ids=lambda message: str(message["t"]))
def test_what_has_no_layout_stays_a_json_frame(message: Dict[str, Any]) -> None:
    data = collection_frames.pack(message)
    assert data == pack_frame([to_wire(message, "message")])
    assert decoded(data) == [[message]]


def test_compact_and_json_frames_share_a_connection_in_order_whatever_the_reads() -> None:
    messages = COMPACT + JSON_ONLY + COMPACT
    stream = b"".join(collection_frames.pack(message, wire=message["t"] == "op") for message in messages)
    decoder = collection_frames.decoder()
    received: List[Dict[str, Any]] = []
    for at in range(0, len(stream), 5):  # every frame arrives in pieces
        for frame in decoder.feed(stream[at:at + 5]):
            received.extend(frame)
    assert received == messages
    assert decoder.pending == 0


def test_an_op_in_wire_form_is_not_encoded_twice() -> None:
    tagged = {"t": "op", "id": 1, "owner": "1/t", "op": ["dict", "d", "set", "k", {"$i": "9007199254740993"}]}
    assert decode_frame(collection_frames.pack(tagged, wire=True)) == [
        {**tagged, "op": ["dict", "d", "set", "k", 9007199254740993]}]


def _compact(kind: int, body: bytes, version: int = 1) -> bytes:
    return struct.pack(">II", 0xFF000000 | version << 16 | kind << 8, len(body)) + body


@pytest.mark.parametrize("data", [
    _compact(collection_frames.ACKED, b"\x00" * 4),  # the seq cut short
    _compact(collection_frames.ACKED, b"\x00" * 9),  # more than the layout
    _compact(collection_frames.ANSWER, struct.pack(">q", 1) + b"\x09"),  # an unknown value tag
    _compact(collection_frames.ANSWER, struct.pack(">q", 1) + b"\x05\x00\x05ab"),  # a string cut short
    _compact(collection_frames.ANSWER, struct.pack(">q", 1) + b"\x05\x00\x02\xff\xfe"),  # not UTF-8
    _compact(collection_frames.OP, struct.pack(">qB", 1, 99) + b"\x00\x00\x00\x00"),  # an unknown operation
    _compact(collection_frames.REPLICATE, struct.pack(">qqH", 0, 1, 2) + b"\x00\x00\x01c" + b"\x00" * 8),  # 1 of 2
    _compact(collection_frames.REPLICATE, struct.pack(">qqH", 0, 1, 1) + b"\x07\x00\x01c"),  # an unknown kind
    _compact(77, b""),  # an unknown kind of frame
    _compact(collection_frames.ACKED, struct.pack(">q", 1), version=2),  # another layout version
    struct.pack(">II", 0xFF010200, COMPACT_MAX_BYTES + 1),  # oversized: refused at its prefix
], ids=["short", "long", "tag", "string", "utf8", "op", "states", "kind", "frame", "version", "oversized"])
def test_a_short_or_corrupt_compact_frame_is_refused(data: bytes) -> None:
    decoder = collection_frames.decoder()
    with pytest.raises(ProtocolError):
        decoder.feed(data)
    with pytest.raises(ProtocolError):  # the decoder stays refused: the connection must end
        decoder.feed(collection_frames.pack({"t": "acked", "seq": 1}))


def test_a_decoder_that_takes_no_compact_frames_refuses_them() -> None:
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(collection_frames.pack({"t": "acked", "seq": 1}))
