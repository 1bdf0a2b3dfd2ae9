"""Tasks for the data-sharding example: every node works on its own slice of the data."""

import skyward as sky


def striped_shard(data: list[int]) -> list[int]:
    """As in the Python project, node ``n`` of ``N`` gets ``data[n::N]``; sizes differ by at most one."""
    return sky.shard(data)


def train_on_shard(features: list[list[float]], labels: list[int], seed: int) -> dict:
    """Splits features and labels with the same shuffled indices, so rows stay paired.

    Every node shuffles with the same seed, so the slices are disjoint and cover the whole dataset.
    """
    x, y = sky.shard(features, labels, shuffle=True, seed=seed)
    positives = sum(y)
    return {
        "node": sky.instance_info().node,
        "size": len(x),
        "positive_rate": positives / len(y),
        "x": x,
        "y": y,
    }


def equal_shards(data: list[int]) -> int:
    """``drop_last=True`` gives every node an equal contiguous block, dropping the tail."""
    return len(sky.shard(data, drop_last=True))
