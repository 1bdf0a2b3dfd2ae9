"""Training through volumes: the dataset is read from one mounted bucket, checkpoints are written to
another, with ordinary file I/O (the Python project's guide 17, on CPU)."""

import csv
import json
import os

import skyward as sky


def train(data_dir, checkpoint_dir, epochs, learning_rate, every):
    with open(os.path.join(data_dir, "train.csv"), newline="") as handle:
        rows = [(float(row["x"]), float(row["y"])) for row in csv.DictReader(handle)]
    node = sky.instance_info().node
    # This node's stripe of the rows; a linear model fitted by gradient descent.
    mine = sky.shard(rows)
    weight, bias = 0.0, 0.0
    losses = []
    written = []
    for epoch in range(1, epochs + 1):
        grad_w = sum(2 * (weight * x + bias - y) * x for x, y in mine) / len(mine)
        grad_b = sum(2 * (weight * x + bias - y) for x, y in mine) / len(mine)
        weight -= learning_rate * grad_w
        bias -= learning_rate * grad_b
        losses.append(sum((weight * x + bias - y) ** 2 for x, y in mine) / len(mine))
        if epoch % every:
            continue
        path = os.path.join(checkpoint_dir, f"node-{node}", f"epoch-{epoch}.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            json.dump({"epoch": epoch, "weight": weight, "bias": bias, "loss": losses[-1]}, handle)
        written.append(os.path.relpath(path, checkpoint_dir))
    return {"node": node, "rows": len(mine), "losses": losses, "weight": weight, "bias": bias, "checkpoints": written}


def try_to_write(data_dir):
    try:
        with open(os.path.join(data_dir, "scratch.txt"), "w") as handle:
            handle.write("no")
        return "written"
    except OSError as error:
        return error.strerror
