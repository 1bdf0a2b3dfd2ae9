"""Tasks returning torch tensors that numpy cannot hold (the value tests send them back)."""

from __future__ import annotations


def tensor(kind: str):
    import torch

    if kind == "bfloat16":
        return torch.tensor([1.0, 2.5, -3.0], dtype=torch.bfloat16)
    if kind == "sparse":
        return torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (3,))
    if kind == "complex":
        return torch.tensor([1 + 2j, -3j])
    if kind == "conjugate":
        return torch.tensor([1 + 1j, 2 - 1j]).conj()
    raise ValueError(kind)


def tensors(kind: str):
    """A stream of one such tensor."""
    yield tensor(kind)
