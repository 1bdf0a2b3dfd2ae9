"""The Python half of the fallback example: a task that says where it ran."""

import os

import skyward as sky


def where() -> dict:
    """This worker's node, its process and the accelerator it was given (none, on ``Local``)."""
    info = sky.instance_info()
    return {"node": info.node, "pid": os.getpid(), "accelerators": info.accelerators}
