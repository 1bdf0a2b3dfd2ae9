"""This node's network, as collective backends need it: its private address and the interface holding it.

    from skyward.network import gloo_interface

    os.environ.setdefault("GLOO_SOCKET_IFNAME", gloo_interface(info) or "")

gloo (torch, accelerate, JAX on CPU) listens on the address the host name resolves to, which need
not be one the other nodes reach: Debian maps the host name to 127.0.1.1, containers and network
namespaces to 127.0.0.1. The pool knows better: each node's private address is in ``info.peers``,
and a provider may name the node's interface in ``info.network``. Plugins' worker modules use these
helpers to point their collectives there.
"""

from __future__ import annotations

import fcntl
import socket
import struct
from typing import Any

__all__ = ["gloo_interface", "interface_for", "own_address"]

_SIOCGIFADDR = 0x8915


def _interface_address(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            packed = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None  # no IPv4 address on this interface
    return socket.inet_ntoa(packed[20:24])


def interface_for(address: str) -> str | None:
    """The name of the network interface holding the IPv4 ``address`` (Linux), or None if none does."""
    try:
        interfaces = socket.if_nameindex()
    except OSError:
        return None
    for _, name in interfaces:
        if _interface_address(name) == address:
            return name
    return None


def own_address(info: Any) -> str | None:
    """This node's private address, from the pool's peers (``info.peers``); None when the pool does not say."""
    for peer in info.peers:
        if peer.node == info.node and peer.private_ip:
            return str(peer.private_ip)
    return None


def gloo_interface(info: Any) -> str | None:
    """The interface gloo should use on this node (for ``GLOO_SOCKET_IFNAME``).

    The pool's own word (``info.network.interface``) wins; else the interface holding the node's
    private address; None when neither is known.
    """
    if info.network is not None and info.network.interface:
        return str(info.network.interface)
    address = own_address(info)
    return interface_for(address) if address else None
