"""The interruption-notice poller against a small IMDSv2 fake served over real HTTP.

The fake answers as AWS documents it: a token from ``PUT /latest/api/token`` (with the TTL header),
401 without it, 404 until a notice, then its JSON —
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html,
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html,
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyward import interruption  # noqa: E402


class FakeImds:
    def __init__(self) -> None:
        self.notices: Dict[str, dict] = {}
        self.requests: List[tuple] = []
        #: answers still to cut short: a status line and headers, then less body than announced
        self.truncated = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, body: str = "") -> None:
                fake.requests.append((self.command, self.path, status))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:
                if fake.truncated > 0:
                    fake.truncated -= 1
                    self.send_response(200)
                    self.send_header("Content-Length", "64")
                    self.end_headers()
                    self.wfile.write(b"tok")
                    self.close_connection = True
                    return
                if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    self._reply(200, "token-1")
                else:
                    self._reply(400)

            def do_GET(self) -> None:
                if self.headers.get("X-aws-ec2-metadata-token") != "token-1":
                    self._reply(401)
                elif self.path in fake.notices:
                    self._reply(200, json.dumps(fake.notices[self.path]))
                else:
                    self._reply(404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture()
def imds() -> Iterator[FakeImds]:
    fake = FakeImds()
    yield fake
    fake.server.shutdown()


def test_no_notice_then_a_spot_action_and_a_rebalance(imds: FakeImds) -> None:
    poller = interruption.make_poller(f"aws-imds={imds.url}")
    assert poller.poll() == []
    imds.notices["/latest/meta-data/spot/instance-action"] = {"action": "terminate", "time": "2026-11-24T18:00:00Z"}
    imds.notices["/latest/meta-data/events/recommendations/rebalance"] = {"noticeTime": "2026-11-24T17:58:00Z"}
    assert poller.poll() == [
        {"kind": "spot-instance-action", "action": "terminate", "time": "2026-11-24T18:00:00Z"},
        {"kind": "rebalance-recommendation", "action": "", "time": "2026-11-24T17:58:00Z"},
    ]
    # One session token, then every read carries it.
    assert [r for r in imds.requests if r[0] == "PUT"] == [("PUT", "/latest/api/token", 200)]
    assert all(status != 401 for _, _, status in imds.requests)


def _watch_for_a_spot_action(imds: FakeImds, action: str, seconds: float) -> Tuple[List[dict], List[str], threading.Event]:
    """Starts the watch, plants a spot action and waits up to ``seconds`` for its report; the
    reports, the log lines and the event that stops the watch."""
    reported: List[dict] = []
    logs: List[str] = []
    stop = interruption.start(f"aws-imds={imds.url}", 0.05, reported.append, logs.append)
    imds.notices["/latest/meta-data/spot/instance-action"] = {"action": action, "time": "2026-11-24T18:00:00Z"}
    waited = threading.Event()
    for _ in range(int(seconds / 0.02)):
        if reported:
            break
        waited.wait(0.02)
    return reported, logs, stop


def test_the_watch_reports_each_notice_once_and_stops(imds: FakeImds) -> None:
    reported, _, stop = _watch_for_a_spot_action(imds, "stop", 2)
    try:
        threading.Event().wait(0.3)  # several more polls: still reported once
        assert reported == [{"kind": "spot-instance-action", "action": "stop", "time": "2026-11-24T18:00:00Z"}]
    finally:
        stop.set()


def test_an_unreachable_endpoint_is_logged_once_not_raised() -> None:
    logs: List[str] = []
    stop = threading.Event()
    poller = interruption.make_poller("aws-imds=http://127.0.0.1:9")  # nothing listens on port 9
    thread = threading.Thread(target=interruption.watch, args=(poller, 0.01, lambda n: None, logs.append, stop))
    thread.start()
    threading.Event().wait(0.3)
    stop.set()
    thread.join(5)
    assert len(logs) == 1 and "reading interruption notices failed" in logs[0]


def test_a_reply_cut_short_is_logged_and_the_watch_goes_on(imds: FakeImds) -> None:
    # A connection dropped mid-reply raises http.client.IncompleteRead, which is no OSError: before,
    # it ended the polling thread, and the node heard of no interruption for the rest of its life.
    imds.truncated = 2
    reported, logs, stop = _watch_for_a_spot_action(imds, "terminate", 30)
    try:
        assert reported == [{"kind": "spot-instance-action", "action": "terminate", "time": "2026-11-24T18:00:00Z"}]
        assert len(logs) == 1 and "reading interruption notices failed" in logs[0]
    finally:
        stop.set()


def test_an_unknown_source_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown interruption notice source"):
        interruption.make_poller("gcp-metadata=http://x")


class FakeGceMetadata:
    """Compute Engine's metadata server as Google documents it: ``Metadata-Flavor: Google`` required
    (403 without it), ``instance/preempted`` ``FALSE``/``TRUE``, ``instance/maintenance-event``
    ``NONE``/``MIGRATE_ON_HOST_MAINTENANCE``/``TERMINATE_ON_HOST_MAINTENANCE`` —
    https://cloud.google.com/compute/docs/metadata/querying-metadata,
    https://cloud.google.com/compute/docs/instances/create-use-spot#detect-preemption,
    https://cloud.google.com/compute/docs/instances/monitor-plan-host-maintenance-event
    """

    def __init__(self) -> None:
        self.values = {"preempted": "FALSE", "maintenance-event": "NONE"}
        self.requests: List[tuple] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                name = self.path.removeprefix("/computeMetadata/v1/instance/")
                if self.headers.get("Metadata-Flavor") != "Google":
                    status, body = 403, ""
                elif name in fake.values:
                    status, body = 200, fake.values[name]
                else:
                    status, body = 404, ""
                fake.requests.append((self.path, status))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/text")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture()
def gce() -> Iterator[FakeGceMetadata]:
    fake = FakeGceMetadata()
    yield fake
    fake.server.shutdown()


def test_gcp_no_notice_then_a_preemption_and_a_terminating_maintenance(gce: FakeGceMetadata) -> None:
    poller = interruption.make_poller(f"gcp-metadata={gce.url}")
    assert poller.poll() == []
    # A live migration moves the VM with its worker: no notice.
    gce.values["maintenance-event"] = "MIGRATE_ON_HOST_MAINTENANCE"
    assert poller.poll() == []
    gce.values["preempted"] = "TRUE"
    gce.values["maintenance-event"] = "TERMINATE_ON_HOST_MAINTENANCE"
    assert poller.poll() == [
        {"kind": "spot-preempted", "action": "terminate", "time": ""},
        {"kind": "host-maintenance", "action": "terminate", "time": ""},
    ]
    # Every read carried the header (none refused).
    assert gce.requests and all(status == 200 for _, status in gce.requests)


def test_gcp_the_watch_reports_a_preemption_once(gce: FakeGceMetadata) -> None:
    reported: List[dict] = []
    logs: List[str] = []
    stop = interruption.start(f"gcp-metadata={gce.url}", 0.05, reported.append, logs.append)
    try:
        gce.values["preempted"] = "TRUE"
        waited = threading.Event()
        for _ in range(1500):
            if reported:
                break
            waited.wait(0.02)
        waited.wait(0.3)  # several more polls: still reported once
        assert reported == [{"kind": "spot-preempted", "action": "terminate", "time": ""}]
        assert logs == []
    finally:
        stop.set()


def test_an_unknown_source_is_refused() -> None:
    with pytest.raises(ValueError, match="expected aws-imds=<endpoint> or gcp-metadata=<endpoint>"):
        interruption.make_poller("azure-imds=http://127.0.0.1:9")
