"""Dask distributed on this machine, for comparison: ``python peer_dask.py --calls 2000 --tasks 10000``.

Starts a ``LocalCluster`` of 2 worker processes with 1 thread each (like a 2-node pool of
concurrency 1) and a ``Client``, then times a no-op: ``client.submit(noop).result()`` one call at a
time for latency, and ``client.gather(client.map(noop, range(n)))`` for throughput. Prints one JSON
object; ``startup_ms`` is how long the cluster and client took to come up.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
import warnings

from bench_stats import latency_summary


def noop(_=None):
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.getLogger("distributed").setLevel(logging.ERROR)

    started = time.perf_counter()
    import dask
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
    )
    client = Client(cluster)
    client.wait_for_workers(2)
    startup_ms = (time.perf_counter() - started) * 1000
    try:
        client.gather(client.map(noop, range(1000), pure=False))  # warm-up
        for _ in range(300):
            client.submit(noop, pure=False).result()
        samples = []
        for _ in range(options.calls):
            began = time.perf_counter()
            client.submit(noop, pure=False).result()
            samples.append((time.perf_counter() - began) * 1000)
        rates = []
        for _ in range(options.runs):
            began = time.perf_counter()
            client.gather(client.map(noop, range(options.tasks), pure=False))
            rates.append(options.tasks / (time.perf_counter() - began))
        print(
            json.dumps(
                {
                    "version": dask.__version__,
                    "startup_ms": startup_ms,
                    "latency_ms": latency_summary(samples),
                    "tasks_per_s": {"median": statistics.median(rates), "runs": rates, "tasks": options.tasks},
                }
            )
        )
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
