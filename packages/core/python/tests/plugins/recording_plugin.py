"""A test plugin that appends each hook call to the file named by ``config["log"]``.

Lines are ``<pid> <label> <hook> <event> [detail]``. ``config["fail"]`` names a hook that raises
instead (``around_app``, ``around_process``, ``decorate``), ``bad_return`` for an ``around_app``
that returns something that is not a context manager, or ``hang`` for an ``around_app`` that never
returns (Python code, sleeping in short steps, so an interrupt can stop it); ``config["slow"]``
makes ``around_app`` take that many seconds before it enters; ``config["topology"]`` adds the node
count and the peers to its ``enter`` line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from typing import Any, Callable, Dict, Iterator


def record(config: Dict[str, Any], *words: Any) -> None:
    with open(config["log"], "a") as log:
        log.write(" ".join([str(os.getpid()), config["label"], *map(str, words)]) + "\n")


@contextlib.contextmanager
def _scope(config: Dict[str, Any], hook: str, info: Any) -> Iterator[None]:
    if config.get("topology"):  # the membership it was entered with
        record(config, hook, "enter", f"node={info.node}", f"total={info.total_nodes}",
               "peers=" + ",".join(str(getattr(peer, "instance_id", None) or peer.private_ip) for peer in info.peers))
    else:
        record(config, hook, "enter", f"node={info.node}")
    try:
        yield
    finally:
        record(config, hook, "exit")


def around_app(info: Any, config: Dict[str, Any]) -> Any:
    if config.get("fail") == "around_app":
        record(config, "around_app", "fail")
        raise RuntimeError(f"{config['label']} cannot start")
    if config.get("fail") == "bad_return":
        return 42
    if "slow" in config:  # entering takes this long (a rendezvous with the other nodes, say)
        end = time.monotonic() + config["slow"]
        while time.monotonic() < end:
            time.sleep(0.05)
    if config.get("fail") == "hang":
        record(config, "around_app", "hang")
        while True:
            time.sleep(0.05)
    return _scope(config, "around_app", info)


def around_process(info: Any, config: Dict[str, Any]) -> Any:
    if config.get("fail") == "around_process":
        record(config, "around_process", "fail")
        raise RuntimeError(f"{config['label']} cannot start a process")
    return _scope(config, "around_process", info)


def decorate(fn: Callable[..., Any], config: Dict[str, Any]) -> Callable[..., Any]:
    if config.get("fail") == "decorate":
        raise ValueError("no decorating today")
    record(config, "decorate", "wrap", fn.__name__)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        record(config, "call", "before", kwargs.get("tag"))
        try:
            return fn(*args, **kwargs)
        finally:
            record(config, "call", "after", kwargs.get("tag"))

    return wrapper
