"""Worker side of ``@skyward/plugin-torch``: one ``torch.distributed`` process group per worker.

``around_app`` runs on a worker's first task: it exports the variables of torch's ``env://``
rendezvous from the pool's topology and joins the process group; leaving it destroys the group.
torch is imported there, not at module import, so a worker without torch fails its first task with
a clear error instead of failing to start.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
from typing import Any, Iterator, Mapping

_SIOCGIFADDR = 0x8915


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


def _interface_address(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            packed = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def interface_for(address: str) -> str | None:
    """The name of the network interface holding the IPv4 ``address`` (Linux), if any."""
    try:
        interfaces = socket.if_nameindex()
    except OSError:
        return None
    for _, name in interfaces:
        if _interface_address(name) == address:
            return name
    return None


def _own_address(info: Any) -> str | None:
    for peer in info.peers:
        if peer.node == info.node and peer.private_ip:
            return str(peer.private_ip)
    return None


def _pin_gloo_interface(info: Any) -> None:
    # gloo binds to the address the host name resolves to, which on a multi-homed machine (or in a
    # network namespace) need not be the one the other nodes reach: use the node's private address.
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return
    interface = info.network.interface if info.network is not None and info.network.interface else None
    if interface is None:
        address = _own_address(info)
        interface = interface_for(address) if address else None
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
