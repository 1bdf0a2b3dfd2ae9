"""Tasks for the streaming example: generators stream out, iterator arguments stream in."""

from collections import deque
from typing import Iterator


def fibonacci(count: int) -> Iterator[int]:
    """Output streaming: each yielded item is sent back as soon as it is produced."""
    a, b = 0, 1
    for _ in range(count):
        yield a
        a, b = b, a + b


def sum_until(numbers: Iterator[int], limit: int) -> dict:
    """Input streaming: reads items only as it needs them, and stops early."""
    total = 0
    count = 0
    for number in numbers:
        total += number
        count += 1
        if total > limit:
            break
    return {"count": count, "total": total}


def moving_average(values: Iterator[float], window: int = 3) -> Iterator[float]:
    """Both ways: values stream in, averages stream out."""
    recent: deque[float] = deque(maxlen=window)
    for value in values:
        recent.append(value)
        yield sum(recent) / len(recent)
