"""Slow tasks for the parallel-execution example: each sleeps, standing in for real work."""

import time


def slow_square(x: int, seconds: float) -> int:
    time.sleep(seconds)
    return x * x


def slow_sum(numbers: list[int], seconds: float) -> int:
    time.sleep(seconds)
    return sum(numbers)


def slow_factorial(n: int, seconds: float) -> int:
    time.sleep(seconds)
    result = 1
    for i in range(2, n + 1):
        result *= i
    return result


def timed_sleep(seconds: float) -> list[float]:
    """Sleeps and says when it ran, as [start, end] wall-clock times."""
    start = time.time()
    time.sleep(seconds)
    return [start, time.time()]
