"""The worker side of ``@skyward/plugin-mig``: each worker process on its own MIG device.

The bootstrap cut GPU ``config["gpu"]`` into MIG instances; ``nvidia-smi -L`` lists their devices
in order. A process is pinned to the device of its worker index (``info.worker``) by setting
``CUDA_VISIBLE_DEVICES`` to that device's UUID, once, before its first task imports a CUDA library.
``around_app`` pins the worker process (the thread executor's tasks run there); ``around_process``
pins each executor subprocess (``executor="process"``), whose ``info.worker`` is its slot.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from typing import Any, Dict, List, Optional

_GPU_LINE = re.compile(r"^\s*GPU (\d+):")
_MIG_UUID = re.compile(r"UUID:\s*(MIG-[^\s)]+)")

_lock = threading.Lock()
_pinned: Optional[str] = None


def mig_devices(gpu: int = 0) -> List[str]:
    """The UUIDs of GPU ``gpu``'s MIG devices, in the order ``nvidia-smi -L`` lists them."""
    try:
        listing = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, check=True, timeout=60
        ).stdout
    except FileNotFoundError as error:
        raise RuntimeError("nvidia-smi is not on PATH: MIG needs the NVIDIA driver on the node") from error
    except subprocess.CalledProcessError as error:
        raise RuntimeError(f"nvidia-smi -L failed (exit {error.returncode}): {error.stderr.strip()}") from error
    devices: List[str] = []
    current: Optional[int] = None
    for line in listing.splitlines():
        gpu_line = _GPU_LINE.match(line)
        if gpu_line:
            current = int(gpu_line.group(1))
            continue
        device = _MIG_UUID.search(line)
        if device and current == gpu:
            devices.append(device.group(1))
    return devices


def pin(worker: int, config: Dict[str, Any]) -> str:
    """Pin this process to the MIG device of ``worker`` (once; later calls return the same UUID)."""
    global _pinned
    with _lock:
        if _pinned is not None:
            return _pinned
        gpu = int(config.get("gpu", 0))
        profile = config.get("profile", "?")
        devices = mig_devices(gpu)
        if not devices:
            raise RuntimeError(
                f"GPU {gpu} has no MIG devices (nvidia-smi -L lists none): was it partitioned into "
                f"{profile} instances at bootstrap?"
            )
        if worker >= len(devices):
            raise RuntimeError(
                f"worker {worker} has no MIG device: GPU {gpu} has {len(devices)} ({profile}), "
                f"so a node can run workers 0 to {len(devices) - 1}"
            )
        _pinned = devices[worker]
        os.environ["CUDA_VISIBLE_DEVICES"] = _pinned
        return _pinned


def around_app(info: Any, config: Dict[str, Any]) -> None:
    """Pin the worker process to the MIG device of its worker index."""
    pin(info.worker, config)
    return None


def around_process(info: Any, config: Dict[str, Any]) -> None:
    """Pin an executor subprocess to the MIG device of its slot."""
    pin(info.worker, config)
    return None
