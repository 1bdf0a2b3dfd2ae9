"""The compact layout of the collections' hot frames (docs/protocol.md, "Distributed collections"):
``replicate`` (one write's change to a counter or a lock), ``acked``, and a task thread's ``op`` and
``answer`` on its own connection to the head for the simple operations (a counter's increment,
decrement and reset, a lock's acquire and release) — the frames on every strong write's path.

Encoding one of them as the JSON frame (:func:`skyward.protocol.pack_frame`) and decoding it cost
4–7 µs each on the frame's two ends, four frames per write from node 1: more than the network
between two nodes. A compact frame is the JSON frame's 8-byte prefix with its first word marked —
byte 0 is ``0xFF`` (a JSON frame's header is at most 64 MiB: its first byte is never that), byte 1
the layout's version, byte 2 the kind, byte 3 zero — and the second word the body's length; the
body is fixed fields (big-endian) and UTF-8 strings behind a u16 length. Everything else (a ``full``
frame, a dict's keys, an answer holding a list, a refusal) stays a JSON frame on the same connection;
a decoder takes both (:attr:`skyward.protocol.FrameDecoder.compact`) and hands the same message a
JSON frame would (so the epochs, the seqs and their checks are the same). An ``op`` marked
``"copy": true`` and a ``replicate`` carrying the answers the copy gives its node's tasks
(:mod:`skyward.collection_mailbox`) have compact forms too: a bit of the operation byte, and the
answers after the states. The node holding the copy reads a whole compact ``replicate`` frame
without the decoder (:func:`take_replicate`) and packs its ``acked`` at once (:func:`acked`).
"""

from __future__ import annotations

import math
import struct
import socket
from typing import Any, Callable, Dict, List, Tuple

from .protocol import COMPACT_MAX_BYTES, MAX_SAFE_INTEGER, FrameDecoder, ProtocolError, pack_frame, to_wire

#: the first word of a compact frame is ``_MARK | kind << 8``
_MARK = 0xFF010000

REPLICATE = 1
ACKED = 2
OP = 3
ANSWER = 4

_PREFIX = struct.Struct(">II")
_REPLICATE = struct.Struct(">qqH")  # epoch, seq, how many states
_STATE = struct.Struct(">BH")  # the collection's kind, its name's length
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")
_U16 = struct.Struct(">H")
_OP = struct.Struct(">qB")  # request id, which operation

#: the operations an ``op`` frame carries (code ↔ kind, op)
_OPS: List[Tuple[str, str]] = [("counter", "increment"), ("counter", "decrement"), ("counter", "reset"),
                               ("lock", "acquire"), ("lock", "release")]
_OP_CODES = {operation: code for code, operation in enumerate(_OPS)}
_STATE_KINDS = ("counter", "lock")
#: the bit of an ``op`` frame's operation byte saying ``"copy": true`` (the node holding the copy may
#: answer it: :mod:`skyward.collection_mailbox`)
_MAY_ANSWER_THROUGH_COPY = 0x80

#: a scalar's tag byte
_NONE, _FALSE, _TRUE, _INT, _FLOAT, _STR = range(6)


def _frame(kind: int, body: bytes) -> bytes:
    return _PREFIX.pack(_MARK | kind << 8, len(body)) + body


def _text(value: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > 0xFFFE:
        raise ValueError("too long for a compact frame")
    return _U16.pack(len(data)) + data


def _scalar(value: Any) -> bytes:
    """A value that is its own wire form (None, a boolean, a safe integer, a finite float, a string)."""
    kind = type(value)
    if value is None:
        return b"\x00"
    if kind is bool:
        return b"\x02" if value else b"\x01"
    if kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return b"\x03" + _I64.pack(value)
    if kind is float and math.isfinite(value):
        return b"\x04" + _F64.pack(value)
    if kind is str:
        return b"\x05" + _text(value)
    raise ValueError("not a compact scalar")


def pack(message: Dict[str, Any], wire: bool = False) -> bytes:
    """``message`` as one frame: compact when its layout has one, else JSON. Its values are native
    (``to_wire`` makes their wire form), or already in wire form when ``wire``."""
    try:
        compact = _compact(message)
    except (ValueError, TypeError, AttributeError, struct.error, UnicodeEncodeError):
        compact = None
    if compact is not None:
        return compact
    return pack_frame([message if wire else to_wire(message, "message")])


def _compact(message: Dict[str, Any]) -> bytes | None:
    kind = message.get("t")
    if kind == "acked" and len(message) == 2 and type(message.get("seq")) is int:
        return acked(message["seq"])  # the copy's answer to every frame: one struct
    if kind == "answer" and len(message) == 3 and type(message.get("id")) is int:
        return _frame(ANSWER, _I64.pack(message["id"]) + _scalar(message.get("value")))
    if kind == "op" and len(message) == 4 + ("copy" in message):
        return _compact_op(message)
    if kind == "replicate" and len(message) == 5 + ("answers" in message) and message.get("full") is False:
        return _compact_replicate(message)
    return None


def _compact_op(message: Dict[str, Any]) -> bytes | None:
    request, owner, request_id = message.get("op"), message.get("owner"), message.get("id")
    if type(request) is not list or not 3 <= len(request) <= 4 or type(owner) is not str or type(request_id) is not int:
        return None
    code = _OP_CODES.get((request[0], request[2]))
    if code is None or type(request[1]) is not str or message.get("copy", True) is not True:
        return None
    argument = _scalar(request[3]) if len(request) == 4 else b""
    flags = _MAY_ANSWER_THROUGH_COPY if "copy" in message else 0
    return _frame(OP, _OP.pack(request_id, code | flags) + _text(owner) + _text(request[1]) + argument)


def _state(kind: str, name: str, value: Any) -> bytes:
    """One state of a compact ``replicate``: a counter's value, or a lock's holder (None: free)."""
    if kind == "counter":
        return b"\x00" + _text(name) + _I64.pack(value)
    return b"\x01" + _text(name) + (b"\xff\xff" if value is None else _text(value))


def _compact_replicate(message: Dict[str, Any]) -> bytes | None:
    epoch, seq, states = message.get("epoch"), message.get("seq"), message.get("states")
    if type(epoch) is not int or type(seq) is not int or type(states) is not list:
        return None
    parts = [_REPLICATE.pack(epoch, seq, len(states))]
    for state in states:
        if state.get("kind") == "counter" and len(state) == 3 and type(state.get("value")) is int:
            parts.append(_state("counter", state["name"], state["value"]))
        elif state.get("kind") == "lock" and len(state) == 3 and "holder" in state:
            parts.append(_state("lock", state["name"], state["holder"]))
        else:
            return None
    if "answers" in message:
        answers = message["answers"]
        parts.append(_U16.pack(len(answers)))
        for answer in answers:
            if answer.get("t") != "answer" or len(answer) != 3 or type(answer.get("id")) is not int:
                return None
            parts += [_I64.pack(answer["id"]), _scalar(answer.get("value"))]
    return _frame(REPLICATE, b"".join(parts))


class _Reader:
    """Reads a compact body from its start, refusing a short or malformed one."""

    __slots__ = ("_body", "_at")

    def __init__(self, body: memoryview) -> None:
        self._body = body
        self._at = 0

    def take(self, layout: struct.Struct) -> Tuple[Any, ...]:
        if self._at + layout.size > len(self._body):
            raise ProtocolError("a compact frame ends too early")
        fields = layout.unpack_from(self._body, self._at)
        self._at += layout.size
        return fields

    def text(self, absent: bool = False) -> str | None:
        (length,) = self.take(_U16)
        if absent and length == 0xFFFF:
            return None
        if self._at + length > len(self._body):
            raise ProtocolError("a compact frame ends too early")
        try:
            value = str(self._body[self._at:self._at + length], "utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("a compact frame holds a string that is not UTF-8") from None
        self._at += length
        return value

    def byte(self) -> int:
        if self._at >= len(self._body):
            raise ProtocolError("a compact frame ends too early")
        self._at += 1
        return self._body[self._at - 1]

    def scalar(self) -> Any:
        tag = self.byte()
        if tag == _INT:
            return self.take(_I64)[0]
        if tag == _FLOAT:
            return self.take(_F64)[0]
        if tag == _STR:
            return self.text()
        if tag > _STR:
            raise ProtocolError(f"a compact frame holds an unknown value tag {tag}")
        return (None, False, True)[tag]

    def more(self) -> bool:
        return self._at < len(self._body)

    def end(self) -> None:
        if self.more():
            raise ProtocolError("a compact frame holds more than its layout")


def unpack(word: int, body: memoryview) -> Dict[str, Any]:
    """The message of the compact frame whose prefix's first word is ``word`` (the decoder's hook)."""
    if word & 0xFFFF00FF != _MARK:
        raise ProtocolError(f"a compact frame of another version or layout (0x{word:08x})")
    kind = (word >> 8) & 0xFF
    reader = _Reader(body)
    message: Dict[str, Any]
    if kind == ACKED:
        message = {"t": "acked", "seq": reader.take(_I64)[0]}
    elif kind == ANSWER:
        message = {"t": "answer", "id": reader.take(_I64)[0], "value": reader.scalar()}
    elif kind == OP:
        request_id, code = reader.take(_OP)
        through_copy, code = bool(code & _MAY_ANSWER_THROUGH_COPY), code & ~_MAY_ANSWER_THROUGH_COPY
        if code >= len(_OPS):
            raise ProtocolError(f"a compact op frame names an unknown operation {code}")
        owner, name = reader.text(), reader.text()
        request: List[Any] = [_OPS[code][0], name, _OPS[code][1]]
        if reader.more():
            request.append(reader.scalar())
        message = {"t": "op", "id": request_id, "owner": owner, "op": request}
        if through_copy:
            message["copy"] = True
    elif kind == REPLICATE:
        epoch, seq, count = reader.take(_REPLICATE)
        states = []
        for _ in range(count):
            code = reader.byte()
            if code >= len(_STATE_KINDS):
                raise ProtocolError(f"a compact replicate frame names an unknown collection kind {code}")
            name = reader.text()
            if code == 0:
                states.append({"kind": "counter", "name": name, "value": reader.take(_I64)[0]})
            else:
                states.append({"kind": "lock", "name": name, "holder": reader.text(absent=True)})
        message = {"t": "replicate", "epoch": epoch, "seq": seq, "full": False, "states": states}
        if reader.more():  # the answers the node holding the copy gives its own tasks
            (count,) = reader.take(_U16)
            message["answers"] = [{"t": "answer", "id": reader.take(_I64)[0], "value": reader.scalar()}
                                  for _ in range(count)]
    else:
        raise ProtocolError(f"a compact frame of an unknown kind {kind}")
    reader.end()
    return message


#: a compact ``replicate`` frame's prefix and fixed fields at once (the copy's fast path)
_REPLICATE_HEAD = struct.Struct(">IIqqH")
_REPLICATE_WORD = _MARK | REPLICATE << 8
_ANSWER_HEAD = struct.Struct(">qB")  # request id, the value's tag
_ACKED = struct.Struct(">IIq")
_ACKED_WORD = _MARK | ACKED << 8


def acked(seq: int) -> bytes:
    """The compact ``acked`` frame of ``seq`` (a signed 64-bit integer), as :func:`pack` makes it."""
    return _ACKED.pack(_ACKED_WORD, 8, seq)


def one_replicate(epoch: int, seq: int, kind: str, name: str, value: Any) -> bytes:
    """The compact ``replicate`` frame of one write (the head's fast path): a counter's new ``value``,
    or a lock's new holder (``value``, None when free) — as :func:`pack` makes it for
    ``{"t": "replicate", "epoch", "seq", "full": False, "states": [that state]}``."""
    return _frame(REPLICATE, _REPLICATE.pack(epoch, seq, 1) + _state(kind, name, value))


def take_replicate(data: bytearray, at: int, end: int) -> Tuple[Dict[str, Any], int] | None:
    """The copy's fast path: the compact ``replicate`` frame starting at ``data[at:end]`` as the
    message :func:`unpack` gives, and where the next frame starts — read with precompiled layouts,
    no decoder. None when that is not a whole compact ``replicate`` frame whose every field this
    reads (another frame, a partial one, a value of another kind, a malformed one): the general
    decoder then takes the bytes from ``at`` on (and refuses what is malformed)."""
    if end - at < _REPLICATE_HEAD.size:
        return None
    word, length, epoch, seq, count = _REPLICATE_HEAD.unpack_from(data, at)
    stop = at + 8 + length
    if word != _REPLICATE_WORD or stop > end or length > COMPACT_MAX_BYTES:
        return None
    try:
        i = at + _REPLICATE_HEAD.size
        states = []
        for _ in range(count):
            if i >= stop:
                return None
            code, size = _STATE.unpack_from(data, i)
            i += 3
            if i + size > stop:
                return None
            name = data[i:i + size].decode("utf-8")
            i += size
            if code == 0:
                states.append({"kind": "counter", "name": name, "value": _I64.unpack_from(data, i)[0]})
                i += 8
            elif code == 1:
                (size,) = _U16.unpack_from(data, i)
                i += 2
                if size == 0xFFFF:
                    holder = None
                elif i + size > stop:
                    return None
                else:
                    holder = data[i:i + size].decode("utf-8")
                    i += size
                states.append({"kind": "lock", "name": name, "holder": holder})
            else:
                return None
        message: Dict[str, Any] = {"t": "replicate", "epoch": epoch, "seq": seq, "full": False, "states": states}
        if i < stop:  # the answers the node holding the copy gives its own tasks
            (count,) = _U16.unpack_from(data, i)
            i += 2
            answers = []
            for _ in range(count):
                if i >= stop:
                    return None
                request_id, tag = _ANSWER_HEAD.unpack_from(data, i)
                i += 9
                if tag == _INT:
                    value: Any = _I64.unpack_from(data, i)[0]
                    i += 8
                elif tag < _INT:
                    value = (None, False, True)[tag]
                else:
                    return None  # a float or a string: the general decoder's
                answers.append({"t": "answer", "id": request_id, "value": value})
            message["answers"] = answers
        if i != stop:
            return None
        return message, stop
    except (struct.error, UnicodeDecodeError):  # a field past the buffer, or not UTF-8: the general decoder refuses it
        return None


def decoder() -> FrameDecoder:
    """A frame decoder for a collections connection: JSON frames and compact ones."""
    made = FrameDecoder()
    made.compact = unpack
    return made

def read_messages(sock: socket.socket, each: Callable[[Dict[str, Any]], None], spinner: Any = None) -> None:
    """Calls ``each`` with every message read from ``sock`` until it ends. ``spinner`` (a
    ``collection_spin.Spinner``): each read looks for data without waiting first, for its budget."""
    decoder_ = decoder()  # the copy's and a task's frames may be compact
    if not _DONT_WAIT:
        spinner = None
    while True:
        with decoder_.get_buffer() as buffer:  # received into the decoder's memory: no copy
            count = None if spinner is None else spinner.look(lambda: try_recv(sock, buffer))
            if count is None:
                count = sock.recv_into(buffer)
        if not count:
            return
        for messages in decoder_.buffer_updated(count):
            for message in messages:
                each(message)


#: a read that returns at once when nothing is there (0 where there is none)
_DONT_WAIT = getattr(socket, "MSG_DONTWAIT", 0)


def try_recv(sock: socket.socket, buffer: Any, nbytes: int = 0) -> int | None:
    """A read into ``buffer`` (at most ``nbytes``; 0: its size) that does not wait (None: nothing
    yet): what a ``collection_spin.Spinner`` looks with."""
    try:
        return sock.recv_into(buffer, nbytes, _DONT_WAIT)
    except BlockingIOError:
        return None


__all__ = ["ACKED", "ANSWER", "OP", "REPLICATE", "acked", "decoder", "pack", "read_messages", "take_replicate",
           "try_recv", "unpack"]
