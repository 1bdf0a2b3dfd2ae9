"""The sockets the collections' threads use (``collection_channel.py``), on real loopback TCP: a
frame is written whole to a peer that reads, a send to a peer that stopped reading ends with
``TimeoutError`` once its deadline passes (``sendall``'s per-write timeout never would, while the
peer's window opens a little now and then), and every connection probes a silent peer (keepalive)."""

from __future__ import annotations

import socket
import threading
from typing import List, Tuple

import worker_client  # noqa: F401  (puts the runtime on sys.path)
from skyward import collection_channel


def connected_pair() -> Tuple[socket.socket, socket.socket, socket.socket]:
    """A listener, the client's end (tuned as the channel tunes it) and the accepted end."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    collection_channel.tune(client)
    return listener, client, accepted


def test_a_frame_reaches_a_peer_that_reads_whole_and_in_order() -> None:
    listener, client, accepted = connected_pair()
    data = bytes(range(256)) * 40_000  # 10 MiB: many partial writes
    received: List[bytes] = []

    def read() -> None:
        while sum(len(part) for part in received) < len(data):
            part = accepted.recv(1 << 20)
            if not part:
                return
            received.append(part)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        collection_channel.send_all(client, data, limit=60)
        reader.join(60)
        assert b"".join(received) == data
    finally:
        for each in (client, accepted, listener):
            each.close()


def test_a_send_to_a_peer_that_stopped_reading_ends_at_its_deadline() -> None:
    listener, client, accepted = connected_pair()
    # Far more than both ends' socket buffers hold: with nobody reading, it can never all be written.
    data = bytes(256 * 1024 * 1024)
    try:
        try:
            collection_channel.send_all(client, data, limit=2)
        except TimeoutError as error:
            assert "took no more" in str(error)
        else:
            raise AssertionError("a send to a peer that reads nothing returned as if written")
    finally:
        for each in (client, accepted, listener):
            each.close()


def test_a_tuned_connection_probes_a_silent_peer() -> None:
    listener, client, accepted = connected_pair()
    try:
        assert client.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        if hasattr(socket, "TCP_KEEPIDLE"):
            assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == collection_channel._KEEPALIVE_IDLE
            assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == collection_channel._KEEPALIVE_PROBES
    finally:
        for each in (client, accepted, listener):
            each.close()
