"""Remote references moved node to node between two real workers: ``skyward.refs:serve`` on the
holder, ``skyward.refs:pull`` on the other; only a fetcher holding the pool's token and naming its
job is served."""

from __future__ import annotations

from typing import Any, Dict, Iterator, Tuple

import pytest

from worker_client import Client, WorkerProcess, connect  # noqa: E402

from test_refs import keep, ref, submit_wire  # noqa: E402

PAYLOAD = 3 * 1024 * 1024


@pytest.fixture(scope="module", params=["thread", "process"])
def pair(request: pytest.FixtureRequest) -> Iterator[Tuple[WorkerProcess, WorkerProcess]]:
    args = ("--executor", request.param, "--concurrency", "2")
    with WorkerProcess(*args) as zero, WorkerProcess(*args) as one:
        yield zero, one


@pytest.fixture()
def clients(pair: Tuple[WorkerProcess, WorkerProcess]) -> Iterator[Tuple[Client, Client]]:
    zero, one = connect(pair[0], 0, 2), connect(pair[1], 1, 2)
    yield zero, one
    zero.close()
    one.close()


def serve(client: Client) -> Dict[str, Any]:
    return client.value("skyward.refs:serve")


def pull(client: Client, ref_id: str, address: Dict[str, Any]) -> Dict[str, Any]:
    return client.call("skyward.refs:pull", {"id": ref_id, **address})


def test_a_reference_moves_between_workers_and_is_kept_under_its_id(clients: Tuple[Client, Client]) -> None:
    zero, one = clients
    made = keep(zero, "ref_tasks:make_counter", PAYLOAD)
    address = serve(zero)
    assert address["addr"] == "127.0.0.1" and address["port"] > 0
    assert serve(zero) == address  # one server, started once
    answer = pull(one, made["id"], address)
    assert answer["t"] == "result", answer
    assert made["size"] <= answer["value"]["bytes"] < made["size"] + 1024
    used = submit_wire(one, "use-pulled", "ref_tasks:bump", [ref(made["id"])], refs=True)
    assert used["t"] == "result", used
    assert used["value"]["payload"] == PAYLOAD and used["value"]["hits"] == 1
    # Pulled again: it is there already, nothing moves.
    assert pull(one, made["id"], address)["value"] == {"bytes": 0}
    held = one.value("skyward.refs:held")
    assert made["id"] in held["ids"] and held["fetched"] >= answer["value"]["bytes"]
    assert zero.value("skyward.refs:held")["served"] >= answer["value"]["bytes"]


def test_an_unknown_reference_or_an_unreachable_peer_fails_naming_it(clients: Tuple[Client, Client]) -> None:
    zero, one = clients
    address = serve(zero)
    missing = pull(one, "r0-0000000000000000", address)
    assert missing["t"] == "error" and missing["type"] == "RemoteRefError"
    assert "r0-0000000000000000 is not held on this node" in missing["message"]
    made = keep(zero, "ref_tasks:make_counter", 10)
    closed = pull(one, made["id"], {"addr": "127.0.0.1", "port": 1})
    assert closed["t"] == "error" and closed["type"] == "RemoteRefError"
    assert f"could not fetch {made['id']} from 127.0.0.1:1" in closed["message"]
    assert pull(one, made["id"], {"addr": "127.0.0.1"})["type"] == "SerializationError"


def test_a_fetcher_without_the_token_or_of_another_job_is_refused(clients: Tuple[Client, Client]) -> None:
    zero, _ = clients
    made = keep(zero, "ref_tasks:make_counter", 10)
    address = serve(zero)
    with WorkerProcess("--concurrency", "1", token="another-pool-token") as stranger:
        other = Client(stranger.port)
        try:
            assert other.hello(token="another-pool-token")["t"] == "welcome"
            other.cluster(1, 2)
            refused = pull(other, made["id"], address)
        finally:
            other.close()
    assert refused["t"] == "error" and "not authenticated for this pool" in refused["message"]
    assert "another-pool-token" not in refused["message"]
    with WorkerProcess("--concurrency", "1") as same_token:
        other = connect(same_token, 1, 2, job_id="job-2")
        try:
            refused = pull(other, made["id"], address)
        finally:
            other.close()
    assert refused["t"] == "error" and "not authenticated for this pool" in refused["message"]


def test_serving_needs_the_cluster_message(pair: Tuple[WorkerProcess, WorkerProcess]) -> None:
    with WorkerProcess("--concurrency", "1") as fresh:
        client = Client(fresh.port)
        try:
            assert client.hello()["t"] == "welcome"
            answer = client.call("skyward.refs:serve")
        finally:
            client.close()
    assert answer["t"] == "error" and "the cluster message has not arrived yet" in answer["message"]


class StallingPeer:
    """A holder that froze mid-transfer, as a node the cloud reclaimed does: it speaks the peer
    protocol (docs/protocol.md, _Remote references_) up to the header and the body's first bytes,
    then sends nothing more and keeps the connection open (a machine that is gone sends no FIN)."""

    def __init__(self) -> None:
        import socket
        import threading

        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held: list = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import os

        from skyward import peer_auth

        sock, _ = self.listener.accept()
        self.held.append(sock)
        sock.sendall(os.urandom(peer_auth.NONCE_BYTES))
        peer_auth.read_frame_blocking(sock)
        sock.sendall(peer_auth.frame({"ok": True, "type": "bytes", "size": 1 << 20, "length": 1 << 20}))
        sock.sendall(b"x" * 1024)

    def close(self) -> None:
        for sock in self.held:
            sock.close()
        self.listener.close()


def test_a_holder_that_stops_sending_mid_transfer_fails_the_pull(clients: Tuple[Client, Client]) -> None:
    _, one = clients
    peer = StallingPeer()
    # Answered as the TypeScript client does, so the worker keeps the connection while the pull waits.
    one.on_message = lambda message: one.send({"t": "pong", "ts": message["ts"]}) if message["t"] == "ping" else None
    try:
        # Before: the body was read with no deadline, so the pull (and the task waiting for the
        # reference) waited for ever on a holder that was gone.
        one.submit("stalled-pull", "skyward.refs:pull", {"id": "r0-00000000000000aa", "addr": "127.0.0.1",
                                                         "port": peer.port})
        stalled = one.terminal("stalled-pull", timeout=120)
    finally:
        one.on_message = None
        peer.close()
    assert stalled["t"] == "error" and stalled["type"] == "RemoteRefError", stalled
    assert "could not fetch r0-00000000000000aa from 127.0.0.1" in stalled["message"]
    assert "r0-00000000000000aa" not in one.value("skyward.refs:held")["ids"]
