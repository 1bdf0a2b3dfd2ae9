"""The Skyward wire protocol, version 1 (see docs/protocol.md): frame codec and value encoding.

A frame is ``u32 header length | u32 body length | header (UTF-8 JSON array) | body``. The header
array holds the messages, preceded by a segment table ``{"seg": [...]}`` when the frame carries
binary segments. Values use a few tagged forms: ``{"$b": i}`` bytes, ``{"$f": "nan"}`` non-finite
floats, ``{"$i": "123"}`` big integers, ``{"$d": {...}}`` dicts with ``$`` keys, ``{"$s": k}``
argument streams.

Encoding happens in two steps so that callers can name where a bad value was:
:func:`to_wire` turns a native value into its wire form (``bytes`` stay ``bytes``) and raises
:class:`SerializationError` naming the type and the path; :func:`pack_frame` lays wire-form
messages out as one frame, turning each ``bytes`` into the next binary segment.
"""

from __future__ import annotations

import json
import math
import mmap
import re
import struct
from typing import Any, Callable, Dict, List, Sequence

from .wire_errors import ProtocolError, SerializationError
from .values import (
    Blob,
    Pickled,
    RefArg,
    UnreadTable,
    decode_array,
    decode_object,
    decode_ref,
    decode_table,
    encode_object,
    encode_special,
)

PROTOCOL_VERSION = 1
MAX_HEADER_BYTES = 64 * 1024 * 1024
MAX_BODY_BYTES = 2 * 1024 * 1024 * 1024
MAX_SAFE_INTEGER = 2**53 - 1
#: the most a compact frame's body may hold (:attr:`FrameDecoder.compact`)
COMPACT_MAX_BYTES = 64 * 1024

Message = Dict[str, Any]

_PREFIX = struct.Struct(">II")
_INTEGER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class StreamRef:
    """The ``{"$s": k}`` marker: argument stream ``k`` of a task (the worker makes it an iterator)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StreamRef) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("StreamRef", self.index))

    def __repr__(self) -> str:
        return f"StreamRef({self.index})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (StreamRef, (self.index,))


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------


def _type_name(value: object) -> str:
    cls = type(value)
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def _is_numpy(value: object) -> bool:
    module = type(value).__module__
    return module == "numpy" or module.startswith("numpy.")


def is_plain(value: Any) -> bool:
    """Whether ``value`` is its own wire form and cannot fail to encode (a string, null, a boolean,
    an integer JSON numbers hold exactly): :func:`to_wire` would return it as it is."""
    cls = type(value)
    return cls is str or value is None or cls is bool or (cls is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)


def _key_path(path: str, key: str) -> str:
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def to_wire(value: Any, path: str = "value") -> Any:
    """Return the wire form of a native value: JSON values, tagged forms, and ``bytes`` left as is.

    Raises :class:`SerializationError` for anything that cannot be sent, naming its type and its
    path below ``path`` (``result[2]["model"]: cannot send a value of type Model``).
    """
    cls = type(value)
    if cls is str or value is None or cls is bool:
        return value
    if cls is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        return {"$i": str(value)}
    if cls is float:
        if value - value == 0.0:  # finite
            return value
        return {"$f": "nan" if value != value else ("inf" if value > 0 else "-inf")}
    if cls is list or cls is tuple:
        return [item if is_plain(item) else to_wire(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if cls is dict:
        escaped = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                if not isinstance(key, str):
                    # JSON has string keys only: the dict goes whole as an object rather than fail
                    # (and lose) the result holding it.
                    return encode_object(value, path)
                key = str.__str__(key)
            if key.startswith("$"):
                escaped = True
            # A plain value is its own wire form: no path to name (the path costs a json.dumps).
            out[key] = item if is_plain(item) else to_wire(item, _key_path(path, key))
        return {"$d": out} if escaped else out
    if cls is bytes:
        return value
    if cls is bytearray or cls is memoryview:
        return bytes(value)
    if cls is StreamRef:
        return {"$s": value.index}
    return _to_wire_other(value, path)


def _to_wire_other(value: Any, path: str) -> Any:
    # Subclasses of the plain types, then numpy by duck typing (numpy itself is never imported).
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return to_wire(int(value), path)
    if isinstance(value, float):
        return to_wire(float(value), path)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return [to_wire(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            return encode_object(value, path)  # as a dict's: whole, its own type kept (a Counter)
        return to_wire(dict(value), path)
    wire = getattr(type(value), "__skyward_wire__", None)
    if wire is not None:
        return to_wire(value.__skyward_wire__(), path)  # InstanceInfo and its parts: plain dicts
    if type(value) is Blob:
        return value
    if type(value) is Pickled:
        return {"$o": {"type": value.type_name, "data": value.data}}  # passed on as it came
    if type(value) is UnreadTable:
        return {"$t": {"format": "arrow", "kind": value.kind, "data": value.data}}  # likewise
    if type(value) is RefArg:
        ref: dict[str, Any] = dict(value.info) if value.info else {"id": value.id}
        if value.carried is not None:
            ref["value"] = to_wire(value.carried, path)
        return {"$r": ref}
    # Arrays ($a), tables ($t), any other object pickled ($o): see skyward.values.
    try:
        special = encode_special(value, path)
    except SerializationError:
        raise
    except Exception as error:
        # A converter's own error (Arrow refusing a column, a library's array export): reported as
        # this value's serialisation error; escaping, it would leave the task without an answer.
        raise SerializationError(
            path, _type_name(value), f"cannot send a value of type {_type_name(value)}: {type(error).__name__}: {error}"
        ) from None
    return special if type(special) is dict else to_wire(special, path)


def _frame_json(wire_messages: Sequence[Any]) -> tuple[bytes, list[bytes]]:
    segments: list[bytes] = []

    def add_segment(value: object) -> object:
        if type(value) is bytes:
            segments.append(value)
            return {"$b": len(segments) - 1}
        if type(value) is Blob:
            segments.append(value.view)  # type: ignore[arg-type]  (sent from its own memory)
            return {"$b": len(segments) - 1}
        raise SerializationError("message", _type_name(value))

    text = json.dumps(
        wire_messages, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=add_segment
    )
    try:
        header = text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates cannot be UTF-8: fall back to \u escapes, still valid JSON.
        segments.clear()
        text = json.dumps(
            wire_messages, separators=(",", ":"), ensure_ascii=True, allow_nan=False, default=add_segment
        )
        header = text.encode("ascii")
    return header, segments


def _layout(wire_messages: Sequence[Any]) -> tuple[bytes, list[bytes]]:
    """The frame's prefix and header as one ``bytes``, and its binary segments; checks the limits."""
    header, segments = _frame_json(wire_messages)
    if segments:
        table = json.dumps({"seg": [len(segment) for segment in segments]}, separators=(",", ":"))
        # Splice the table in as the header array's first element.
        header = b"[" + table.encode("ascii") + (b"," if len(header) > 2 else b"") + header[1:]
        body_length = sum(len(segment) for segment in segments)
    else:
        body_length = 0
    if len(header) > MAX_HEADER_BYTES:
        raise ProtocolError(f"frame header of {len(header)} bytes is over the limit of {MAX_HEADER_BYTES}")
    if body_length > MAX_BODY_BYTES:
        raise ProtocolError(f"frame body of {body_length} bytes is over the limit of {MAX_BODY_BYTES}")
    return _PREFIX.pack(len(header), body_length) + header, segments


def pack_frame(wire_messages: Sequence[Any]) -> bytes:
    """Lay out messages already in wire form (see :func:`to_wire`) as one frame.

    Each ``bytes`` object met in the messages becomes the next binary segment, in order of first
    appearance (every occurrence is a segment of its own). Raises :class:`ProtocolError` when the
    frame would be over the limits.
    """
    head, segments = _layout(wire_messages)
    if not segments:
        return head
    return b"".join([head, *segments])


#: Segments at least this long are not copied into a frame by :func:`pack_frame_parts`.
SEGMENT_APART_BYTES = 64 * 1024


def pack_frame_parts(wire_messages: Sequence[Any]) -> List[bytes]:
    """Like :func:`pack_frame`, but the frame as consecutive pieces, so large segments are not copied.

    The pieces joined are exactly :func:`pack_frame`'s bytes. Every segment of at least
    :data:`SEGMENT_APART_BYTES` is a piece of its own (the very ``bytes`` object of the message);
    the prefix, the header and the smaller segments between them are joined into pieces.
    """
    head, segments = _layout(wire_messages)
    if not segments:
        return [head]
    pieces: List[bytes] = []
    run: List[bytes] = [head]
    for segment in segments:
        if len(segment) >= SEGMENT_APART_BYTES:
            if run:
                pieces.append(run[0] if len(run) == 1 else b"".join(run))
                run = []
            pieces.append(segment)
        else:
            run.append(segment)
    if run:
        pieces.append(run[0] if len(run) == 1 else b"".join(run))
    return pieces


def encode_frame(messages: Sequence[Message]) -> bytes:
    """Encode native messages (Python values inside) as one frame's bytes."""
    wire = [to_wire(message, f"messages[{index}]") for index, message in enumerate(messages)]
    return pack_frame(wire)


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


def _refuse_constant(name: str) -> Any:
    raise ProtocolError(f"frame header is not valid JSON: {name} is not allowed")


class _Resolver:
    """Turns the tagged forms of one frame's messages into native values."""

    __slots__ = ("segments",)

    def __init__(self, segments: list[memoryview]) -> None:
        self.segments = segments

    def value(self, value: Any) -> Any:
        cls = type(value)
        if cls is dict:
            if len(value) == 1:
                for key, inner in value.items():
                    if key.startswith("$"):
                        return self.tagged(key, inner)
                    return {key: self.value(inner)}
            return self.object(value)
        if cls is list:
            return [self.value(item) for item in value]
        return value

    def object(self, value: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            if key.startswith("$"):
                raise ProtocolError(f"object key {key!r} starts with '$' but is not a tag; escape it with $d")
            out[key] = self.value(inner)
        return out

    def segment(self, inner: Any) -> memoryview:
        if type(inner) is not int or inner < 0 or inner >= len(self.segments):
            raise ProtocolError(f"$b index {inner!r} is out of range: the frame has {len(self.segments)} segment(s)")
        return self.segments[inner]

    def array_segment(self, ref: Any) -> bytearray:
        if type(ref) is not dict or len(ref) != 1 or "$b" not in ref:
            raise ProtocolError('the data of $a, $t and $o must be a segment {"$b": i}')
        return bytearray(self.segment(ref["$b"]))  # the one copy out of the frame, writable

    def tagged(self, tag: str, inner: Any) -> Any:
        if tag == "$b":
            return bytes(self.segment(inner))
        if tag == "$a":
            return decode_array(inner, self.array_segment)
        if tag == "$t":
            return decode_table(inner, self.array_segment)
        if tag == "$o":
            return decode_object(inner, self.array_segment)
        if tag == "$r":
            return decode_ref(inner, self.value)
        if tag == "$f":
            if type(inner) is not str or inner not in _NON_FINITE:
                raise ProtocolError(f'$f value {inner!r} is not a non-finite float ("nan", "inf", "-inf")')
            return _NON_FINITE[inner]
        if tag == "$i":
            if type(inner) is not str or not _INTEGER_TEXT.fullmatch(inner):
                raise ProtocolError(f"$i value {inner!r} is not an integer in decimal text")
            return int(inner)
        if tag == "$d":
            if type(inner) is not dict:
                raise ProtocolError("$d must hold an object (an escaped dict)")
            return {key: self.value(item) for key, item in inner.items()}
        if tag == "$s":
            if type(inner) is not int or inner < 0:
                raise ProtocolError(f"$s value {inner!r} is not a stream index")
            return StreamRef(inner)
        raise ProtocolError(f"unknown tag {tag!r}")


# One decoder for every frame: json.loads with keyword arguments builds a new one per call.
_HEADER_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def _decode_header(header: bytes | memoryview, body: bytes | memoryview) -> List[Message]:
    raw = bytes(header)
    try:
        parsed = _HEADER_DECODER.decode(raw.decode("utf-8"))
    except ProtocolError:
        raise
    except (UnicodeDecodeError, ValueError) as error:
        raise ProtocolError(f"frame header is not valid UTF-8 JSON: {error}") from None
    if type(parsed) is not list:
        raise ProtocolError(f"frame header must be a JSON array, not {type(parsed).__name__}")

    segments: list[memoryview] = []
    messages = parsed
    if parsed and type(parsed[0]) is dict and "seg" in parsed[0] and "t" not in parsed[0]:
        table = parsed[0]["seg"]
        if (
            len(parsed[0]) != 1
            or type(table) is not list
            or any(type(length) is not int or length < 0 for length in table)
        ):
            raise ProtocolError("segment table must be {\"seg\": [non-negative integers]}")
        if sum(table) != len(body):
            raise ProtocolError(
                f"segment table adds up to {sum(table)} bytes but the body has {len(body)}"
            )
        offset = 0
        whole = body if type(body) is memoryview else memoryview(body)
        for length in table:
            segments.append(whole[offset : offset + length])  # copied out when a tag refers to it
            offset += length
        messages = parsed[1:]
    elif len(body):
        raise ProtocolError(f"frame has a body of {len(body)} bytes but no segment table")

    for message in messages:
        if type(message) is not dict:
            raise ProtocolError(f"every message must be a JSON object, not {type(message).__name__}")
        if type(message.get("t")) is not str:
            raise ProtocolError("every message needs a string type field 't'")

    # Tags can only be present where the text holds `"$` (or an escaped dollar sign).
    if segments or b'"$' in raw or b"\\u0024" in raw:
        resolver = _Resolver(segments)
        messages = [resolver.object(message) for message in messages]
    return messages


class FrameDecoder:
    """Incremental decoder: give it bytes as they arrive, get back each complete frame's messages.

    Two ways to give it bytes: :meth:`feed` copies them in; :meth:`get_buffer` and
    :meth:`buffer_updated` (the shape of :class:`asyncio.BufferedProtocol`) let the caller receive
    straight into the decoder's memory. Small frames are gathered in one reused staging buffer. A
    frame longer than :data:`FrameDecoder.APART_BYTES` that is not complete yet gets a buffer of its
    own, sized once from its prefix, into which the rest of it is received: a large frame is never
    grown chunk by chunk. That buffer is anonymous memory (:class:`mmap.mmap`) whose pages are only
    committed as the frame's bytes arrive, so a prefix that announces a large frame costs nothing
    until its body comes. Segments are handed out as ``bytes`` copied from the buffer, so nothing
    handed out changes afterwards, and the buffer is kept for the next large frame that fits in it
    (memory already mapped is several times faster to fill than fresh memory) until :meth:`trim`.

    Limits are checked as soon as a frame's 8-byte prefix is in, so an oversized frame is refused
    before its payload arrives (and before any buffer is allocated for it). Any malformed frame
    raises :class:`ProtocolError`; the decoder is then unusable (the connection must be closed).
    """

    #: Frames longer than this (header + body) are received into a buffer of their own.
    APART_BYTES = 64 * 1024
    #: The staging buffer for smaller frames: room for one such frame and its prefix, with slack.
    STAGING_BYTES = 256 * 1024
    #: Unread bytes are moved to the front of the staging buffer when less room than this is left.
    MIN_READ_BYTES = 64 * 1024

    __slots__ = (
        "_staging", "_start", "_end", "_frame", "_filled", "_spare", "_spare_used", "_need_header", "_need_body",
        "_failed", "max_frame_bytes", "compact",
    )

    def __init__(self) -> None:
        # The staging buffer never changes size (callers may still hold a view of it), it is replaced.
        self._staging = bytearray(self.STAGING_BYTES)
        self._start = 0  # unread bytes are _staging[_start:_end]
        self._end = 0
        self._frame: memoryview | None = None  # the current large frame's own buffer (header + body)
        self._filled = 0  # bytes of it received so far
        self._spare: mmap.mmap | None = None  # the last large frame's buffer, for the next one
        self._spare_used = False  # whether it was used since the last trim()
        self._need_header = -1  # header length of the frame whose prefix is read, else -1
        self._need_body = 0
        self._failed = False
        #: A tighter limit on a whole frame (header + body), checked at its prefix; None for none.
        #: The worker sets one until the handshake is done, so a stranger cannot make it buffer much.
        self.max_frame_bytes: int | None = None
        #: Decodes a compact frame (a first word whose byte 0 is 0xFF: ``word, body -> message``) on
        #: a connection that takes them (the collections', :mod:`skyward.collection_frames`); None:
        #: such a frame is refused as any oversized header is.
        self.compact: Callable[[int, memoryview], Message] | None = None

    @property
    def pending(self) -> int:
        """Bytes received but not yet part of a complete frame (a partial frame's prefix included)."""
        pending = self._end - self._start + (self._filled if self._frame is not None else 0)
        return pending + 8 if self._need_header >= 0 else pending

    def feed(self, data: bytes | bytearray | memoryview) -> List[List[Message]]:
        """Decode ``data`` (copied in): the messages of each frame it completes, in order."""
        if self._failed:
            raise ProtocolError("the decoder already refused a frame on this stream")
        frames: List[List[Message]] = []
        with memoryview(data) as whole:
            source = whole.cast("B") if whole.format != "B" or whole.ndim != 1 else whole
            offset = 0
            while offset < len(source):
                with self.get_buffer() as target:
                    count = min(len(target), len(source) - offset)
                    target[:count] = source[offset : offset + count]
                offset += count
                frames.extend(self.buffer_updated(count))
        return frames

    def trim(self) -> None:
        """Let go of the buffer kept from the last large frame if none came since the last trim.

        Call it now and then (the worker does every few seconds): a connection that carried a large
        frame keeps memory of its size only while such frames keep coming.
        """
        if not self._spare_used and self._frame is None:
            self._spare = None
        self._spare_used = False

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next bytes received should be written (:meth:`buffer_updated` then counts them)."""
        if self._frame is not None:
            return self._frame[self._filled :]
        if self._failed:
            return memoryview(self._staging)  # nothing received any more is decoded
        staging = self._staging
        if len(staging) - self._end < self.MIN_READ_BYTES and self._start > 0:
            # Move the unread bytes (a partial small frame) to the front of a fresh staging buffer.
            unread = self._end - self._start
            fresh = bytearray(len(staging))
            fresh[:unread] = memoryview(staging)[self._start : self._end]
            self._staging = staging = fresh
            self._start, self._end = 0, unread
        return memoryview(staging)[self._end :]

    def buffer_updated(self, nbytes: int) -> List[List[Message]]:
        """Count ``nbytes`` written into the last :meth:`get_buffer`; returns each frame completed."""
        if self._failed:
            raise ProtocolError("the decoder already refused a frame on this stream")
        try:
            frame = self._frame
            if frame is None:
                self._end += nbytes
                return self._decode_staged()
            self._filled += nbytes
            if self._filled < len(frame):
                return []
            self._frame = None
            self._filled = 0
            header_length = self._need_header
            self._need_header = -1
            with frame, frame[:header_length] as header, frame[header_length:] as body:
                return [_decode_header(header, body)]  # copies what it keeps: the buffer can be reused
        except ProtocolError:
            self._failed = True
            raise

    def _decode_staged(self) -> List[List[Message]]:
        frames: List[List[Message]] = []
        staging = self._staging
        start, end = self._start, self._end
        while True:
            if self._need_header < 0:
                if end - start < 8:
                    break
                header_length, body_length = _PREFIX.unpack_from(staging, start)
                if header_length >> 24 == 0xFF and self.compact is not None:
                    if body_length > COMPACT_MAX_BYTES:
                        raise ProtocolError(f"compact frame body of {body_length} bytes is over the limit")
                    if end - start < 8 + body_length:
                        break
                    with memoryview(staging) as view, view[start + 8 : start + 8 + body_length] as body:
                        frames.append([self.compact(header_length, body)])
                    start += 8 + body_length
                    self._start = start
                    continue
                if header_length > MAX_HEADER_BYTES:
                    raise ProtocolError(
                        f"frame header length {header_length} is over the limit of {MAX_HEADER_BYTES}"
                    )
                if body_length > MAX_BODY_BYTES:
                    raise ProtocolError(f"frame body length {body_length} is over the limit of {MAX_BODY_BYTES}")
                limit = self.max_frame_bytes
                if limit is not None and header_length + body_length > limit:
                    raise ProtocolError(
                        f"a frame of {header_length + body_length} bytes is over the limit of {limit} here"
                    )
                start += 8
                self._start = start
                self._need_header = header_length
                self._need_body = body_length
            header_length = self._need_header
            total = header_length + self._need_body
            if end - start < total:
                if total > self.APART_BYTES:
                    # A large frame: the rest of it goes straight into a buffer of its own.
                    spare = self._spare
                    if spare is None or len(spare) < total:
                        spare = self._spare = None  # (the old one is freed before the new one is made)
                        # Anonymous memory: pages are only committed as the frame's bytes arrive, so
                        # a prefix announcing a large frame costs nothing until its body comes.
                        try:
                            spare = self._spare = mmap.mmap(-1, total)
                        except (OSError, MemoryError, OverflowError) as error:
                            raise ProtocolError(f"cannot make a buffer for a frame of {total} bytes: {error}") from None
                    self._spare_used = True
                    frame = memoryview(spare)[:total]
                    frame[: end - start] = memoryview(staging)[start:end]
                    self._frame = frame
                    self._filled = end - start
                    start = end
                break
            with memoryview(staging) as view:
                with view[start : start + header_length] as header, view[start + header_length : start + total] as body:
                    frames.append(_decode_header(header, body))
            start += total
            self._start = start
            self._need_header = -1
        if start == end:
            start = end = 0  # the staging buffer is empty: start again at its front
        self._start, self._end = start, end
        return frames


def decode_frames(data: bytes | bytearray | memoryview) -> List[List[Message]]:
    """Decode a complete byte string of frames; leftover bytes are a truncated frame."""
    decoder = FrameDecoder()
    frames = decoder.feed(data)
    if decoder.pending:
        raise ProtocolError(f"truncated frame: {decoder.pending} byte(s) left over at the end")
    return frames


def decode_frame(data: bytes | bytearray | memoryview) -> List[Message]:
    """Decode exactly one frame."""
    frames = decode_frames(data)
    if len(frames) != 1:
        raise ProtocolError(f"expected exactly one frame, found {len(frames)} (truncated frame?)")
    return frames[0]


__all__ = [
    "PROTOCOL_VERSION",
    "MAX_HEADER_BYTES",
    "MAX_BODY_BYTES",
    "MAX_SAFE_INTEGER",
    "is_plain",
    "Message",
    "ProtocolError",
    "SerializationError",
    "StreamRef",
    "to_wire",
    "pack_frame",
    "pack_frame_parts",
    "SEGMENT_APART_BYTES",
    "encode_frame",
    "FrameDecoder",
    "decode_frames",
    "decode_frame",
]
