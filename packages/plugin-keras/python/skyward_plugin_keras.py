"""Worker side of ``@skyward/plugin-keras``: data-parallel distribution with the JAX backend.

``KERAS_BACKEND`` itself is set in the image's environment, before any import of Keras. With the
JAX backend on several nodes, ``around_app`` spreads Keras models over every device of the pool —
which needs ``jax.distributed`` up first: the jax plugin, listed before this one. Every node then
trains one model on the batches all nodes feed together: each passes its own shard to ``fit``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping


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


def around_app(info: Any, config: Mapping[str, Any]) -> contextlib.AbstractContextManager[None] | None:
    """With the JAX backend on several nodes: a ``DataParallel`` distribution over every device."""
    if config.get("backend") != "jax" or info.total_nodes <= 1:
        return None
    return _data_parallel()
