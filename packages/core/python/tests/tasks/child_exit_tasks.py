"""Tasks for test_child_exit: a child in the states where it must still end with its worker."""

import sys
import time
from pathlib import Path


def mark_then_sleep(marker, seconds):
    """The marker says "running" while the task sleeps, then "slept"."""
    Path(marker).write_text("running")
    time.sleep(seconds)
    Path(marker).write_text("slept")
    return "slept"


def mark_then_hold_the_interpreter(marker):
    """Keep the interpreter from every other thread of the child (as a long C call holding it does):
    with a switch interval of hours the child's reader cannot run again while this loops."""
    sys.setswitchinterval(10_000)
    Path(marker).write_text("holding")
    while True:
        pass
