"""Worker side of the `threads` plugin: caps PyTorch's intra-op threads when PyTorch is installed.

The environment variables (OMP_NUM_THREADS, …) come from the image; libraries that read them only at
import see them already. PyTorch also has a runtime setting, applied here once per worker process.
"""

from __future__ import annotations

import contextlib
import importlib.util
from typing import Any, Dict, Iterator


@contextlib.contextmanager
def around_app(info: Any, config: Dict[str, Any]) -> Iterator[None]:
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(int(config["perWorker"]))
    yield
