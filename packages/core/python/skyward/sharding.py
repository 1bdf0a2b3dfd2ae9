"""``sky.shard``: split data so every node gets a disjoint slice, keeping the data's type."""

from __future__ import annotations

import random
from typing import Any

from .context import instance_info


def _module_of(value: object) -> str:
    return type(value).__module__.split(".", 1)[0]


def _length(value: Any, position: int) -> int:
    try:
        return len(value)
    except TypeError:
        raise TypeError(
            f"shard() argument {position} of type {type(value).__name__} has no length; "
            "pass a sequence, an array or a tensor"
        ) from None


def _take(value: Any, indices: list[int], contiguous: tuple[int, int] | None) -> Any:
    """``value`` restricted to ``indices`` (``contiguous`` = the same as a start:stop slice)."""
    if contiguous is not None:
        start, stop = contiguous
        try:
            return value[start:stop]
        except TypeError:
            pass  # a sequence without slice support: fall through to indexing
    if _module_of(value) in ("numpy", "torch", "jax", "jaxlib", "cupy"):
        return value[indices]  # fancy indexing keeps the array type (and device)
    if isinstance(value, list):
        return [value[i] for i in indices]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(value[i] for i in indices)
    if isinstance(value, str):
        return "".join(value[i] for i in indices)
    if isinstance(value, (bytes, bytearray)):
        return type(value)(value[i] for i in indices)
    items = [value[i] for i in indices]
    if isinstance(value, range):
        return items
    try:
        return type(value)(items)
    except Exception:
        return items


def _bounds(length: int, node: int, total_nodes: int, drop_last: bool) -> tuple[int, int]:
    if drop_last:
        per_node = length // total_nodes
        return node * per_node, (node + 1) * per_node
    base, extra = divmod(length, total_nodes)
    start = node * base + min(node, extra)
    return start, start + base + (1 if node < extra else 0)


def shard(
    *data: Any,
    shuffle: bool = False,
    seed: int = 0,
    drop_last: bool = False,
    node: int | None = None,
    total_nodes: int | None = None,
) -> Any:
    """This node's slice of ``data``, of the same type as ``data``.

    Nodes get contiguous blocks of the (optionally shuffled) index range; the sizes differ by at
    most one, or are all equal with ``drop_last=True`` (the tail is dropped). ``shuffle`` uses
    ``seed`` so every node computes the same permutation: the slices stay disjoint and together
    cover everything. Several arguments are split with the same indices and returned as a tuple.
    ``node``/``total_nodes`` override the worker's place (and make ``shard`` usable anywhere).
    """
    if not data:
        raise TypeError("shard() needs at least one sequence, array or tensor")
    if node is None or total_nodes is None:
        info = instance_info()
        node = info.node if node is None else node
        total_nodes = info.total_nodes if total_nodes is None else total_nodes
    if total_nodes < 1:
        raise ValueError(f"total_nodes must be at least 1, got {total_nodes}")
    if not 0 <= node < total_nodes:
        raise ValueError(f"node must be in 0..{total_nodes - 1}, got {node}")

    lengths = [_length(value, position) for position, value in enumerate(data)]
    length = lengths[0]
    if any(other != length for other in lengths):
        raise ValueError(f"shard() arguments must have the same length, got {lengths}")

    start, stop = _bounds(length, node, total_nodes, drop_last)
    if shuffle:
        order = list(range(length))
        random.Random(seed).shuffle(order)
        indices = order[start:stop]
        contiguous = None
    else:
        indices = list(range(start, stop))
        contiguous = (start, stop)
    shards = tuple(_take(value, indices, contiguous) for value in data)
    return shards[0] if len(shards) == 1 else shards


__all__ = ["shard"]
