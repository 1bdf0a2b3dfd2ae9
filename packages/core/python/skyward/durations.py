"""Readable durations, as ``sky.time``: every helper returns a number of seconds (a float)."""

from __future__ import annotations


def milliseconds(n: float) -> float:
    """``n`` milliseconds, in seconds."""
    return float(n) / 1000.0


def seconds(n: float) -> float:
    """``n`` seconds."""
    return float(n)


def minutes(n: float) -> float:
    """``n`` minutes, in seconds."""
    return float(n) * 60.0


def hours(n: float) -> float:
    """``n`` hours, in seconds."""
    return float(n) * 3600.0


def days(n: float) -> float:
    """``n`` days, in seconds."""
    return float(n) * 86400.0


__all__ = ["milliseconds", "seconds", "minutes", "hours", "days"]
