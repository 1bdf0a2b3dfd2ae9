"""Values a task returns that have no wire form of their own reach the client as objects, or as a
serialisation error naming them; none leaves the task without an answer."""

from __future__ import annotations

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
