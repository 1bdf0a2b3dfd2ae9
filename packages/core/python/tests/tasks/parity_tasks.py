"""Task code written as for the Python project (its guides' shapes), run unchanged on our worker."""

import time

import skyward as sky


@sky.function
def square(x):
    return x * x


@sky.function
def where():
    return sky.instance_info().node


@sky.function(timeout=1)
def declared_timeout(seconds):
    time.sleep(seconds)
    return "finished"


def operators(x):
    """Every operator of a pending function, dispatched from inside a task."""
    future = square(x + 3) > sky
    return {
        "one": square(x) >> sky,
        "every_node": where() @ sky,
        "group": list((square(1) & square(2) & square(x)) >> sky),
        "gathered": list(sky.gather(square(3), square(4)) >> sky),
        "streamed": sorted(sky.gather(square(5), square(6), stream=True, ordered=False) >> sky),
        "future": future.result(),
    }


def bad_target():
    try:
        square(1) >> object()
    except TypeError as error:
        return str(error)
    return "no error"


# The Python project's guide 04: a task that returns its InstanceInfo.
@sky.function
def get_instance_info():
    info = sky.instance_info()
    return info


def peers_both_ways():
    info = sky.InstanceInfo.current()
    return {"item": info.peers[0]["private_ip"], "attribute": info.peers[0].private_ip,
            "json": info.model_dump_json()}


class Tally:
    """A plain Python object: it crosses the wire pickled ($o)."""

    def __init__(self, start):
        self.items = [start]

    def add(self, value):
        self.items.append(value)
        return self


def make_tally(start):
    return Tally(start)


def grow_tally(tally, value):
    assert isinstance(tally, Tally)
    return tally.add(value)


def read_tally(tally):
    return {"type": type(tally).__name__, "items": tally.items}


def nested_tally(start):
    """The object from a nested task arrives in its parent as the object."""
    tally = make_tally_fn(start) >> sky
    return read_tally(tally)


make_tally_fn = sky.function(make_tally)


def double_array(array):
    array *= 2  # arrives writable
    return array
