"""Puts the worker module (``python/``) on ``sys.path``, and says what to install when joblib is missing."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import joblib  # noqa: F401
except ImportError as error:
    raise pytest.UsageError(
        f"the joblib plugin's Python tests need joblib in {sys.executable} ({error}): "
        "apt-get install -y python3-joblib python3-sklearn, or pip install joblib scikit-learn"
    ) from error
