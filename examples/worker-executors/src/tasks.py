"""A CPU-bound, pure-Python task for the worker-executors example."""

import os
import time


def count_primes(start: int, stop: int) -> dict:
    """Counts the primes in [start, stop) by trial division: pure Python, holding the GIL throughout."""
    began = time.perf_counter()
    count = 0
    for n in range(max(start, 2), stop):
        divisor = 2
        while divisor * divisor <= n:
            if n % divisor == 0:
                break
            divisor += 1
        else:
            count += 1
    return {"count": count, "pid": os.getpid(), "seconds": time.perf_counter() - began}
