"""Worker side of ``@skyward/plugin-jax``: ``jax.distributed`` across the pool's nodes.

``around_app`` runs on a worker's first task: it exports the ``JAX_*`` variables from the pool's
topology and calls ``jax.distributed.initialize`` with them; leaving it shuts the runtime down.
Process 0 (the head) serves the coordinator at the head's address, one port above the pool's head
port (which the torch plugin's rendezvous uses). It runs in the node's one worker process, so that
process is the node's JAX process (``JAX_PROCESS_ID`` = node, ``JAX_NUM_PROCESSES`` = nodes) even
when a plugin runs several workers in it (MIG under the thread executor).

With one process per accelerator (``config["per_worker"]``) each process-executor child, pinned to
its device, is one JAX process (``info.global_worker_index`` of ``info.total_workers``):
``around_process`` initialises there, and ``around_app`` (the node's worker process, which runs no
task) does nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Iterator, Mapping

from skyward.network import own_address

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


def node_process(info: Any) -> Any:
    """``info`` as the node's one JAX process: worker 0 of one worker per node."""
    return dataclasses.replace(info, worker=0, workers_per_node=1)


def _is_initialized(jax: Any) -> bool:
    check = getattr(jax.distributed, "is_initialized", None)
    if callable(check):
        return bool(check())
    from jax._src import distributed as state  # older JAX: no public check

    return getattr(state.global_state, "client", None) is not None


def _pin_gloo_address(info: Any) -> str | None:
    """Makes JAX's CPU collectives (gloo) listen on this node's private address.

    Left alone, gloo listens on the address the host name resolves to, which need not be one the
    other nodes reach: Debian maps the host name to 127.0.1.1, containers and network namespaces to
    127.0.0.1 (seen on the test bed: "connecting ... remote=[127.0.0.1]"). JAX has no setting for it,
    so the CPU backend's factory is registered again, building its gloo collectives with the node's
    address. Must run after ``jax.distributed.initialize`` and before the first backend is created;
    does nothing (returns None) with one process, without a known address, with other collectives
    (MPI), or when this JAX's internals are not the expected ones.
    """
    address = own_address(info)
    if not address or int(info.total_workers) <= 1:
        return None
    try:
        from jax._src import config, distributed, xla_bridge
        from jax._src.lib import _jax
    except ImportError:
        return None
    make_collectives = getattr(_jax, "make_gloo_tcp_collectives", None)
    setting = getattr(config, "cpu_collectives_implementation", None)
    if make_collectives is None or setting is None or setting.value != "gloo":
        return None
    if xla_bridge.backends_are_initialized():
        return None

    def make_cpu_client() -> Any:
        collectives = make_collectives(distributed_client=distributed.global_state.client, hostname=address)
        return xla_bridge.make_cpu_client(collectives=collectives)

    xla_bridge.register_backend_factory("cpu", make_cpu_client, priority=0, fail_quietly=False)
    return address


@contextlib.contextmanager
def _distributed(info: Any) -> Iterator[None]:
    env = distributed_env(info)
    os.environ.update(env)
    import jax

    owned = False
    if not _is_initialized(jax):
        _check_can_initialize()
        jax.distributed.initialize(
            coordinator_address=env["JAX_COORDINATOR_ADDRESS"],
            num_processes=int(env["JAX_NUM_PROCESSES"]),
            process_id=int(env["JAX_PROCESS_ID"]),
        )
        owned = True
        _pin_gloo_address(info)
    try:
        yield
    finally:
        if owned:
            jax.distributed.shutdown()


def _check_can_initialize() -> None:
    """Raises a clear error where ``jax.distributed`` cannot be initialised (again) in this process.

    JAX initialises its distributed runtime only before its backends exist: once a task has run a
    computation, a process cannot leave the runtime and join a new one (JAX 0.10 raises "must be
    called before any JAX calls that might initialise the XLA backend"). That is what a pool asks
    of its workers when its membership changes (a node replaced, the pool resized).
    """
    try:
        from jax._src import xla_bridge
    except ImportError:  # another JAX layout: initialize says what it says
        return
    if xla_bridge.backends_are_initialized():
        raise RuntimeError(
            "jax cannot form jax.distributed again in this worker: the pool's nodes changed (a node was "
            "replaced, or the pool resized) and JAX initialises its distributed runtime only before its "
            "first computation, which this process has run. Close the pool and start a new one to run "
            "on the new nodes."
        )


def _nested_process() -> bool:
    """A child of the worker's nested-task executor: it runs subtasks and is no rank of its own."""
    from skyward.context import runtime

    return bool(getattr(runtime, "nested", False))


def around_app(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None] | None:
    """Initialises ``jax.distributed`` for the whole pool (every worker one JAX process)."""
    if config.get("per_worker") is True:
        return None  # each worker process (around_process) is a JAX process of its own
    return _distributed(node_process(info))


def around_process(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None] | None:
    """With one process per accelerator: initialises ``jax.distributed`` as this worker's process."""
    if config.get("per_worker") is not True or _nested_process():
        return None
    return _distributed(info)
