"""Worker side of ``@skyward/plugin-torch``: one ``torch.distributed`` process group per worker.

``around_app`` runs on a worker's first task: it exports the variables of torch's ``env://``
rendezvous from the pool's topology and joins the process group; leaving it destroys the group.
torch is imported there, not at module import, so a worker without torch fails its first task with
a clear error instead of failing to start.
"""

from __future__ import annotations

import contextlib
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
    if backend == "nccl" and torch.cuda.is_available() and info.worker < torch.cuda.device_count():
        torch.cuda.set_device(info.worker)
    owned = False
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
        owned = True
    try:
        yield
    finally:
        if owned and dist.is_initialized():
            dist.destroy_process_group()


def around_app(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None]:
    """Joins the pool-wide process group (``config["backend"]``, or nccl/gloo by CUDA availability)."""
    backend = config.get("backend")
    return _process_group(info, backend if isinstance(backend, str) else None)
