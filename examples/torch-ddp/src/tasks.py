"""PyTorch DistributedDataParallel on the pool: one model trained by every node together.

The ``torch`` plugin has already joined every worker to one process group (``gloo`` here: CPUs) when
this runs, so the code is plain PyTorch DDP: a ``DistributedSampler`` gives each rank its own part of
the data, DDP averages the gradients across ranks in ``backward()``, and ``all_reduce`` turns each
rank's loss into the loss over the whole data set.
"""

from __future__ import annotations

from typing import Any, Dict


def train(epochs: int, batch_size: int, learning_rate: float) -> Dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    torch.set_num_threads(1)  # one node per core is plenty for a tiny model
    rank, world_size = dist.get_rank(), dist.get_world_size()

    # The same synthetic regression data on every rank (same seed); the sampler splits it.
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(1024, 8, generator=generator)
    true_weights = torch.randn(8, 1, generator=generator)
    targets = inputs @ true_weights + 0.1 * torch.randn(1024, 1, generator=generator)
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)

    torch.manual_seed(rank)  # different initial weights per rank: DDP broadcasts rank 0's
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    loss_function = torch.nn.MSELoss(reduction="sum")

    losses = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a different shuffle every epoch, the same on every rank
        total = torch.zeros(2)  # this rank's summed loss and sample count
        for batch_inputs, batch_targets in loader:
            optimizer.zero_grad()
            loss = loss_function(model(batch_inputs), batch_targets)
            (loss / len(batch_inputs)).backward()  # DDP averages these gradients across ranks
            optimizer.step()
            total += torch.tensor([loss.item(), len(batch_inputs)])
        dist.all_reduce(total)  # summed over every rank: the epoch's loss over the whole data set
        losses.append((total[0] / total[1]).item())

    parameters = torch.cat([parameter.detach().flatten() for parameter in model.parameters()])
    return {
        "rank": rank,
        "world_size": world_size,
        "samples": len(sampler),
        "losses": losses,
        "parameters": parameters.tolist(),
    }
