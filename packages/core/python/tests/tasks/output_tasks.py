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
