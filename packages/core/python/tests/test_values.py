"""Values a task returns that have no wire form of their own reach the client as objects, or as a
serialisation error naming them; none leaves the task without an answer."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from prerequisites import require_module  # noqa: E402
from worker_client import WorkerProcess, connect  # noqa: E402

from skyward.values import Pickled  # noqa: E402

TORCH = "torch for the tensor tests (scripts/toolchain.sh installs Debian's python3-torch)"
KINDS = ["bfloat16", "sparse", "complex", "conjugate"]


@pytest.fixture(scope="module", params=["thread", "process"])
def worker(request: pytest.FixtureRequest) -> Iterator[WorkerProcess]:
    with WorkerProcess("--executor", request.param, "--concurrency", "2") as worker:
        yield worker


def _expected(kind: str):
    sys.path.insert(0, str(Path(__file__).resolve().parent / "tasks"))
    from tensor_tasks import tensor

    return tensor(kind)


@pytest.mark.parametrize("kind", KINDS)
def test_a_tensor_numpy_cannot_hold_arrives_as_the_tensor(worker: WorkerProcess, kind: str) -> None:
    torch = require_module("torch", TORCH)
    client = connect(worker)
    try:
        # Before: the encoder's TypeError from Tensor.numpy() escaped; the thread executor never
        # answered the task (the client waited for ever), the process executor's child died.
        message = client.call("tensor_tasks:tensor", kind, timeout=60)
        assert message["t"] == "result", message
        value = message["value"]
        assert type(value) is Pickled and value.type_name == "torch.Tensor"
        received, expected = value.load(), _expected(kind)
        # A complex tensor came back a numpy array; a conjugated one with its values unconjugated.
        assert type(received) is torch.Tensor
        assert received.dtype == expected.dtype and received.layout == expected.layout
        assert torch.equal(received.to_dense().resolve_conj(), expected.to_dense().resolve_conj())
        # The same as a stream's item.
        client.submit("stream", "tensor_tasks:tensors", kind, stream=True)
        assert client.terminal("stream", timeout=60)["t"] == "end"
        [item] = [m for m in client.by_id["stream"] if m["t"] == "item"]
        assert type(item["value"]) is Pickled and item["value"].load().dtype == expected.dtype
    finally:
        client.close()


def test_a_numpy_long_double_scalar_travels_as_an_object() -> None:
    numpy = require_module("numpy", "numpy for the array tests (scripts/toolchain.sh installs it)")
    from skyward.protocol import decode_frame, encode_frame

    # Before: its item() is itself, so the encoder recursed until RecursionError, which left the
    # task without an answer.
    value = numpy.longdouble(1) / 3
    [message] = decode_frame(encode_frame([{"t": "result", "id": "x", "value": {"third": value}}]))
    received = message["value"]["third"]
    assert type(received) is Pickled and received.load() == value and type(received.load()) is type(value)


def test_a_masked_element_travels_as_none_not_as_zero() -> None:
    numpy = require_module("numpy", "numpy for the array tests (scripts/toolchain.sh installs it)")
    from skyward.protocol import decode_frame, encode_frame

    # Before: numpy.ma.masked's item() is 0.0, so a masked element (or the max of a wholly masked
    # array) reached the client as the number 0: a missing value passed for a measured one.
    readings = numpy.ma.array([3.5, 7.25], mask=[False, True])
    value = {"second": readings[1], "max_of_none": numpy.ma.array([1.0], mask=[True]).max(), "first": readings[0]}
    [message] = decode_frame(encode_frame([{"t": "result", "id": "x", "value": value}]))
    assert message["value"] == {"second": None, "max_of_none": None, "first": 3.5}


@pytest.mark.parametrize("unit", ["ns", "us", "D"])
def test_a_numpy_datetime_or_timedelta_scalar_travels_as_an_object_as_its_arrays_do(unit: str) -> None:
    numpy = require_module("numpy", "numpy for the array tests (scripts/toolchain.sh installs it)")
    from skyward.protocol import decode_frame, encode_frame

    # Before: a datetime64[ns] scalar (an element of a datetime array, a DataFrame column's values)
    # reached the client as a bigint of nanoseconds, one in days or microseconds as an object: the
    # same kind of value was a number or not by its unit.
    moment = numpy.array(["2024-01-01T00:00:00"], dtype=f"datetime64[{unit}]")[0]
    span = numpy.timedelta64(5, unit)
    [message] = decode_frame(encode_frame([{"t": "result", "id": "x", "value": [moment, span]}]))
    received_moment, received_span = message["value"]
    assert type(received_moment) is Pickled and received_moment.load() == moment
    assert type(received_span) is Pickled and received_span.load() == span
    assert received_moment.type_name == "numpy.datetime64" and received_span.type_name == "numpy.timedelta64"


def test_a_numpy_long_double_array_travels_as_an_object_as_its_scalars_do() -> None:
    numpy = require_module("numpy", "numpy for the array tests (scripts/toolchain.sh installs it)")
    from skyward.protocol import decode_frame, encode_frame

    # Before: refused ("cannot send an array of dtype float128") while its scalars, and arrays of
    # every other dtype the wire has no name for, travel pickled, as docs/protocol.md says.
    value = numpy.arange(3, dtype=numpy.longdouble) / 3
    [message] = decode_frame(encode_frame([{"t": "result", "id": "x", "value": value}]))
    received = message["value"]
    assert type(received) is Pickled and received.type_name == "numpy.ndarray"
    assert received.load().dtype == value.dtype and (received.load() == value).all()


@pytest.mark.parametrize("broken", ["pyarrow missing", "not an Arrow stream"])
def test_a_table_the_worker_cannot_read_fails_its_task_not_the_connection(broken: str, tmp_path: Path) -> None:
    from worker_client import PYTHON_ROOT

    from skyward.protocol import pack_frame

    # Before: decoding the frame raised (ProtocolError without pyarrow, ArrowInvalid for a bad
    # stream), so the worker closed the client's connection: the node was lost and replaced, and
    # the task retried on each replacement, for a user who only left pyarrow out of the image.
    env = None
    if broken == "pyarrow missing":  # whether this Python has it or not
        (tmp_path / "pyarrow").mkdir()
        (tmp_path / "pyarrow" / "__init__.py").write_text("raise ImportError('No module named pyarrow')\n")
        env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{PYTHON_ROOT}"}
    with WorkerProcess(env=env) as worker:
        client = connect(worker)
        try:
            table = {"$t": {"format": "arrow", "kind": "pandas", "data": b"not an Arrow stream"}}
            client.send_raw(pack_frame([{"t": "submit", "id": "table", "fn": "demo_tasks:echo", "args": [table],
                                         "kwargs": {}, "timeout": None, "stream": False, "worker": None}]))
            failed = client.terminal("table", timeout=30)
            assert failed["t"] == "error", failed
            assert ("pyarrow" in failed["message"]) if broken == "pyarrow missing" else ("table" in failed["message"])
            assert client.value("demo_tasks:add", 2, 3) == 5  # the same connection carries on
        finally:
            client.close()
