"""Where a task runs: the cluster description a worker receives in the ``cluster`` message."""

from __future__ import annotations

import json
import socket
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable, Iterator, Mapping


class _Readable:
    """Fields readable as attributes and as a mapping (``peer["private_ip"]``), as the Python
    project's pydantic model gives them as plain dicts."""

    def __getitem__(self, key: str) -> Any:
        if key in self._names():
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self._names() else default

    def keys(self) -> list[str]:
        return list(self._names())

    def values(self) -> list[Any]:
        return [getattr(self, name) for name in self._names()]

    def items(self) -> list[tuple[str, Any]]:
        return [(name, getattr(self, name)) for name in self._names()]

    def __contains__(self, key: object) -> bool:
        return key in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> tuple[str, ...]:
        return tuple(item.name for item in fields(self))  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping) and not isinstance(other, _Readable):
            return dict(self.items()) == dict(other)
        if type(other) is not type(self):
            return NotImplemented
        return self.items() == other.items()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, *self.values()))

    def __skyward_wire__(self) -> Any:
        """What crosses the wire when a task returns this: its fields as a plain dict."""
        dump = getattr(self, "model_dump", None)
        return dump() if callable(dump) else asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True, eq=False)
class PeerInfo(_Readable):
    """One node of the pool."""

    node: int
    private_ip: str
    public_ip: str | None = None


@dataclass(frozen=True, eq=False)
class AcceleratorInfo(_Readable):
    """The accelerators of a node."""

    type: str
    count: float = 1
    memory_gb: float | None = None
    is_trainium: bool = False


@dataclass(frozen=True, eq=False)
class NetworkInfo(_Readable):
    """The node's main network interface."""

    interface: str
    bandwidth_gbps: float | None = None


@dataclass(frozen=True, eq=False)
class InstanceInfo(_Readable):
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

    def model_dump_json(self, *, indent: int | None = None) -> str:
        """:meth:`model_dump` as JSON text."""
        return json.dumps(self.model_dump(), indent=indent)

    @classmethod
    def current(cls) -> InstanceInfo:
        """This worker's ``InstanceInfo`` (``sky.instance_info()``); raises outside a task."""
        if _current is None:
            raise RuntimeError("InstanceInfo.current() is only available inside a task")
        return _current()

    def __reduce__(self) -> Any:
        # Pickled by value (a task may return it): rebuilt from its dumped fields.
        return (_rebuild, (self.model_dump(),))

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


#: ``sky.instance_info``, set by :mod:`skyward.context` (which imports this module).
_current: Callable[[], InstanceInfo] | None = None


def set_current_provider(provider: Callable[[], InstanceInfo]) -> None:
    """Where :meth:`InstanceInfo.current` gets this worker's info from."""
    global _current
    _current = provider


def _rebuild(data: Mapping[str, Any]) -> InstanceInfo:
    return instance_info_from_cluster(data).for_worker(int(data.get("worker") or 0))
