"""Write packages/core/protocol-vectors/py-vectors.json: the shared protocol test vectors.

Run ``python3 packages/core/python/tests/make_vectors.py`` after changing the codec or the
vectors; the JSON file is committed and replayed by both the Python and the TypeScript suites
(see docs/protocol.md, "Test vectors").
"""

from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from skyward.protocol import MAX_BODY_BYTES, MAX_HEADER_BYTES, StreamRef, decode_frame, encode_frame  # noqa: E402

OUTPUT = HERE.parent.parent / "protocol-vectors" / "py-vectors.json"


def to_expected(value: Any) -> Any:
    """A native value in the vectors' *expected form* (bytes as {"$hex": …})."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$hex": bytes(value).hex()}
    if isinstance(value, float) and not math.isfinite(value):
        return {"$f": "nan" if value != value else ("inf" if value > 0 else "-inf")}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if abs(value) <= 2**53 - 1 else {"$i": str(value)}
    if isinstance(value, float):
        return value
    if isinstance(value, StreamRef):
        return {"$s": value.index}
    if type(value).__name__ == "RefArg":
        ref = dict(value.info)
        if value.carried is not None:
            ref["value"] = to_expected(value.carried)
        return {"$r": ref}
    if type(value).__name__ == "ndarray" or type(value).__name__ == "Pickled":
        from skyward.protocol import to_wire

        wire = to_wire(value)
        ((tag, content),) = wire.items()
        data = content["data"]
        return {tag: {**content, "data": to_expected(data.view if hasattr(data, "view") else data)}}
    if isinstance(value, (list, tuple)):
        return [to_expected(item) for item in value]
    if isinstance(value, dict):
        inner = {key: to_expected(item) for key, item in value.items()}
        return {"$d": inner} if any(key.startswith("$") for key in value) else inner
    raise TypeError(type(value))


def frame(header: bytes, body: bytes = b"", header_length: int | None = None, body_length: int | None = None) -> bytes:
    return (
        struct.pack(">II", len(header) if header_length is None else header_length,
                    len(body) if body_length is None else body_length)
        + header
        + body
    )


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/work/tasks.py", line 3, in boom\n'
    '    raise ValueError("bad \\"input\\"")\n'
    'ValueError: bad "input"\n'
)

# (name, messages, canonical)
VALID: List[tuple[str, List[Dict[str, Any]], bool]] = [
    ("hello", [{"t": "hello", "version": 1, "token": "s3cr3t-token", "client": "skyward-ts/0.1.0"}], True),
    (
        "welcome with results",
        [{"t": "welcome", "version": 1, "node": 0, "pid": 4242, "hostname": "ip-10-0-0-1", "python": "3.11.7",
          "executor": "thread", "concurrency": 4, "buffer": 2, "results": ["t-17", "t-18"], "running": [],
          "ready": False}],
        True,
    ),
    ("reject", [{"t": "reject", "reason": "bad token"}], True),
    (
        "cluster",
        [{"t": "cluster", "node": 1, "total_nodes": 2, "workers_per_node": 1, "head_addr": "10.0.0.1",
          "head_port": 29500, "job_id": "job-abc",
          "peers": [{"node": 0, "private_ip": "10.0.0.1", "public_ip": "3.3.3.3"},
                    {"node": 1, "private_ip": "10.0.0.2", "public_ip": None}],
          "accelerators": 1, "accelerator": {"type": "A100", "count": 1, "memory_gb": 80, "is_trainium": False},
          "network": None, "env": {"HF_HOME": "/cache", "EMPTY": ""}}],
        True,
    ),
    ("ready", [{"t": "ready"}], True),
    (
        "submit",
        [{"t": "submit", "id": "t-1", "fn": "tasks:add", "args": [2, 3], "kwargs": {}, "timeout": 300,
          "stream": False, "worker": None}],
        True,
    ),
    (
        "submit with bytes",
        [{"t": "submit", "id": "t-2", "fn": "tasks:digest", "args": [b"\x00\x01\x02\xff"], "kwargs": {},
          "timeout": None, "stream": False, "worker": 0}],
        True,
    ),
    (
        "submit with several segments, one empty",
        [{"t": "submit", "id": "t-3", "fn": "pkg.mod:Class.method", "args": [b"abc", b"", {"blob": b"\xde\xad\xbe\xef"}],
          "kwargs": {"extra": b"z"}, "timeout": 1, "stream": True, "worker": None}],
        True,
    ),
    (
        "submit with input streams",
        [{"t": "submit", "id": "t-4", "fn": "tasks:consume", "args": [StreamRef(0), 10],
          "kwargs": {"labels": StreamRef(1)}, "timeout": None, "stream": False, "worker": None}],
        True,
    ),
    ("result int", [{"t": "result", "id": "t-1", "value": 5}], True),
    ("result null", [{"t": "result", "id": "t-5", "value": None}], True),
    (
        "result nested value",
        [{"t": "result", "id": "t-6", "value": {"ok": True, "no": False, "list": [1, [2, [3, []]], {}],
                                                 "text": "", "neg": -42, "zero": 0,
                                                 "deep": {"a": {"b": {"c": [None]}}}}}],
        True,
    ),
    (
        "stream items and end in one frame",
        [{"t": "item", "id": "t-7", "seq": 0, "value": 1}, {"t": "item", "id": "t-7", "seq": 1, "value": "two"},
         {"t": "item", "id": "t-7", "seq": 2, "value": [3]}, {"t": "end", "id": "t-7"}],
        True,
    ),
    (
        "error with traceback",
        [{"t": "error", "id": "t-8", "kind": "exception", "type": "ValueError", "message": 'bad "input"',
          "traceback": TRACEBACK, "node": 0, "worker": 0}],
        True,
    ),
    (
        "errors of every kind",
        [{"t": "error", "id": f"e-{kind}", "kind": kind, "type": type_name, "message": text, "traceback": "",
          "node": 3, "worker": None}
         for kind, type_name, text in [
             ("not_found", "ModuleNotFoundError", "module 'nope' not found"),
             ("serialization", "SerializationError", 'result[2]["model"]: cannot send a value of type Model'),
             ("timeout", "TimeoutError", "the task ran past its timeout of 5 s"),
             ("cancelled", "CancelledError", "the task was cancelled"),
             ("worker_died", "WorkerDiedError", "the executor process (pid 7) was killed by signal 9"),
         ]],
        True,
    ),
    ("cancel", [{"t": "cancel", "id": "t-9"}], True),
    (
        "stdout and stderr output",
        [{"t": "out", "id": "t-10", "stream": "stdout", "node": 0, "worker": 1, "data": "epoch 1 loss 0.5\n"},
         {"t": "out", "id": "t-10", "stream": "stderr", "node": 0, "worker": 1, "data": "warning: slow\r\n"}],
        True,
    ),
    ("output outside a task", [{"t": "out", "id": None, "stream": "stderr", "node": 2, "worker": None, "data": "boot\n"}], True),
    (
        "input stream credit and items",
        [{"t": "pull", "id": "t-11", "stream": 0, "n": 16}],
        True,
    ),
    (
        "input stream items, end and error",
        [{"t": "in", "id": "t-11", "stream": 0, "value": {"row": 1}},
         {"t": "in", "id": "t-11", "stream": 0, "value": b"\x10\x20"},
         {"t": "in_end", "id": "t-11", "stream": 0},
         {"t": "in_error", "id": "t-11", "stream": 1, "message": "source failed"}],
        True,
    ),
    ("ping and pong", [{"t": "ping", "ts": 1737000000123}, {"t": "pong", "ts": 1737000000123}], True),
    (
        "release, collect and shutdown",
        [{"t": "release", "ttl": 600}, {"t": "collect", "ids": ["t-17", "t-18"]}, {"t": "shutdown"}],
        True,
    ),
    ("metric", [{"t": "metric", "node": 0, "name": "cpu", "value": 12.5, "unit": "%", "ts": 1737000000.123}], False),
    ("event", [{"t": "event", "node": 0, "event": {"type": "log", "level": "info", "message": "hi"}}], True),
    (
        "non-finite floats",
        [{"t": "result", "id": "t-12", "value": [math.nan, math.inf, -math.inf]}],
        True,
    ),
    (
        "integers at and beyond the safe range",
        [{"t": "result", "id": "t-13", "value": [2**53 - 1, -(2**53 - 1), 2**53, -(2**53), 2**100, -(10**30)]}],
        True,
    ),
    (
        "escaped dicts",
        [{"t": "result", "id": "t-14", "value": {"$b": "not bytes", "$": 1, "plain": {"$s": "not a stream"},
                                                  "nested": [{"$d": {"$x": [1]}}], "ok": {"a$": 2}}}],
        True,
    ),
    (
        "a one-key dict whose key starts with a dollar is escaped",
        [{"t": "result", "id": "t-15", "value": {"$weird": {"inner": True}}}],
        True,
    ),
    (
        "unicode text",
        [{"t": "result", "id": "t-16", "value": {"ascii": "plain", "accents": "ação é ü", "cjk": "训练模型",
                                                  "emoji": "🚀 GPU 🔥", "rtl": "שלום",
                                                  "controls": "tab\tnew\nline\r\u0001\u001f",
                                                  "quotes": "she said \"hi\" \\ back", "separators": "a\u2028b\u2029c",
                                                  "ключ": "значение"}}],
        True,
    ),
    ("an empty bytes value is an empty segment", [{"t": "result", "id": "t-17", "value": b""}], True),
    (
        "bytes nested, the same bytes twice are two segments",
        [{"t": "result", "id": "t-18", "value": {"weights": [b"\x01\x02", {"again": b"\x01\x02"}], "n": 2}}],
        True,
    ),
    (
        "segments in order of first appearance across messages",
        [{"t": "item", "id": "t-19", "seq": 0, "value": b"first"},
         {"t": "out", "id": "t-19", "stream": "stdout", "node": 0, "worker": 0, "data": "between\n"},
         {"t": "item", "id": "t-19", "seq": 1, "value": [b"second", b"third"]},
         {"t": "end", "id": "t-19"}],
        True,
    ),
    (
        "finite floats (not canonical: their text differs between languages)",
        [{"t": "result", "id": "t-20", "value": [1.5, -0.25, 1e-07, 3.0, 6.02e23, 0.1]}],
        False,
    ),
    (
        "integer-like dict keys (not canonical: JavaScript reorders them)",
        [{"t": "result", "id": "t-21", "value": {"b": 1, "10": 2, "2": 3}}],
        False,
    ),
    ("unknown message types are decoded too", [{"t": "future_message", "id": "t-22", "extra": {"x": [1]}}], True),
    ("empty containers and strings", [{"t": "result", "id": "t-23", "value": [[], {}, "", [[]], {"e": {}}]}], True),
    (
        "a batch of results",
        [{"t": "result", "id": f"b-{i}", "value": i * i} for i in range(12)],
        True,
    ),
    (
        "submit with escaped kwargs and bytes",
        [{"t": "submit", "id": "t-24", "fn": "tasks:f", "args": [], "kwargs": {"$weird": b"\x7f", "x": None},
          "timeout": 2, "stream": False, "worker": None}],
        True,
    ),
]


def _value_vectors() -> List[tuple[str, List[Dict[str, Any]], bool]]:
    """Arrays ($a) and pickled objects ($o): built with numpy (run this script with a Python that has it)."""
    import pickle

    import numpy

    from skyward.values import Pickled

    matrix = numpy.arange(6, dtype=numpy.float32).reshape(2, 3) / 4
    ints = numpy.array([[1, -2], [3, 2**40]], dtype=numpy.int64)
    handle = Pickled("builtins.tuple", pickle.dumps((1, "two"), protocol=5))
    return [
        ("result with a 2-D float32 array", [{"t": "result", "id": "t-a1", "value": matrix}], True),
        ("submit with an int64 array argument", [
            {"t": "submit", "id": "t-a2", "fn": "tasks:total", "args": [ints], "kwargs": {}, "timeout": None,
             "stream": False, "worker": None},
        ], True),
        ("result with arrays of every shape", [{"t": "result", "id": "t-a3", "value": {
            "scalar": numpy.array(2.5), "empty": numpy.zeros((0, 3), dtype=numpy.uint8),
            "flags": numpy.array([True, False, True]), "halves": numpy.array([1.5, -2], dtype=numpy.float16),
        }}], False),
        ("result with a pickled object", [{"t": "result", "id": "t-o1", "value": handle}], True),
    ]


def _ref_vectors() -> List[tuple[str, List[Dict[str, Any]], bool]]:
    """Remote references ($r): a worker's kept result, and arguments with and without the object."""
    import pickle

    from skyward.values import Pickled, RefArg

    info = {"id": "r1-0c3e9d7a5b2f1e48", "node": 1, "type": "builtins.dict", "size": 27}
    carried = Pickled("builtins.dict", pickle.dumps({"w": [1, 2]}, protocol=5))
    return [
        ("result kept on its node", [{"t": "result", "id": "t-r1", "value": RefArg(info["id"], None, dict(info))}], True),
        ("submit with remote references, one bringing its object", [
            {"t": "submit", "id": "t-r2", "fn": "tasks:use", "args": [RefArg(info["id"], None, dict(info))],
             "kwargs": {"model": RefArg(info["id"], carried, dict(info))}, "timeout": None, "stream": False,
             "worker": None, "refs": True},
        ], True),
        ("submit that keeps its result, and unref", [
            {"t": "submit", "id": "t-r3", "fn": "tasks:train", "args": [], "kwargs": {}, "timeout": None,
             "stream": False, "worker": None, "keep": True},
            {"t": "unref", "ids": [info["id"]]},
        ], True),
    ]


VALID.extend(_value_vectors())
VALID.extend(_ref_vectors())

# (name, frame bytes, word the decoder's error message contains)
ERRORS: List[tuple[str, bytes, str]] = [
    ("truncated frame", frame(b'[{"t":"ready"}]')[:12], "truncated"),
    ("truncated length prefix", b"\x00\x00\x00", "truncated"),
    ("truncated body", frame(b'[{"seg":[4]},{"t":"result","id":"x","value":{"$b":0}}]', b"\x01\x02\x03\x04")[:-2], "truncated"),
    ("header not JSON", frame(b'[{"t":"ready"'), "JSON"),
    ("header not UTF-8", frame(b'[{"t":"\xff\xfe"}]'), "JSON"),
    ("NaN literal in the header", frame(b'[{"t":"result","id":"x","value":NaN}]'), "JSON"),
    ("header not an array", frame(b'{"t":"ready"}'), "array"),
    ("message not an object", frame(b'[{"t":"ready"},42]'), "object"),
    ("message without a type", frame(b'[{"id":"x"}]'), "type"),
    ("segment table does not add up", frame(b'[{"seg":[3]},{"t":"result","id":"x","value":{"$b":0}}]', b"\x01\x02"), "segment"),
    ("segment table with a negative length", frame(b'[{"seg":[-1,3]},{"t":"ready"}]', b"\x01\x02"), "segment"),
    ("body without a segment table", frame(b'[{"t":"ready"}]', b"\x01\x02"), "segment"),
    ("$b index out of range", frame(b'[{"seg":[1]},{"t":"result","id":"x","value":{"$b":1}}]', b"\x01"), "range"),
    ("$b index without any segment", frame(b'[{"t":"result","id":"x","value":{"$b":0}}]'), "range"),
    ("unknown $ tag", frame(b'[{"t":"result","id":"x","value":{"$q":1}}]'), "tag"),
    ("unescaped $ key beside other keys", frame(b'[{"t":"result","id":"x","value":{"$q":1,"a":2}}]'), "tag"),
    ("bad non-finite float", frame(b'[{"t":"result","id":"x","value":{"$f":"NaN"}}]'), "float"),
    ("bad big integer", frame(b'[{"t":"result","id":"x","value":{"$i":"12a"}}]'), "integer"),
    ("$d holding a non-object", frame(b'[{"t":"result","id":"x","value":{"$d":[1]}}]'), "escaped"),
    ("$a whose data does not fit its shape", frame(
        b'[{"seg":[3]},{"t":"result","id":"x","value":{"$a":{"dtype":"int32","shape":[1],"data":{"$b":0}}}}]', b"abc"
    ), "bytes"),
    ("$a of an unknown dtype", frame(
        b'[{"seg":[4]},{"t":"result","id":"x","value":{"$a":{"dtype":"int128","shape":[1],"data":{"$b":0}}}}]', b"abcd"
    ), "dtype"),
    ("$r without its node", frame(b'[{"t":"result","id":"x","value":{"$r":{"id":"r0-1","type":"int","size":3}}}]'), "$r must hold"),
    ("$o without a type", frame(b'[{"seg":[1]},{"t":"result","id":"x","value":{"$o":{"data":{"$b":0}}}}]', b"a"), "type"),
    ("header length over the limit", struct.pack(">II", MAX_HEADER_BYTES + 1, 0), "limit"),
    ("body length over the limit", struct.pack(">II", 2, MAX_BODY_BYTES + 1) + b"[]", "limit"),
]


def build() -> List[Dict[str, Any]]:
    vectors: List[Dict[str, Any]] = []
    for name, messages, canonical in VALID:
        data = encode_frame(messages)
        assert decode_frame(data) is not None
        vectors.append({
            "name": name,
            "frame": data.hex(),
            "canonical": canonical,
            "messages": [to_expected(message) for message in messages],
        })
    for name, data, word in ERRORS:
        vectors.append({"name": name, "frame": data.hex(), "error": word})
    return vectors


def main() -> None:
    vectors = build()
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(json.dumps(vectors, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(vectors)} vectors to {OUTPUT}")


if __name__ == "__main__":
    main()
