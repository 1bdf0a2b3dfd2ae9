"""``async def`` tasks under the output filters (the output tests run them)."""

from __future__ import annotations

import asyncio
import sys

import skyward as sky


@sky.stdout(only="head")
async def head_says(text):
    await asyncio.sleep(0)
    print(text)
    print("to stderr", file=sys.stderr)
    return "ok"


@sky.silent
async def quiet(text):
    await asyncio.sleep(0)
    print(text)
    print(text, file=sys.stderr)
    return "quiet"


@sky.stdout(only="head")
async def head_count(n):
    for i in range(n):
        await asyncio.sleep(0)
        print(f"line {i}")
        yield i


def bytes_in_pieces(text, size):
    """Writes ``text`` as UTF-8 through ``sys.stdout.buffer`` in pieces of ``size`` bytes, as a task
    forwarding a subprocess's output by chunks does."""
    data = text.encode("utf-8")
    for start in range(0, len(data), size):
        sys.stdout.buffer.write(data[start : start + size])
    return "ok"


def flood(count: int, size: int, progress: str):
    """``count`` items of ``size`` bytes as fast as they can be made, each a new block; how many it
    has yielded is written to the file ``progress`` (read by the test, which reads no items meanwhile)."""
    for index in range(count):
        with open(progress, "w") as out:
            out.write(str(index))
        yield bytes([index % 256]) * size
