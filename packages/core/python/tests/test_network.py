"""``skyward.network``: the node's private address and the interface holding it, on this machine's real interfaces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyward.info import InstanceInfo, NetworkInfo, PeerInfo  # noqa: E402
from skyward.network import gloo_interface, interface_for, own_address  # noqa: E402

# An address of TEST-NET-3 (RFC 5737): documentation only, on no interface of any machine.
UNKNOWN = "203.0.113.77"


def _info(node: int, peers: list[PeerInfo], network: NetworkInfo | None = None) -> InstanceInfo:
    return InstanceInfo(node=node, total_nodes=len(peers) or 1, peers=peers, network=network)


def test_interface_for_finds_the_loopback_of_127_0_0_1() -> None:
    assert interface_for("127.0.0.1") == "lo"


def test_interface_for_finds_every_ipv4_address_ip_lists() -> None:
    # `ip -4 -o address` prints "<index>: <name>    inet <address>/<prefix> ..." for each address.
    listing = subprocess.run(["ip", "-4", "-o", "address"], capture_output=True, text=True, check=True).stdout
    pairs = [(fields[1], fields[3].split("/")[0]) for fields in (line.split() for line in listing.splitlines())]
    assert ("lo", "127.0.0.1") in pairs
    primary: dict[str, str] = {}
    for name, address in pairs:
        primary.setdefault(name, address)  # the lookup sees an interface's primary address, listed first
    for name, address in primary.items():
        assert interface_for(address) == name


def test_interface_for_an_address_no_interface_holds_is_none() -> None:
    assert interface_for(UNKNOWN) is None


def test_own_address_is_this_nodes_peer_entry() -> None:
    peers = [PeerInfo(node=0, private_ip="10.0.0.2"), PeerInfo(node=1, private_ip="10.0.0.3")]
    assert own_address(_info(1, peers)) == "10.0.0.3"
    assert own_address(_info(0, peers)) == "10.0.0.2"


def test_own_address_without_an_entry_or_address_is_none() -> None:
    assert own_address(_info(0, [])) is None
    assert own_address(_info(1, [PeerInfo(node=0, private_ip="10.0.0.2")])) is None
    assert own_address(_info(0, [PeerInfo(node=0, private_ip="")])) is None


def test_gloo_interface_is_the_interface_of_the_nodes_private_address() -> None:
    peers = [PeerInfo(node=0, private_ip=UNKNOWN), PeerInfo(node=1, private_ip="127.0.0.1")]
    assert gloo_interface(_info(1, peers)) == "lo"


def test_gloo_interface_of_an_address_on_no_interface_or_without_one_is_none() -> None:
    assert gloo_interface(_info(0, [PeerInfo(node=0, private_ip=UNKNOWN)])) is None
    assert gloo_interface(_info(0, [])) is None


def test_gloo_interface_the_pools_network_interface_wins() -> None:
    peers = [PeerInfo(node=0, private_ip="127.0.0.1")]
    assert gloo_interface(_info(0, peers, NetworkInfo(interface="ens5"))) == "ens5"
    # An empty interface name says nothing: the address decides.
    assert gloo_interface(_info(0, peers, NetworkInfo(interface=""))) == "lo"
