"""Torch generators for one purpose of one run (``bench.core.seeding`` derives their seeds)."""

from __future__ import annotations

from bench.core.seeding import derive_seed


def torch_generator(seed: int, *purpose: str):
    """A CPU ``torch.Generator`` for one purpose of one run."""
    import torch

    generator = torch.Generator()
    generator.manual_seed(derive_seed(seed, *purpose))
    return generator
