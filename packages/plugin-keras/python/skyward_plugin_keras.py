"""Worker side of ``@skyward/plugin-keras``: data-parallel distribution with the JAX backend.

``KERAS_BACKEND`` itself is set in the image's environment, before any import of Keras. With the
JAX backend, in a process where the jax plugin (listed before this one) brought up a
``jax.distributed`` runtime of several processes, Keras models are spread over every device of
that runtime. Every process then trains one model on the batches all processes feed together: each
passes its own shard to ``fit``.

That process is the node's worker (``around_app``) with one JAX process per node, and each
process-executor child (``around_process``) with ``jax({ perAccelerator: true })``, whose node
worker runs no task: there nothing is done, and JAX is not imported (on a GPU its backend would
take the memory the device processes need).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator, Mapping


def _distributed_jax() -> bool:
    """Whether this process runs a ``jax.distributed`` runtime of more than one process."""
    jax = sys.modules.get("jax")
    if jax is None:  # nothing here initialised JAX: no runtime in this process
        return False
    check = getattr(jax.distributed, "is_initialized", None)
    if callable(check):
        initialized = bool(check())
    else:  # older JAX: no public check
        from jax._src import distributed as state

        initialized = getattr(state.global_state, "client", None) is not None
    return initialized and jax.process_count() > 1


@contextlib.contextmanager
def _data_parallel() -> Iterator[None]:
    import keras

    previous = keras.distribution.distribution()
    distribution = keras.distribution.DataParallel(devices=keras.distribution.list_devices())
    # Each node feeds its own part of the data (``sky.shard``), as NumPy arrays more often than not;
    # Keras' auto-sharding would insist on a tf.data.Dataset to split itself.
    if hasattr(distribution, "auto_shard_dataset"):
        distribution.auto_shard_dataset = False
    keras.distribution.set_distribution(distribution)
    try:
        yield
    finally:
        keras.distribution.set_distribution(previous)


def _nested_process() -> bool:
    """A child of the worker's nested-task executor: it runs subtasks and is no JAX process of its own."""
    from skyward.context import runtime

    return bool(getattr(runtime, "nested", False))


def _hook(config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None] | None:
    if config.get("backend") != "jax" or not _distributed_jax():
        return None
    return _data_parallel()


def around_app(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None] | None:
    """With the JAX backend and a distributed JAX runtime here: ``DataParallel`` over every device."""
    return _hook(config)


def around_process(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None] | None:
    """The same in an executor child that is a JAX process of its own (one per accelerator)."""
    if _nested_process():
        return None
    return _hook(config)
