"""The worker side of ``@skyward/plugin-cuml``: scikit-learn on the GPU through ``cuml.accel``.

``cuml.accel.install()`` patches scikit-learn (and friends) in the interpreter that calls it, so it
has to run in the process that runs the tasks: ``around_app`` does it in the worker process (the
thread executor's tasks run there), ``around_process`` in each executor subprocess. Once per
process: the patch is process-global and not undone, so the hooks return no context to exit.
"""

from __future__ import annotations

import threading
from typing import Any, Dict

_lock = threading.Lock()
_installed = False


def install() -> bool:
    """Turn cuML's scikit-learn acceleration on in this process; False when it already was."""
    global _installed
    with _lock:
        if _installed:
            return False
        try:
            import cuml.accel
        except ImportError as error:
            raise RuntimeError(
                f"cannot import cuml.accel ({error}): the worker's environment has no usable cuML "
                "(the plugin installs it from https://pypi.nvidia.com; it needs an NVIDIA GPU and a "
                "driver for the wheels' CUDA version)"
            ) from error
        cuml.accel.install()
        _installed = True
        return True


def around_app(info: Any, config: Dict[str, Any]) -> None:
    """Accelerate scikit-learn in the worker process, before its first task."""
    install()
    return None


def around_process(info: Any, config: Dict[str, Any]) -> None:
    """Accelerate scikit-learn in an executor subprocess, before its first task."""
    install()
    return None
