"""``sky.shard``: split data so every node gets a disjoint slice, keeping the data's type."""

from __future__ import annotations

import importlib
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


def _take(value: Any, indices: list[int], same: slice | None) -> Any:
    """``value`` restricted to ``indices`` (``same`` = a slice that selects the same elements)."""
    if isinstance(value, str):
        return [value[i] for i in indices]  # as the Python project: a string becomes its characters
    if _module_of(value) == "pandas" and hasattr(value, "iloc"):
        # By position: value[i] is a DataFrame's column i, a Series's label i.
        return value.iloc[same if same is not None else indices]
    if same is not None:
        try:
            return value[same]
        except TypeError:
            pass  # a sequence without slice support: fall through to indexing
    module = _module_of(value)
    if module in ("numpy", "torch"):
        return value[indices]  # fancy indexing keeps the array type (and device)
    if module in ("jax", "jaxlib", "cupy"):
        # These refuse a list as an index (it reads as one index per dimension): an index array of
        # their own, on the value's device.
        numpy_like = importlib.import_module("cupy" if module == "cupy" else "jax.numpy")
        return value[numpy_like.asarray(indices)]
    if isinstance(value, list):
        return [value[i] for i in indices]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(value[i] for i in indices)
    if isinstance(value, (bytes, bytearray)):
        return type(value)(value[i] for i in indices)
    items = [value[i] for i in indices]
    if isinstance(value, range):
        return items
    try:
        return type(value)(items)
    except Exception:
        return items


def _indices(
    length: int, node: int, total_nodes: int, shuffle: bool, seed: int, drop_last: bool
) -> tuple[list[int], slice | None]:
    """This node's indices, and a slice selecting the same elements when there is one."""
    order = list(range(length))
    if shuffle:
        random.Random(seed).shuffle(order)
    if drop_last:
        per_node = length // total_nodes
        start, stop = node * per_node, (node + 1) * per_node
        return order[start:stop], (None if shuffle else slice(start, stop))
    return order[node::total_nodes], (None if shuffle else slice(node, None, total_nodes))


def shard(
    *data: Any,
    shuffle: bool = False,
    seed: int = 0,
    drop_last: bool = False,
    node: int | None = None,
    total_nodes: int | None = None,
) -> Any:
    """This node's slice of ``data``, of the same type as ``data`` (a string gives a list of characters).

    As in the Python project, nodes get every ``total_nodes``-th element of the (optionally shuffled)
    index range starting at their own index (``indices[node::total_nodes]``); with
    ``drop_last=True`` they get equal contiguous blocks and the tail is dropped. ``shuffle`` uses
    ``seed`` so every node computes the same permutation: the slices stay disjoint and together
    cover everything. Several arguments are split the same way and returned as a tuple; arguments of
    different lengths are each split on their own. With several workers per node (one per
    accelerator) the slices are per worker: rank ``global_worker_index`` of ``total_workers``.
    ``node``/``total_nodes`` override the worker's place (and make ``shard`` usable anywhere).
    """
    if not data:
        raise TypeError("shard() needs at least one sequence, array or tensor")
    if node is None and total_nodes is None:
        # Each worker is a rank of its own: with several per node (one per accelerator) the ranks
        # of one node must not all get that node's slice. With one per node this is the node's place.
        info = instance_info()
        node, total_nodes = info.global_worker_index, info.total_workers
    elif node is None or total_nodes is None:
        info = instance_info()
        node = info.node if node is None else node
        total_nodes = info.total_nodes if total_nodes is None else total_nodes
    if total_nodes < 1:
        raise ValueError(f"total_nodes must be at least 1, got {total_nodes}")
    if not 0 <= node < total_nodes:
        raise ValueError(f"node must be in 0..{total_nodes - 1}, got {node}")

    shards = []
    for position, value in enumerate(data):
        indices, same = _indices(_length(value, position), node, total_nodes, shuffle, seed, drop_last)
        shards.append(_take(value, indices, same))
    return shards[0] if len(shards) == 1 else tuple(shards)


__all__ = ["shard"]
