"""Worker side of ``@skyward/plugin-jax``: ``jax.distributed`` across the pool's nodes.

``around_app`` runs on a worker's first task: it exports the ``JAX_*`` variables from the pool's
topology and calls ``jax.distributed.initialize`` with them; leaving it shuts the runtime down.
Process 0 (the head) serves the coordinator at the head's address, one port above the pool's head
port (which the torch plugin's rendezvous uses).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Mapping

#: The coordinator listens this many ports above ``head_port``.
COORDINATOR_PORT_OFFSET = 1


def local_device_count(info: Any) -> int:
    """The accelerators of one worker: the node's, split over its workers; at least 1 (the CPU)."""
    per_node = int(info.accelerators or 0)
    return max(1, per_node // max(1, info.workers_per_node))


def distributed_env(info: Any) -> dict[str, str]:
    """The ``JAX_*`` variables for this worker."""
    return {
        "JAX_COORDINATOR_ADDRESS": f"{info.head_addr}:{int(info.head_port) + COORDINATOR_PORT_OFFSET}",
        "JAX_NUM_PROCESSES": str(info.total_workers),
        "JAX_PROCESS_ID": str(info.global_worker_index),
        "JAX_LOCAL_DEVICE_COUNT": str(local_device_count(info)),
    }


def _is_initialized(jax: Any) -> bool:
    check = getattr(jax.distributed, "is_initialized", None)
    if callable(check):
        return bool(check())
    from jax._src import distributed as state  # older JAX: no public check

    return getattr(state.global_state, "client", None) is not None


@contextlib.contextmanager
def _distributed(info: Any) -> Iterator[None]:
    env = distributed_env(info)
    os.environ.update(env)
    import jax

    owned = False
    if not _is_initialized(jax):
        jax.distributed.initialize(
            coordinator_address=env["JAX_COORDINATOR_ADDRESS"],
            num_processes=int(env["JAX_NUM_PROCESSES"]),
            process_id=int(env["JAX_PROCESS_ID"]),
        )
        owned = True
    try:
        yield
    finally:
        if owned:
            jax.distributed.shutdown()


def around_app(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None]:
    """Initialises ``jax.distributed`` for the whole pool (every worker one JAX process)."""
    return _distributed(info)
