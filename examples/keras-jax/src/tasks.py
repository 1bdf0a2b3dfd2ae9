"""Keras 3 on JAX across the pool: every node trains on its own shard, and together one model.

The ``jax`` plugin has initialised JAX's distributed runtime and the ``keras`` plugin has set
``KERAS_BACKEND=jax`` and a ``DataParallel`` distribution over every device of every node before this
runs, so the code is plain Keras. The data is scikit-learn's digits (8x8 handwritten digits, shipped
with scikit-learn: nothing to download), a small stand-in for MNIST.
"""

from __future__ import annotations

from typing import Any, Dict

import skyward as sky


def train(epochs: int, batch_size: int) -> Dict[str, Any]:
    import jax
    import keras
    import numpy as np
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    images = (images / 16.0).astype("float32")
    # The same held-out set everywhere; each node trains on its own shard of the rest.
    test_images, test_labels = images[-256:], labels[-256:]
    train_images, train_labels = sky.shard(
        images[:-256], labels[:-256], shuffle=True, seed=0, drop_last=True
    )
    train_images, train_labels = np.asarray(train_images), np.asarray(train_labels)
    usable = len(train_images) // batch_size * batch_size  # whole batches only, the same on every node
    train_images, train_labels = train_images[:usable], train_labels[:usable]

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=0.01),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    history = model.fit(
        train_images, train_labels, epochs=epochs, batch_size=batch_size, verbose=0, shuffle=False
    )
    _, test_accuracy = model.evaluate(test_images, test_labels, verbose=0)
    distribution = keras.distribution.distribution()
    return {
        "process_index": jax.process_index(),
        "devices": len(jax.devices()),
        "backend": keras.backend.backend(),
        "distribution": type(distribution).__name__ if distribution is not None else None,
        "train_samples": int(len(train_images)),
        "losses": [float(loss) for loss in history.history["loss"]],
        "test_accuracy": float(test_accuracy),
        "weights_sum": float(sum(np.asarray(weight).sum() for weight in model.get_weights())),
    }
