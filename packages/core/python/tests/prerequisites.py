"""The CI rule for the Python tests' prerequisites, as ``isCi()`` in ``@skyward/testing`` and
``skyward_is_ci`` in ``scripts/ci.sh`` say it: under CI a missing prerequisite fails the test;
elsewhere it skips, saying what is missing."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def is_ci() -> bool:
    """Whether the tests run under CI: ``CI`` set to anything but empty, ``0`` or ``false`` (any case)."""
    value = os.environ.get("CI", "").lower()
    return value not in ("", "0", "false")


def missing(reason: str, purpose: str) -> None:
    """Skip with ``reason`` — or, under CI, fail: CI requires ``purpose``."""
    if is_ci():
        pytest.fail(f"CI requires {purpose}: {reason}", pytrace=False)
    pytest.skip(reason)


def require_module(name: str, purpose: str) -> ModuleType:
    """The module ``name``, imported; when it cannot be imported, see :func:`missing`."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        missing(f"cannot import {name} ({error})", purpose)
        raise  # unreachable: missing() skips or fails
