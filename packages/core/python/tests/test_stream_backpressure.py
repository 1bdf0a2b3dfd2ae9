"""A stream task faster than its client: the worker does not buffer its items without bound — the
task waits while its connection holds more unsent bytes than the limit — and nothing is lost."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from worker_client import WorkerProcess, connect  # noqa: E402

ITEMS = 400
ITEM_BYTES = 512 * 1024  # 200 MiB in all


def settled_progress(progress: Path) -> int:
    """How many items the task had yielded once that stopped changing (it may never: then the last)."""
    readings = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        time.sleep(0.5)
        text = progress.read_text() if progress.exists() else ""
        readings.append(int(text) if text else -1)
        if len(readings) >= 4 and readings[-1] >= 0 and len(set(readings[-4:])) == 1:
            break
    return readings[-1]


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_stream_task_faster_than_its_client_waits_for_it_and_nothing_is_lost(tmp_path: Path, executor: str) -> None:
    progress = tmp_path / "progress"
    with WorkerProcess("--executor", executor) as worker:
        client = connect(worker)
        client.submit("flood", "output_tasks:flood", ITEMS, ITEM_BYTES, str(progress), stream=True)
        # The client reads nothing meanwhile: the task stops well short of its 200 MiB.
        produced = settled_progress(progress)
        assert 0 <= produced < ITEMS // 2, f"the task ran ahead of its client by {produced} items of {ITEMS}"
        end = client.terminal("flood", timeout=120)
    assert end["t"] == "end", end
    items = [message for message in client.by_id["flood"] if message["t"] == "item"]
    assert [message["seq"] for message in items] == list(range(ITEMS))
    assert all(bytes(message["value"]) == bytes([seq % 256]) * ITEM_BYTES for seq, message in enumerate(items))
