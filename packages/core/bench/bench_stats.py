"""Summaries shared by the benchmark's Python helpers (the same definitions as ``stats.ts``)."""

from __future__ import annotations

import statistics
from typing import Dict, List


def percentile(samples: List[float], p: float) -> float:
    """The nearest-rank percentile ``p`` (0-100) of ``samples``."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), -(-len(ordered) * p // 100)))
    return ordered[int(rank) - 1]


def latency_summary(samples_ms: List[float]) -> Dict[str, float]:
    """p50, p99 and mean of round trips given in milliseconds, and how many there were."""
    return {
        "p50": percentile(samples_ms, 50),
        "p99": percentile(samples_ms, 99),
        "mean": statistics.fmean(samples_ms),
        "calls": len(samples_ms),
    }
