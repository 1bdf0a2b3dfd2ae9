"""Worker side of ``@skyward/plugin-accelerate``: gloo on the node's private address.

The worker runs under ``accelerate launch``, which sets up the environment ``PartialState()`` and
``Accelerator()`` read; they create the process group (gloo on CPU nodes) when the task's code first
asks for them. gloo listens on the address the host name resolves to, which need not be one the
other nodes reach (Debian maps the host name to 127.0.1.1, containers and network namespaces to
127.0.0.1). ``around_app`` runs before the worker's first task and, unless ``GLOO_SOCKET_IFNAME`` is
already set, sets it to the interface holding the node's private address, as the torch plugin does.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
from typing import Any, Iterator, Mapping

_SIOCGIFADDR = 0x8915


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


def gloo_interface(info: Any) -> str | None:
    """The interface gloo should use on this node: the pool's, else the one with the node's private address."""
    if info.network is not None and info.network.interface:
        return str(info.network.interface)
    for peer in info.peers:
        if peer.node == info.node and peer.private_ip:
            return interface_for(str(peer.private_ip))
    return None


@contextlib.contextmanager
def _pinned(info: Any) -> Iterator[None]:
    if int(info.total_workers) > 1 and not os.environ.get("GLOO_SOCKET_IFNAME"):
        interface = gloo_interface(info)
        if interface:
            os.environ["GLOO_SOCKET_IFNAME"] = interface
    yield


def around_app(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None]:
    """Points gloo at the node's private interface (``GLOO_SOCKET_IFNAME``) for a pool of several nodes."""
    return _pinned(info)
