"""The Python project's guide 15 shape: a model trained in one task and evaluated in the next.

The trained ``torch.nn.Module`` is returned as it is: it travels pickled and the client holds it as
an opaque handle, which the next task receives as the same module. Arrays travel as raw buffers.
"""

import skyward as sky


@sky.function
def train(x, y, epochs):
    """Fits y = a·x + b with a one-layer network; ``x`` and ``y`` arrive as numpy arrays."""
    import torch

    torch.manual_seed(0)
    inputs = torch.from_numpy(x).unsqueeze(1)
    targets = torch.from_numpy(y).unsqueeze(1)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return model


@sky.function
def evaluate(model, x):
    """Uses the module trained by the other task; returns its predictions as a float32 array."""
    import torch

    with torch.no_grad():
        prediction = model(torch.from_numpy(x).unsqueeze(1)).squeeze(1)
    return {"weight": float(model.weight), "bias": float(model.bias), "prediction": prediction}
