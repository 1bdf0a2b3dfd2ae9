"""One worker per accelerator: pinning a worker process to the device of its index.

When the pool runs one worker per accelerator (a plugin asked for it, ``cluster.pin_accelerators``),
each process-executor child is pinned, before any task (or plugin) imports a CUDA library, to the
device of its local index: ``CUDA_VISIBLE_DEVICES`` becomes that one device, so the worker sees it
as ``cuda:0``. A node whose ``CUDA_VISIBLE_DEVICES`` already narrows the devices (``"2,3"``) gives
worker ``i`` its ``i``-th entry. The worker checks the node has enough devices (``nvidia-smi -L``,
where there is one) when it receives the cluster, and refuses the cluster otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import List, MutableMapping, Optional

__all__ = ["device_for", "nvidia_devices", "pin_accelerator", "check_accelerators"]

_GPU_LINE = re.compile(r"^GPU (\d+):")
_MIG_LINE = re.compile(r"^\s+MIG .*UUID:\s*(MIG-[^\s)]+)")


def device_for(local: int, visible: Optional[str]) -> str:
    """The device worker ``local`` of a node uses, given the node's ``CUDA_VISIBLE_DEVICES``."""
    entries = [entry.strip() for entry in (visible or "").split(",") if entry.strip()]
    if not entries:
        return str(local)
    if local >= len(entries):
        raise RuntimeError(
            f"worker {local} has no accelerator: CUDA_VISIBLE_DEVICES={visible!r} names {len(entries)} "
            f"device{'s' if len(entries) != 1 else ''}"
        )
    return entries[local]


def pin_accelerator(local: int, environ: MutableMapping[str, str] = os.environ) -> str:
    """Pin this process to the accelerator of worker ``local``; returns the device it now sees."""
    device = device_for(local, environ.get("CUDA_VISIBLE_DEVICES"))
    environ["CUDA_VISIBLE_DEVICES"] = device
    return device


def nvidia_devices() -> Optional[List[str]]:
    """The node's GPUs as ``nvidia-smi -L`` lists them (a GPU's MIG devices in its place); None without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    if listing.returncode != 0:
        raise RuntimeError(f"nvidia-smi -L failed (exit {listing.returncode}): {listing.stderr.strip()}")
    devices: List[str] = []
    for line in listing.stdout.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu:
            devices.append(gpu.group(1))
    return devices


def check_accelerators(workers_per_node: int, environ: MutableMapping[str, str] = os.environ) -> Optional[str]:
    """Why this node cannot run ``workers_per_node`` workers, one per accelerator; None when it can."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip():
        count = len([entry for entry in visible.split(",") if entry.strip()])
        where = f"CUDA_VISIBLE_DEVICES={visible!r} names {count}"
    else:
        try:
            devices = nvidia_devices()
        except (OSError, RuntimeError, subprocess.SubprocessError) as error:
            return f"cannot count this node's GPUs: {error}"
        if devices is None:
            return None  # no NVIDIA driver tool to ask: trust the pool's accelerator count
        count = len(devices)
        where = f"nvidia-smi -L lists {count}"
    if count < workers_per_node:
        return (
            f"the pool runs {workers_per_node} workers per node, one per accelerator, but this node has "
            f"fewer: {where}"
        )
    return None
