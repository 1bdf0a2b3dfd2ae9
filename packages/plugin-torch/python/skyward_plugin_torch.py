"""Worker side of ``@skyward/plugin-torch``: one ``torch.distributed`` process group per worker.

``around_app`` runs on a worker's first task: it exports the variables of torch's ``env://``
rendezvous from the pool's topology and joins the process group; leaving it destroys the group.
It runs in the node's one worker process, so that process is the node's rank (``RANK`` = node,
``WORLD_SIZE`` = nodes) even when a plugin runs several workers in it (MIG under the thread
executor: ``workers_per_node`` instances, one process).
torch is imported there, not at module import, so a worker without torch fails its first task with
a clear error instead of failing to start.

With one worker per accelerator (``config["per_worker"]``) each worker is a process-executor child
pinned to its device: ``around_process`` joins the group there instead, as rank
``info.global_worker_index`` of ``info.total_workers``, and ``around_app`` (the node's worker
process, which runs no task) does nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Iterator, Mapping

from skyward.network import gloo_interface


def rendezvous_env(info: Any) -> dict[str, str]:
    """The ``env://`` variables for this worker: its ranks and where rank 0 listens."""
    return {
        "MASTER_ADDR": str(info.head_addr),
        "MASTER_PORT": str(info.head_port),
        "WORLD_SIZE": str(info.total_workers),
        "RANK": str(info.global_worker_index),
        "LOCAL_RANK": str(info.worker),
        "LOCAL_WORLD_SIZE": str(info.workers_per_node),
        "NODE_RANK": str(info.node),
    }


def node_rank(info: Any) -> Any:
    """``info`` as the node's one rank: worker 0 of one worker per node (a world of the nodes)."""
    return dataclasses.replace(info, worker=0, workers_per_node=1)


def _pin_gloo_interface(info: Any) -> None:
    # gloo binds to the address the host name resolves to, which on a multi-homed machine (or in a
    # network namespace) need not be the one the other nodes reach: use the node's private address.
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return
    interface = gloo_interface(info)
    if interface:
        os.environ["GLOO_SOCKET_IFNAME"] = interface


@contextlib.contextmanager
def _process_group(info: Any, backend: str | None) -> Iterator[None]:
    import torch
    import torch.distributed as dist

    os.environ.update(rendezvous_env(info))
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "gloo":
        _pin_gloo_interface(info)
    if backend == "nccl" and torch.cuda.is_available():
        # Pinned to one device (one worker per accelerator, MIG), the worker's device is cuda:0;
        # seeing all of the node's devices, it is the one of its local rank.
        count = torch.cuda.device_count()
        torch.cuda.set_device(info.worker if info.worker < count else 0)
    owned = False
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
        owned = True
    try:
        yield
    finally:
        if owned and dist.is_initialized():
            dist.destroy_process_group()


def _backend(config: Mapping[str, Any]) -> str | None:
    backend = config.get("backend")
    return backend if isinstance(backend, str) else None


def _nested_process() -> bool:
    """A child of the worker's nested-task executor: it runs subtasks and is no rank of its own."""
    from skyward.context import runtime

    return bool(getattr(runtime, "nested", False))


def around_app(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None] | None:
    """Joins the pool-wide process group (``config["backend"]``, or nccl/gloo by CUDA availability)."""
    if config.get("per_worker") is True:
        return None  # each worker process (around_process) is a rank of its own
    return _process_group(node_rank(info), _backend(config))


def around_process(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None] | None:
    """With one worker per accelerator: joins the group as this worker's global rank."""
    if config.get("per_worker") is not True or _nested_process():
        return None
    return _process_group(info, _backend(config))
