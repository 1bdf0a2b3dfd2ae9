"""Tasks for the plugin tests."""

from __future__ import annotations

import os
import time


def record(path: str, seconds: float = 0.0, tag: str = "") -> int:
    """Append ``<pid> task task <tag>`` to the hook log, after sleeping a little."""
    time.sleep(seconds)
    with open(path, "a") as log:
        log.write(f"{os.getpid()} task task {tag}\n")
    return os.getpid()
