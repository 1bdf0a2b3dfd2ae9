"""A worker entrypoint for profiling: runs the Skyward worker under cProfile (its event-loop thread).

``pnpm bench --profile-worker DIR`` starts the 2-node pool's workers with this file as their
entrypoint (through a launcher plugin) instead of ``skyward_worker.py``; when a worker stops, its
profile is written to ``DIR/worker-<node>-<pid>.prof``. Read one with
``python3 -m pstats DIR/worker-0-….prof`` (``sort tottime``, ``stats 25``). Tasks that run in the
executor's threads are not in it; the protocol, dispatch and event loop are.
"""

import cProfile
import os
import sys

from skyward import worker


def main() -> None:
    directory = os.environ["SKYWARD_BENCH_PROFILE_DIR"]
    node = sys.argv[sys.argv.index("--node") + 1] if "--node" in sys.argv else "x"
    serve = worker.serve

    async def profiled(options, token):
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            return await serve(options, token)
        finally:
            profiler.disable()
            os.makedirs(directory, exist_ok=True)
            profiler.dump_stats(os.path.join(directory, f"worker-{node}-{os.getpid()}.prof"))

    worker.serve = profiled
    worker.main()


if __name__ == "__main__":
    main()
