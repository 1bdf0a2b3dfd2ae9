"""The Python half of the quickstart: plain functions that the TypeScript pool calls."""

import random

import skyward as sky


def count_hits(samples: int, seed: int) -> dict:
    """Throws darts at the unit square and counts those inside the quarter circle.

    Every node takes its own share of the sample indices (``sky.shard``) and its own random
    stream, seeded from ``seed`` and the node's index, so a run is reproducible.
    """
    info = sky.instance_info()
    mine = sky.shard(range(samples))
    rng = random.Random(seed * 1_000 + info.node)
    hits = 0
    for _ in mine:
        x, y = rng.random(), rng.random()
        if x * x + y * y <= 1.0:
            hits += 1
    return {"node": info.node, "samples": len(mine), "hits": hits}


def collatz_steps(n: int) -> int:
    """How many steps the Collatz sequence takes from ``n`` down to 1."""
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def fibonacci(count: int):
    """A generator: its items stream back to TypeScript one by one, as they are produced."""
    a, b = 0, 1
    for _ in range(count):
        yield a
        a, b = b, a + b
