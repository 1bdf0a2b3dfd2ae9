"""Tasks for the custom-plugin example."""

import os


def slow_sum(n):
    return sum(i * i for i in range(n))


def greeting():
    return os.environ.get("GREETING", "(not set)")
