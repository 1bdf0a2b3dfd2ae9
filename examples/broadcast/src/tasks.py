"""Tasks for the broadcast example: each runs once on every node of the pool."""

import skyward as sky


@sky.stdout(only="head")
def describe_node() -> dict:
    """Where this call runs. Every node runs it, but only the head's print reaches the console."""
    info = sky.instance_info()
    print(f"hello from the head: node {info.node} of {info.total_nodes}, head at {info.head_addr}")
    return {
        "node": info.node,
        "total_nodes": info.total_nodes,
        "is_head": info.is_head,
        "head_addr": info.head_addr,
        "peers": [peer.private_ip for peer in info.peers],
    }


def sum_partition(data: list[int]) -> dict:
    """Sums this node's share of ``data``."""
    mine = sky.shard(data)
    return {"node": sky.instance_info().node, "size": len(mine), "sum": sum(mine)}
