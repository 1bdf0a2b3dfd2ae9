"""Worker side of ``@skyward/plugin-accelerate``: gloo on the node's private address.

The worker runs under ``accelerate launch``, which sets up the environment ``PartialState()`` and
``Accelerator()`` read; they create the process group (gloo on CPU nodes) when the task's code first
asks for them. gloo listens on the address the host name resolves to, which need not be one the
other nodes reach (Debian maps the host name to 127.0.1.1, containers and network namespaces to
127.0.0.1). ``around_app`` runs before the worker's first task and, unless ``GLOO_SOCKET_IFNAME`` is
already set, sets it to the interface holding the node's private address (``skyward.network``), as
the torch plugin does.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Mapping

from skyward.network import gloo_interface


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
