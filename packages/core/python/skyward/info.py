"""Where a task runs: the cluster description a worker receives in the ``cluster`` message."""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping


@dataclass(frozen=True)
class PeerInfo:
    """One node of the pool."""

    node: int
    private_ip: str
    public_ip: str | None = None


@dataclass(frozen=True)
class AcceleratorInfo:
    """The accelerators of a node."""

    type: str
    count: float = 1
    memory_gb: float | None = None
    is_trainium: bool = False


@dataclass(frozen=True)
class NetworkInfo:
    """The node's main network interface."""

    interface: str
    bandwidth_gbps: float | None = None


@dataclass(frozen=True)
class InstanceInfo:
    """This worker's place in the cluster, as returned by ``sky.instance_info()``."""

    node: int
    worker: int = 0
    total_nodes: int = 1
    workers_per_node: int = 1
    accelerators: float = 0
    total_accelerators: float = 0
    head_addr: str = "127.0.0.1"
    head_port: int = 0
    job_id: str = ""
    peers: list[PeerInfo] = field(default_factory=list)
    accelerator: AcceleratorInfo | None = None
    network: NetworkInfo | None = None

    @property
    def global_worker_index(self) -> int:
        return self.node * self.workers_per_node + self.worker

    @property
    def total_workers(self) -> int:
        return self.total_nodes * self.workers_per_node

    @property
    def is_head(self) -> bool:
        return self.global_worker_index == 0

    @property
    def hostname(self) -> str:
        return socket.gethostname()

    def model_dump(self) -> dict[str, Any]:
        """The fields and computed properties as a plain dict (the reference is a Pydantic model)."""
        data = asdict(self)
        data.update(
            global_worker_index=self.global_worker_index,
            total_workers=self.total_workers,
            is_head=self.is_head,
            hostname=self.hostname,
        )
        return data

    def for_worker(self, worker: int) -> InstanceInfo:
        return self if worker == self.worker else replace(self, worker=worker)


def _number(value: Any, default: float) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return default


def instance_info_from_cluster(message: Mapping[str, Any]) -> InstanceInfo:
    """Build the node-level ``InstanceInfo`` (worker 0) from a ``cluster`` message."""
    total_nodes = int(message.get("total_nodes") or 1)
    accelerators = _number(message.get("accelerators"), 0)
    peers = [
        PeerInfo(
            node=int(peer.get("node", index)),
            private_ip=str(peer.get("private_ip") or ""),
            public_ip=peer.get("public_ip"),
        )
        for index, peer in enumerate(message.get("peers") or [])
        if isinstance(peer, Mapping)
    ]
    accelerator_data = message.get("accelerator")
    accelerator = None
    if isinstance(accelerator_data, Mapping):
        accelerator = AcceleratorInfo(
            type=str(accelerator_data.get("type") or ""),
            count=_number(accelerator_data.get("count"), 1),
            memory_gb=accelerator_data.get("memory_gb"),
            is_trainium=bool(accelerator_data.get("is_trainium", False)),
        )
    network_data = message.get("network")
    network = None
    if isinstance(network_data, Mapping):
        network = NetworkInfo(
            interface=str(network_data.get("interface") or ""),
            bandwidth_gbps=network_data.get("bandwidth_gbps"),
        )
    return InstanceInfo(
        node=int(message.get("node") or 0),
        worker=0,
        total_nodes=total_nodes,
        workers_per_node=max(1, int(message.get("workers_per_node") or 1)),
        accelerators=accelerators,
        total_accelerators=_number(message.get("total_accelerators"), accelerators * total_nodes),
        head_addr=str(message.get("head_addr") or "127.0.0.1"),
        head_port=int(message.get("head_port") or 0),
        job_id=str(message.get("job_id") or ""),
        peers=peers,
        accelerator=accelerator,
        network=network,
    )
