"""Worker side of ``@skyward/plugin-accelerate``: gloo on the node's private address.

The worker runs under ``accelerate launch``, which sets up the environment ``PartialState()`` and
``Accelerator()`` read; they create the process group (gloo on CPU nodes) when the task's code first
asks for them. gloo listens on the address the host name resolves to, which need not be one the
other nodes reach (Debian maps the host name to 127.0.1.1, containers and network namespaces to
127.0.0.1). ``around_app`` runs before the worker's first task and, unless ``GLOO_SOCKET_IFNAME`` is
already set, sets it to the interface holding the node's private address (``skyward.network``), as
the torch plugin does.

With one process per accelerator (``config["per_worker"]``) the node's worker runs no task: each
process-executor child, pinned to its device, is one process of accelerate's state. Its
``around_process`` sets the variables torchrun gives the processes ``accelerate launch`` starts —
``RANK`` (the global worker index), ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``NODE_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` (the head's, as the launcher was given) — and
gloo's interface, before the first task builds ``PartialState()``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from typing import Any, Iterator, Mapping

from skyward.network import gloo_interface


@contextlib.contextmanager
def _pinned(info: Any) -> Iterator[None]:
    if int(info.total_workers) > 1 and not os.environ.get("GLOO_SOCKET_IFNAME"):
        interface = gloo_interface(info)
        if interface:
            os.environ["GLOO_SOCKET_IFNAME"] = interface
    try:
        yield
    finally:
        _reset_state()


def _reset_state() -> None:
    """Leaves the process group the tasks' ``PartialState()`` formed, and forgets accelerate's state,
    so that the next task's ``PartialState()`` forms it again (with the pool's current nodes, when its
    membership changed). Nothing to do where no task used accelerate."""
    if "accelerate" not in sys.modules:
        return
    import torch.distributed as dist
    from accelerate.state import AcceleratorState

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    AcceleratorState._reset_state(reset_partial_state=True)


def rank_env(info: Any) -> dict[str, str]:
    """The rank variables of this worker, one process of ``info.total_workers``."""
    return {
        "RANK": str(info.global_worker_index),
        "LOCAL_RANK": str(info.worker),
        "WORLD_SIZE": str(info.total_workers),
        "LOCAL_WORLD_SIZE": str(info.workers_per_node),
        "NODE_RANK": str(info.node),
        "MASTER_ADDR": str(info.head_addr),
        "MASTER_PORT": str(info.head_port),
    }


@contextlib.contextmanager
def _ranked(info: Any) -> Iterator[None]:
    os.environ.update(rank_env(info))
    with _pinned(info):
        yield


def _nested_process() -> bool:
    """A child of the worker's nested-task executor: it runs subtasks and is no rank of its own."""
    from skyward.context import runtime

    return bool(getattr(runtime, "nested", False))


#: the device processes' types whose settings ``accelerate launch`` passes through the environment
LAUNCHED_TYPES = ("MULTI_GPU", "FSDP")


def launch_env(info: Any, config_file: str) -> dict[str, str]:
    """What ``accelerate launch`` adds to the environment of the processes it starts, for this node.

    Computed by accelerate's own launch code (its argument parser, ``_validate_launch_command`` and
    ``prepare_multi_gpu_env``) from the real config file and the pool's topology; only the
    variables it adds or changes. Empty for types whose launcher starts one process.
    """
    with open(config_file) as handle:
        settings = json.load(handle)
    if settings.get("distributed_type") not in LAUNCHED_TYPES:
        return {}
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    argv = [
        "--config_file", config_file,
        "--num_machines", str(info.total_nodes),
        "--machine_rank", str(info.node),
        "--main_process_ip", str(info.head_addr),
        "--main_process_port", str(info.head_port),
        "--num_processes", str(info.total_workers),
        "skyward-task",
    ]
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(argv))
    before = dict(os.environ)
    after = prepare_multi_gpu_env(args)
    return {key: value for key, value in after.items() if before.get(key) != value}


@contextlib.contextmanager
def _launched(info: Any) -> Iterator[None]:
    config_file = os.environ.get("SKYWARD_ACCELERATE_CONFIG")
    if config_file:
        # In the node's worker process, before any device process starts: the changes reach them all.
        os.environ.update(launch_env(info, config_file))
    with _pinned(info):
        yield


def around_app(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None]:
    """Points gloo at the node's private interface (``GLOO_SOCKET_IFNAME``) for a pool of several nodes.

    With one process per accelerator it also sets what ``accelerate launch`` gives the processes it
    starts (FSDP settings and the like, from ``accelerate.json``), for every device process.
    """
    if config.get("per_worker") is True:
        return _launched(info)
    global _entered_before
    if _entered_before:
        # Entered again after the pool's nodes changed: ``accelerate launch`` gave this process the
        # variables of the nodes at start; the next ``PartialState()`` reads today's.
        os.environ.update(rank_env(dataclasses.replace(info, worker=0, workers_per_node=1)))
    _entered_before = True
    return _pinned(info)


#: whether this process entered ``around_app`` before (a later entry follows a membership change)
_entered_before = False


def around_process(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None] | None:
    """With one process per accelerator: this process's rank variables, and gloo's interface."""
    if config.get("per_worker") is not True or _nested_process():
        return None
    return _ranked(info)
