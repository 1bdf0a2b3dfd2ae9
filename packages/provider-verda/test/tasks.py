import os

import skyward as sky


def where():
    info = sky.instance_info()
    return {"node": info.node, "total": info.total_nodes, "cwd": os.getcwd()}


def add(a, b):
    return a + b
