"""Worker side of the `timing` plugin: a `decorate` hook that times every task.

The pool imports this module on every worker (it is shipped with the pool, like `includes`) and wraps
each task function with `decorate`, first plugin outermost. `config` is what the TypeScript side gave
to `withWorker({ config })`.
"""

import functools
import time


def decorate(fn, config):
    label = config.get("label", "task")

    @functools.wraps(fn)
    def timed(*args, **kwargs):
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        elapsed = time.perf_counter() - start
        print(f"[{label}] {fn.__name__} took {elapsed * 1000:.1f} ms")
        return {"value": result, "seconds": elapsed, "label": label}

    return timed
