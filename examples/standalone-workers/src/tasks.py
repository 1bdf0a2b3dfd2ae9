"""A self-contained chunk of work for the standalone-workers example."""

import hashlib

import skyward as sky


def hash_chunk(chunk_id: int, items: int) -> dict:
    """Hashes ``items`` strings and sums the first 32 bits of each digest."""
    total = 0
    for i in range(items):
        digest = hashlib.sha256(f"chunk-{chunk_id}-item-{i}".encode()).hexdigest()
        total += int(digest[:8], 16)
    return {"chunk_id": chunk_id, "node": sky.instance_info().node, "total": total}
