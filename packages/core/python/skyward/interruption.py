"""Interruption notices: the cloud telling a node that its instance is about to be reclaimed.

The worker polls the source named by ``--interruption-notice`` in a thread of its own and reports
each new notice to its client as an ``event`` of type ``interruption``; the client then stops giving
the node tasks, moves its queued tasks elsewhere and starts a replacement.

``aws-imds=<endpoint>`` reads AWS's instance metadata service, version 2 (a session token first):

- ``PUT /latest/api/token`` with ``X-aws-ec2-metadata-token-ttl-seconds``, then requests carrying
  ``X-aws-ec2-metadata-token`` —
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html
- ``GET /latest/meta-data/spot/instance-action``: 404 until a spot interruption is scheduled, then
  ``{"action": "terminate" | "stop" | "hibernate", "time": "2017-09-18T08:22:00Z"}`` —
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
- ``GET /latest/meta-data/events/recommendations/rebalance``: 404 until EC2 recommends rebalancing,
  then ``{"noticeTime": "2020-11-05T08:22:00Z"}`` —
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html

``gcp-metadata=<endpoint>`` reads Compute Engine's metadata server (every request carries
``Metadata-Flavor: Google``; one without it is refused with 403):

- ``GET /computeMetadata/v1/instance/preempted``: ``FALSE``, then ``TRUE`` once Compute Engine
  preempts the Spot VM (about 30 seconds before it stops) —
  https://cloud.google.com/compute/docs/instances/create-use-spot#detect-preemption
- ``GET /computeMetadata/v1/instance/maintenance-event``: ``NONE``, ``MIGRATE_ON_HOST_MAINTENANCE``,
  or ``TERMINATE_ON_HOST_MAINTENANCE`` when host maintenance is about to stop a VM that cannot move
  live (a GPU VM: an hour's notice) —
  https://cloud.google.com/compute/docs/instances/monitor-plan-host-maintenance-event
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, Optional, Union

TOKEN_TTL_SECONDS = 21600
REQUEST_TIMEOUT = 2.0

Notice = Dict[str, Any]


class AwsImdsPoller:
    """Polls AWS IMDSv2 for a spot instance action and a rebalance recommendation."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._token: Optional[str] = None

    def _request(self, method: str, path: str, headers: Dict[str, str]) -> "tuple[int, str]":
        request = urllib.request.Request(self.endpoint + path, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:  # noqa: S310
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            return error.code, ""

    def _get(self, path: str) -> "tuple[int, str]":
        if self._token is None:
            status, body = self._request(
                "PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_SECONDS)}
            )
            if status != 200 or not body:
                raise OSError(f"IMDSv2 refused a session token (HTTP {status})")
            self._token = body.strip()
        status, body = self._request("GET", path, {"X-aws-ec2-metadata-token": self._token})
        if status == 401:  # the token expired: get a fresh one next time
            self._token = None
        return status, body

    def poll(self) -> "list[Notice]":
        notices = []
        status, body = self._get("/latest/meta-data/spot/instance-action")
        if status == 200 and body:
            detail = json.loads(body)
            notices.append({
                "kind": "spot-instance-action",
                "action": str(detail.get("action", "")),
                "time": str(detail.get("time", "")),
            })
        status, body = self._get("/latest/meta-data/events/recommendations/rebalance")
        if status == 200 and body:
            detail = json.loads(body)
            notices.append({"kind": "rebalance-recommendation", "action": "", "time": str(detail.get("noticeTime", ""))})
        return notices


class GcpMetadataPoller:
    """Polls Compute Engine's metadata server for a preemption and a host maintenance that stops the VM."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint.rstrip("/")

    def _get(self, name: str) -> str:
        request = urllib.request.Request(
            f"{self.endpoint}/computeMetadata/v1/instance/{name}", headers={"Metadata-Flavor": "Google"}
        )
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:  # noqa: S310
            return response.read().decode("utf-8", "replace").strip()

    def poll(self) -> "list[Notice]":
        notices = []
        if self._get("preempted").upper() == "TRUE":
            notices.append({"kind": "spot-preempted", "action": "terminate", "time": ""})
        # A maintenance event may carry a suffix in future values; what matters is that it terminates.
        if self._get("maintenance-event").startswith("TERMINATE_ON_HOST_MAINTENANCE"):
            notices.append({"kind": "host-maintenance", "action": "terminate", "time": ""})
        return notices


Poller = Union[AwsImdsPoller, GcpMetadataPoller]

#: The sources ``--interruption-notice`` takes, each ``kind=<endpoint>``.
SOURCES = ("aws-imds", "gcp-metadata")


def make_poller(spec: str) -> Poller:
    """The poller for ``--interruption-notice`` ``kind=endpoint``."""
    kind, _, endpoint = spec.partition("=")
    if kind == "aws-imds":
        return AwsImdsPoller(endpoint or "http://169.254.169.254")
    if kind == "gcp-metadata":
        return GcpMetadataPoller(endpoint or "http://metadata.google.internal")
    raise ValueError(
        f"unknown interruption notice source {kind!r} (expected aws-imds=<endpoint> or gcp-metadata=<endpoint>)"
    )


def watch(
    poller: Poller,
    interval: float,
    report: Callable[[Notice], None],
    log: Callable[[str], None],
    stop: threading.Event,
) -> None:
    """Polls until ``stop`` is set; reports each distinct notice once."""
    seen = set()
    failing = False
    while not stop.is_set():
        try:
            for notice in poller.poll():
                key = (notice["kind"], notice["action"], notice["time"])
                if key not in seen:
                    seen.add(key)
                    report(notice)
            failing = False
        except Exception as error:  # noqa: BLE001 - the thread must outlive any bad reply
            # Not only OSError: a reply cut short raises http.client.IncompleteRead, an odd one
            # BadStatusLine or a non-object JSON; ending here, the node heard of no interruption again.
            if not failing:  # once per run of failures, not every interval
                log(f"reading interruption notices failed: {type(error).__name__}: {error}")
            failing = True
        stop.wait(interval)


def start(spec: str, interval: float, report: Callable[[Notice], None], log: Callable[[str], None]) -> threading.Event:
    """Starts the polling thread; set the returned event to stop it."""
    stop = threading.Event()
    thread = threading.Thread(
        target=watch, args=(make_poller(spec), interval, report, log, stop), name="skyward-interruption", daemon=True
    )
    thread.start()
    return stop
