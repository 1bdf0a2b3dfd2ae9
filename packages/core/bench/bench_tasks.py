"""Task functions the benchmark dispatches: as cheap as a task can be, so what is measured is the pool."""


def noop():
    return None


def echo(value):
    return value


def pid():
    import os

    return os.getpid()


def nap(seconds):
    import time

    time.sleep(seconds)
    return seconds
