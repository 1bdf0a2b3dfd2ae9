"""The first task of the time-to-first-task benchmark: it imports the image's packages."""

import importlib


def hello(names: list[str]) -> list[str]:
    return [importlib.import_module(name).__name__ for name in names]
