"""Ray on this machine, for comparison: ``python peer_ray.py --calls 2000 --in-flight 1000 --batches 10``.

Starts a local Ray (``ray.init()`` with 2 CPUs: two task slots, like a 2-node pool of concurrency 1),
then times a no-op remote function: one call at a time (``ray.get(f.remote())``) for latency, and
batches of ``--in-flight`` calls (``ray.get([f.remote() for _ in range(n)])``) for throughput.
Prints one JSON object; ``startup_ms`` is how long ``ray.init()`` took.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from bench_stats import latency_summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--cpus", type=int, default=2)
    options = parser.parse_args()

    started = time.perf_counter()
    import ray

    ray.init(
        num_cpus=options.cpus,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        configure_logging=True,
    )
    startup_ms = (time.perf_counter() - started) * 1000

    @ray.remote
    def noop():
        return None

    try:
        ray.get([noop.remote() for _ in range(options.in_flight)])  # warm-up: workers started
        for _ in range(300):
            ray.get(noop.remote())
        samples = []
        for _ in range(options.calls):
            began = time.perf_counter()
            ray.get(noop.remote())
            samples.append((time.perf_counter() - began) * 1000)
        rates = []
        for _ in range(options.batches):
            began = time.perf_counter()
            ray.get([noop.remote() for _ in range(options.in_flight)])
            rates.append(options.in_flight / (time.perf_counter() - began))
        total_tasks = options.in_flight * options.batches
        print(
            json.dumps(
                {
                    "version": ray.__version__,
                    "startup_ms": startup_ms,
                    "latency_ms": latency_summary(samples),
                    "tasks_per_s": {
                        "overall": total_tasks / sum(options.in_flight / rate for rate in rates),
                        "median_batch": statistics.median(rates),
                        "tasks": total_tasks,
                        "in_flight": options.in_flight,
                    },
                    "cpus": options.cpus,
                    "pid": os.getpid(),
                }
            )
        )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
