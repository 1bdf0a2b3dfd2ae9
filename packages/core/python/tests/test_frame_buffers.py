"""The frame decoder's receive buffers and the frame pieces: frames arriving in any split, large frames
received into a buffer of their own (and that buffer reused), limits refused from the prefix, and
``pack_frame_parts`` laying out exactly ``pack_frame``'s bytes without copying large segments."""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path
from typing import Any, Iterable, List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyward.protocol import (  # noqa: E402
    MAX_BODY_BYTES,
    MAX_HEADER_BYTES,
    SEGMENT_APART_BYTES,
    FrameDecoder,
    Message,
    ProtocolError,
    decode_frames,
    encode_frame,
    pack_frame,
    pack_frame_parts,
)

APART = FrameDecoder.APART_BYTES


def blob(size: int, seed: int = 0) -> bytes:
    """``size`` bytes that differ from one position to the next (a misplaced byte shows)."""
    pattern = bytes((index * 7 + seed) % 251 for index in range(251))
    return (pattern * (size // len(pattern) + 1))[:size]


def receive(decoder: FrameDecoder, data: bytes, sizes: Iterable[int] = (1 << 30,)) -> List[List[Message]]:
    """What a transport does with a buffered protocol: ``recv_into(get_buffer())`` at most
    ``sizes[i]`` bytes at a time (cycling), then ``buffer_updated``."""
    sizes = list(sizes)
    frames: List[List[Message]] = []
    offset = 0
    reads = 0
    while offset < len(data):
        buffer = decoder.get_buffer(-1)
        assert len(buffer) > 0, "get_buffer() returned an empty buffer"
        count = min(len(buffer), sizes[reads % len(sizes)], len(data) - offset)
        buffer[:count] = data[offset : offset + count]
        buffer.release()
        offset += count
        reads += 1
        frames.extend(decoder.buffer_updated(count))
    return frames


def result_frame(task_id: str, *values: Any) -> bytes:
    return encode_frame([{"t": "result", "id": task_id, "value": list(values)}])


def values(frames: List[List[Message]]) -> List[Any]:
    return [(message["id"], message["value"]) for frame in frames for message in frame]


# -- receiving ---------------------------------------------------------------------------------------


def test_a_large_frame_arriving_in_many_small_chunks() -> None:
    payload = blob(3 * 1024 * 1024 + 17)
    small = blob(1000, seed=3)
    frame = result_frame("big", payload, small, b"")
    decoder = FrameDecoder()
    frames = receive(decoder, frame, sizes=(1, 7, 4096, 1500, 65536, 3))
    assert values(frames) == [("big", [payload, small, b""])]
    assert all(type(value) is bytes for value in frames[0][0]["value"])
    assert decoder.pending == 0


def test_a_large_frame_is_received_into_one_buffer_sized_from_its_prefix() -> None:
    payload = blob(1024 * 1024)
    frame = result_frame("big", payload)
    decoder = FrameDecoder()
    assert receive(decoder, frame[:1000]) == []
    # After the prefix, the whole rest of the frame can be received in one read, and no more:
    # the bytes of the next frame do not land in this frame's buffer.
    room = decoder.get_buffer(-1)
    assert len(room) == len(frame) - 1000
    room.release()
    assert decoder.pending == 1000
    assert values(receive(decoder, frame[1000:])) == [("big", [payload])]
    assert decoder.pending == 0


@pytest.mark.parametrize("size", [10, APART + 1000], ids=["small frame", "large frame"])
def test_a_frame_split_at_every_byte_of_its_prefix_and_header(size: int) -> None:
    payload = blob(size)
    frame = result_frame("split", payload)
    header_end = 8 + struct.unpack(">I", frame[:4])[0]
    expected = [("split", [payload])]
    for cut in range(1, header_end + 2):
        decoder = FrameDecoder()
        assert receive(decoder, frame[:cut]) == [], cut
        assert decoder.pending == cut
        assert values(receive(decoder, frame[cut:])) == expected, cut
        # the same with feed()
        decoder = FrameDecoder()
        assert decoder.feed(frame[:cut]) == []
        assert values(decoder.feed(frame[cut:])) == expected, cut


def test_several_frames_in_one_chunk_and_a_chunk_ending_mid_prefix() -> None:
    frames = [result_frame(f"t{index}", index, blob(index * 50)) for index in range(40)]
    stream = b"".join(frames)
    expected = [(f"t{index}", [index, blob(index * 50)]) for index in range(40)]
    decoder = FrameDecoder()
    assert values(receive(decoder, stream)) == expected
    for sizes in [(len(frames[0]) + 3,), (5, 3000), (1,)]:
        decoder = FrameDecoder()
        assert values(receive(decoder, stream, sizes)) == expected, sizes
        assert decoder.pending == 0


def test_small_frames_wrapping_around_the_staging_buffer() -> None:
    # Enough frames of awkward sizes that the staging buffer is filled and its unread rest moved
    # to the front many times, with frames cut at its end.
    frames = [result_frame(f"w{index}", blob(1000 + index * 997 % 60000, seed=index)) for index in range(120)]
    expected = [(f"w{index}", [blob(1000 + index * 997 % 60000, seed=index)]) for index in range(120)]
    decoder = FrameDecoder()
    assert values(receive(decoder, b"".join(frames), sizes=(70001, 65536, 12345))) == expected


def test_a_large_frame_followed_by_a_small_one_in_the_same_chunk() -> None:
    payload = blob(2 * 1024 * 1024)
    stream = result_frame("large", payload) + result_frame("small", 1) + result_frame("small2", b"x")
    expected = [("large", [payload]), ("small", [1]), ("small2", [b"x"])]
    # A reader that could take it all at once gets the large frame's start in the staging buffer,
    # the rest of it in the frame's own buffer, and the small frames after it in staging again.
    decoder = FrameDecoder()
    assert values(receive(decoder, stream)) == expected
    decoder = FrameDecoder()
    assert values(decoder.feed(stream)) == expected
    # a large frame that is complete in the first read is decoded from the staging buffer
    small_large = result_frame("l", blob(APART + 10)) + result_frame("s", 2)
    decoder = FrameDecoder()
    assert values(receive(decoder, small_large)) == [("l", [blob(APART + 10)]), ("s", [2])]


def test_the_large_frame_buffer_is_reused_without_changing_what_was_handed_out() -> None:
    first = blob(APART * 4, seed=1)
    second = blob(APART * 3, seed=2)
    third = blob(APART * 5, seed=3)
    decoder = FrameDecoder()
    (one,) = receive(decoder, result_frame("1", first), sizes=(4096,))
    (two,) = receive(decoder, result_frame("2", second), sizes=(4096,))  # into the first one's buffer
    assert one[0]["value"] == [first] and two[0]["value"] == [second]
    decoder.trim()  # used since the last trim: kept
    (three,) = receive(decoder, result_frame("3", third), sizes=(4096,))  # larger: a new buffer
    assert three[0]["value"] == [third]
    assert one[0]["value"] == [first] and two[0]["value"] == [second]
    decoder.trim()
    decoder.trim()  # not used since: let go
    assert values(receive(decoder, result_frame("4", first))) == [("4", [first])]


def test_limits_are_refused_from_the_prefix_before_any_buffer_is_made() -> None:
    for header_length, body_length in [(MAX_HEADER_BYTES + 1, 0), (10, MAX_BODY_BYTES + 1)]:
        prefix = struct.pack(">II", header_length, body_length)
        decoder = FrameDecoder()
        with pytest.raises(ProtocolError, match="over the limit"):
            receive(decoder, prefix)
        assert len(decoder.get_buffer(-1)) <= FrameDecoder.STAGING_BYTES  # no buffer was made for it
        with pytest.raises(ProtocolError, match="already refused"):
            decoder.buffer_updated(0)
        with pytest.raises(ProtocolError, match="already refused"):
            decoder.feed(b"more")
        # the same when the prefix comes after a good frame in the same chunk
        decoder = FrameDecoder()
        with pytest.raises(ProtocolError, match="over the limit"):
            receive(decoder, result_frame("ok", 1) + prefix + b"x" * 100)


def test_a_malformed_large_frame_is_refused_when_complete() -> None:
    header = b'[{"seg":[5]},{"t":"result","id":"x","value":{"$b":0}}]'
    body = b"y" * (APART * 2)  # the segment table says 5
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="segment table adds up to 5"):
        receive(decoder, struct.pack(">II", len(header), len(body)) + header + body, sizes=(9000,))


def test_a_truncated_frame_is_reported_even_right_after_its_prefix() -> None:
    frame = result_frame("t", 1)
    for cut in (3, 8, 9, len(frame) - 1):
        with pytest.raises(ProtocolError, match=f"truncated frame: {cut} byte"):
            decode_frames(frame[:cut])


def test_feed_takes_bytes_bytearray_and_memoryview() -> None:
    frame = result_frame("f", blob(APART * 2))
    for data in (frame, bytearray(frame), memoryview(frame), memoryview(frame).cast("c")):
        assert values(FrameDecoder().feed(data)) == [("f", [blob(APART * 2)])]


# -- pieces ------------------------------------------------------------------------------------------


def test_pack_frame_parts_are_pack_frame_without_copying_large_segments() -> None:
    large = blob(SEGMENT_APART_BYTES)
    larger = blob(SEGMENT_APART_BYTES * 3, seed=5)
    small = blob(SEGMENT_APART_BYTES - 1, seed=9)
    cases = [
        [{"t": "pong", "ts": 1}],
        [{"t": "result", "id": "a", "value": [small, b"x"]}],
        [{"t": "result", "id": "a", "value": large}],
        [{"t": "result", "id": "a", "value": [small, large, b"", b"z", larger, small]}, {"t": "end", "id": "b"}],
        [{"t": "result", "id": "a", "value": [large, larger]}],
    ]
    for messages in cases:
        pieces = pack_frame_parts(messages)
        assert b"".join(pieces) == pack_frame(messages)
        assert all(type(piece) is bytes for piece in pieces)
    # small segments are joined to what surrounds them; large ones are the very objects sent
    pieces = pack_frame_parts(cases[3])
    assert [len(piece) for piece in pieces[1:]] == [len(large), 1, len(larger), len(small)]
    assert pieces[1] is large and pieces[3] is larger
    assert pieces[0].endswith(small) and pieces[2] == b"z"
    (only,) = pack_frame_parts(cases[1])
    assert only == pack_frame(cases[1])
    head, first, second = pack_frame_parts(cases[4])
    assert first is large and second is larger and len(head) < 200


def resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc to read the resident size")
def test_a_prefix_announcing_a_huge_frame_costs_no_memory_until_its_body_comes() -> None:
    # 1.5 GiB announced: its buffer is made at once but only committed as bytes arrive.
    header = b'[{"seg":[1610612736]},{"t":"submit","id":"x","args":[{"$b":0}]}]'
    prefix = struct.pack(">II", len(header), 1_610_612_736)
    decoder = FrameDecoder()
    before = resident_bytes()
    assert receive(decoder, prefix + header + blob(1000)) == []
    room = decoder.get_buffer(-1)
    assert len(room) == 1_610_612_736 - 1000  # the whole rest of the frame can be received into it
    room.release()
    assert resident_bytes() - before < 64 * 1024 * 1024
    assert decoder.pending == 8 + len(header) + 1000
