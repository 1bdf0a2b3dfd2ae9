"""A test plugin whose ``around_app`` sets environment variables (as a torch plugin sets MASTER_ADDR)
and whose ``decorate`` records what it saw of them, so tests can check the order."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict


def around_app(info: Any, config: Dict[str, Any]) -> None:
    os.environ["MASTER_ADDR"] = config["addr"]
    os.environ["SKYWARD_TEST_APP_INFO"] = f"{info.node}/{info.total_nodes}"
    os.environ.pop("SKYWARD_TEST_REMOVED", None)
    return None


def decorate(fn: Callable[..., Any], config: Dict[str, Any]) -> Callable[..., Any]:
    os.environ["SKYWARD_TEST_DECORATED_WITH"] = os.environ.get("MASTER_ADDR", "unset")
    return fn
