"""Puts the plugin's worker module and Skyward's Python runtime on ``sys.path`` for the tests."""

from __future__ import annotations

import sys
from pathlib import Path

PLUGIN_PYTHON = Path(__file__).resolve().parents[1]
# The runtime of the @skyward/core this package is installed with (a workspace link in the repo).
CORE_PYTHON = Path(__file__).resolve().parents[2] / "node_modules" / "@skyward" / "core" / "python"

for path in (str(PLUGIN_PYTHON), str(CORE_PYTHON)):
    if path not in sys.path:
        sys.path.insert(0, path)
