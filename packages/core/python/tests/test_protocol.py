"""The frame codec: the shared vectors (every *.json in protocol-vectors), round trips, errors."""

from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from prerequisites import require_module  # noqa: E402
from skyward.protocol import (  # noqa: E402
    MAX_HEADER_BYTES,
    FrameDecoder,
    ProtocolError,
    SerializationError,
    StreamRef,
    decode_frame,
    decode_frames,
    encode_frame,
    pack_frame,
    to_wire,
)

VECTOR_DIR = Path(__file__).resolve().parent.parent.parent / "protocol-vectors"
VECTOR_FILES = sorted(VECTOR_DIR.glob("*.json"))


def load_vectors() -> list[Any]:
    vectors = []
    for path in VECTOR_FILES:
        for vector in json.loads(path.read_text(encoding="utf-8")):
            vectors.append(pytest.param(vector, id=f"{path.stem}: {vector['name']}"))
    return vectors


def from_expected(value: Any) -> Any:
    """The vectors' expected form → native values."""
    if isinstance(value, list):
        return [from_expected(item) for item in value]
    if isinstance(value, dict):
        if len(value) == 1:
            ((key, inner),) = value.items()
            if key == "$hex":
                return bytes.fromhex(inner)
            if key == "$f":
                return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[inner]
            if key == "$i":
                return int(inner)
            if key == "$s":
                return StreamRef(inner)
            if key == "$d":
                return {k: from_expected(v) for k, v in inner.items()}
            if key == "$r":
                from skyward.values import decode_ref

                return decode_ref(inner, from_expected)
            if key in ("$a", "$o"):
                from skyward.values import decode_array, decode_object

                data = bytearray(bytes.fromhex(inner["data"]["$hex"]))
                decode = decode_array if key == "$a" else decode_object
                return decode({**inner, "data": {"$b": 0}}, lambda ref: data)
        return {k: from_expected(v) for k, v in value.items()}
    return value


def comparable(value: Any) -> Any:
    """NaN-safe, type-strict structure for equality checks."""
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, list):
        return ["list", *[comparable(item) for item in value]]
    if isinstance(value, dict):
        return ("dict", [(key, comparable(item)) for key, item in value.items()])
    if isinstance(value, bytes):
        return ("bytes", value)
    if isinstance(value, StreamRef):
        return ("stream", value.index)
    from skyward.values import Pickled, RawArray, RefArg

    if isinstance(value, RefArg):
        return ("ref", value.id, comparable(value.info), comparable(value.carried))
    if isinstance(value, RawArray):
        return ("array", value.dtype, tuple(value.shape), bytes(value.data))
    if type(value).__name__ == "ndarray":
        return ("array", value.dtype.name if value.dtype.name != "bool" else "bool", tuple(value.shape), value.tobytes())
    if isinstance(value, Pickled):
        return ("object", value.type_name, value.data)
    if isinstance(value, (int, float)):
        return ("number", value)
    return value


def test_vector_files_present() -> None:
    names = [path.name for path in VECTOR_FILES]
    assert "py-vectors.json" in names
    vectors = json.loads((VECTOR_DIR / "py-vectors.json").read_text(encoding="utf-8"))
    assert len([v for v in vectors if "error" not in v]) >= 25
    assert len([v for v in vectors if "error" in v]) >= 8


@pytest.mark.parametrize("vector", load_vectors())
def test_vector(vector: dict[str, Any]) -> None:
    data = bytes.fromhex(vector["frame"])
    if "error" in vector:
        with pytest.raises(ProtocolError) as caught:
            decode_frame(data)
        assert vector["error"] in str(caught.value), str(caught.value)
        return
    expected = from_expected(vector["messages"])
    decoded = decode_frame(data)
    assert comparable(decoded) == comparable(expected)
    again = decode_frame(encode_frame(expected))
    assert comparable(again) == comparable(expected)
    if vector.get("canonical"):
        assert encode_frame(expected) == data


def test_vectors_decode_when_fed_byte_by_byte() -> None:
    decoder = FrameDecoder()
    frames = []
    stream = b"".join(
        bytes.fromhex(param.values[0]["frame"]) for param in load_vectors() if "error" not in param.values[0]
    )
    for index in range(len(stream)):
        frames.extend(decoder.feed(stream[index : index + 1]))
    assert len(frames) == len([p for p in load_vectors() if "error" not in p.values[0]])
    assert decoder.pending == 0


def test_frame_layout() -> None:
    data = encode_frame([{"t": "result", "id": "a", "value": b"xyz"}])
    header_length, body_length = struct.unpack(">II", data[:8])
    assert body_length == 3
    header = json.loads(data[8 : 8 + header_length])
    assert header == [{"seg": [3]}, {"t": "result", "id": "a", "value": {"$b": 0}}]
    assert data[8 + header_length :] == b"xyz"


def test_round_trip_of_native_values() -> None:
    value = {
        "tuple": (1, (2, 3)),
        "bytearray": bytearray(b"\x00\xff"),
        "memoryview": memoryview(b"mv"),
        "floats": [0.5, math.inf, -math.inf],
        "ints": [2**53 - 1, 2**53, -(2**64)],
        "$escaped": {"$b": 1},
        "text": "línea\n🚀",
        "stream": StreamRef(3),
    }
    (decoded,) = decode_frame(encode_frame([{"t": "result", "id": "x", "value": value}]))
    assert decoded["value"] == {
        "tuple": [1, [2, 3]],
        "bytearray": b"\x00\xff",
        "memoryview": b"mv",
        "floats": [0.5, math.inf, -math.inf],
        "ints": [2**53 - 1, 2**53, -(2**64)],
        "$escaped": {"$b": 1},
        "text": "línea\n🚀",
        "stream": StreamRef(3),
    }
    nan = decode_frame(encode_frame([{"t": "result", "id": "x", "value": math.nan}]))[0]["value"]
    assert math.isnan(nan)


def test_subclasses_and_enums_encode_as_their_base_values() -> None:
    import enum

    class Color(str, enum.Enum):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    assert to_wire({Color.RED: [Level.HIGH, True]}) == {"red": [3, True]}
    assert type(to_wire(Level.HIGH)) is int


class Model:
    pass


def test_unsendable_values_name_the_type_and_the_path() -> None:
    import threading

    with pytest.raises(SerializationError) as caught:
        to_wire([1, 2, {"model": threading.Lock()}], "result")
    assert str(caught.value).startswith('result[2]["model"]: cannot send a value of type _thread.lock: ')
    assert caught.value.path == 'result[2]["model"]'
    with pytest.raises(SerializationError, match=r'messages\[0\]\["value"\]'):
        encode_frame([{"t": "result", "id": "x", "value": (x for x in [])}])


def test_a_dict_with_keys_other_than_strings_travels_whole_as_an_object() -> None:
    from collections import Counter

    from skyward.values import Pickled, restore

    # Before: refused ("dict keys must be strings"), so a task's whole result was lost for a dict of
    # class ids, epochs or tuples somewhere inside it; now that dict goes pickled, its type kept.
    value = {"per_class": {0: 0.91, 1: 0.78}, "pairs": Counter({(1, 2): 3}), "name": "run"}
    [message] = decode_frame(encode_frame([{"t": "result", "id": "x", "value": value}]))
    received = message["value"]
    assert received["name"] == "run"
    assert type(received["per_class"]) is Pickled and received["per_class"].type_name == "dict"
    assert type(received["pairs"]) is Pickled and received["pairs"].type_name == "collections.Counter"
    assert restore(received) == value and type(restore(received)["pairs"]) is Counter


def test_other_objects_travel_pickled_and_are_unpickled_only_on_demand() -> None:
    from skyward.values import Pickled, restore

    wire = to_wire({"model": Model(), "tags": {1, 2}})
    assert wire["model"]["$o"]["type"] == "test_protocol.Model" and type(wire["model"]["$o"]["data"]) is bytes
    [message] = decode_frame(encode_frame([{"t": "result", "id": "x", "value": {"model": Model(), "tags": {1, 2}}}]))
    received = message["value"]
    assert type(received["model"]) is Pickled and received["model"].type_name == "test_protocol.Model"
    restored = restore(received)
    assert type(restored["model"]) is Model and restored["tags"] == {1, 2}
    # Passed on as it came (a handle the client gives to a later task).
    [again] = decode_frame(encode_frame([{"t": "result", "id": "y", "value": received["model"]}]))
    assert again["value"] == received["model"]


def test_numpy_arrays_travel_as_raw_buffers() -> None:
    np = require_module("numpy", "numpy for the array tests (scripts/toolchain.sh installs it)")
    matrix = np.arange(6, dtype=np.float32).reshape(2, 3)
    wire = to_wire({"a": matrix, "s": np.float32(1.5), "i": np.int64(7), "b": np.bool_(True)})
    assert wire["a"]["$a"]["dtype"] == "float32" and wire["a"]["$a"]["shape"] == [2, 3]
    assert wire["s"] == 1.5 and type(wire["i"]) is int and type(wire["b"]) is bool
    frame = encode_frame([{"t": "result", "id": "x", "value": [matrix, np.array([[1, -2], [3, 2**40]], dtype=np.int64)]}])
    [message] = decode_frame(frame)
    floats, ints = message["value"]
    assert floats.dtype == np.float32 and floats.shape == (2, 3) and (floats == matrix).all()
    assert ints.dtype == np.int64 and ints.shape == (2, 2) and ints[1, 1] == 2**40
    floats[0, 0] = 9  # writable: the one copy out of the frame
    # Not C-contiguous, big-endian, bool and 0-d arrays.
    for array in (matrix.T, np.arange(4, dtype=">i4"), np.array([True, False]), np.array(3.5), np.zeros((0, 3))):
        [back] = decode_frame(encode_frame([{"t": "result", "id": "x", "value": array}]))
        assert back["value"].shape == array.shape and (back["value"] == array).all()
        assert back["value"].dtype == array.dtype.newbyteorder("=")


def test_array_segments_are_not_copied_into_the_frame() -> None:
    np = require_module("numpy", "numpy for the array tests (scripts/toolchain.sh installs it)")
    from skyward.protocol import pack_frame_parts

    big = np.ones(1 << 20, dtype=np.float32)
    pieces = pack_frame_parts([to_wire({"t": "result", "id": "x", "value": big})])
    assert any(type(piece) is memoryview and np.shares_memory(np.frombuffer(piece, dtype=np.uint8), big) for piece in pieces)


def test_several_frames_in_one_feed_and_split_feeds() -> None:
    frames = [encode_frame([{"t": "ping", "ts": i}]) for i in range(5)]
    decoder = FrameDecoder()
    stream = b"".join(frames)
    assert [f[0]["ts"] for f in decoder.feed(stream[:30])] == [0]
    assert [f[0]["ts"] for f in decoder.feed(stream[30:])] == [1, 2, 3, 4]
    assert [m["ts"] for f in decode_frames(stream) for m in f] == [0, 1, 2, 3, 4]


def test_large_bytes_segment() -> None:
    blob = bytes(range(256)) * 4096  # 1 MiB
    decoded = decode_frame(encode_frame([{"t": "result", "id": "x", "value": [blob, blob[:10]]}]))
    assert decoded[0]["value"] == [blob, blob[:10]]


def test_limits_are_checked_from_the_prefix() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="limit"):
        decoder.feed(struct.pack(">II", MAX_HEADER_BYTES + 1, 0))
    with pytest.raises(ProtocolError):
        decoder.feed(b"more")  # a decoder that refused a frame stays refused


def test_oversized_frame_is_refused_on_encode() -> None:
    import skyward.protocol as protocol

    original = protocol.MAX_HEADER_BYTES
    protocol.MAX_HEADER_BYTES = 100
    try:
        with pytest.raises(ProtocolError, match="limit"):
            pack_frame([{"t": "result", "id": "x", "value": "y" * 200}])
    finally:
        protocol.MAX_HEADER_BYTES = original


def test_lone_surrogates_still_encode() -> None:
    (message,) = decode_frame(encode_frame([{"t": "result", "id": "x", "value": "a\udc80b"}]))
    assert message["value"] == "a\udc80b"
