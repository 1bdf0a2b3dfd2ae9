"""joblib fan-out: ``Parallel`` inside a task, its items spread over every task slot of the pool.

Each item waits ``seconds`` (standing in for I/O: a download, an API call), so the ideal wall time of
``items`` items on ``slots`` task slots is ``items * seconds / slots``; the efficiency reached is that
ideal divided by the wall time measured. What it loses is the round trip through the client that
every batch makes as a nested task, and the slot the calling task itself holds.
"""

from __future__ import annotations

import time
from typing import Any, Dict

import joblib
from joblib import Parallel, delayed

import skyward as sky


def wait_and_report(item: int, seconds: float) -> Dict[str, int]:
    """One item of work: wait, and say where it ran."""
    time.sleep(seconds)
    return {"item": item, "node": sky.instance_info().node}


def fan_out(items: int, seconds: float) -> Dict[str, Any]:
    """``Parallel(n_jobs=-1)`` over ``items`` items; the wall time, and where the items ran."""
    slots = joblib.effective_n_jobs(-1)
    started = time.perf_counter()
    results = Parallel(n_jobs=-1)(delayed(wait_and_report)(i, seconds) for i in range(items))
    wall = time.perf_counter() - started
    per_node: Dict[int, int] = {}
    for result in results:
        per_node[result["node"]] = per_node.get(result["node"], 0) + 1
    return {
        "slots": slots,
        "wall": wall,
        "ideal": items * seconds / slots,
        "in_order": [result["item"] for result in results] == list(range(items)),
        "items_per_node": [per_node.get(node, 0) for node in range(sky.instance_info().total_nodes)],
    }
