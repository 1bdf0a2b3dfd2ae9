import os
import socket

import skyward as sky


def where():
    """Which machine a task ran on, as the task sees it."""
    info = sky.instance_info()
    return {"node": info.node, "total": info.total_nodes, "cwd": os.getcwd(), "host": socket.gethostname()}
