"""The head's training loop: the foreach optimizer path is the per-parameter path, bit for bit."""

from __future__ import annotations

import numpy as np
import torch

from bench.models.training import TrainingConfig, targets_for, train_head

ADAM = torch.optim.Adam


def _per_parameter_adam(params, lr, foreach):
    """Adam as torch runs it on CPU by default (one call per parameter and operation)."""
    assert foreach is True  # the loop asks for the foreach path
    return ADAM(params, lr=lr, foreach=False)


def test_foreach_adam_trains_the_same_head_as_the_per_parameter_default(monkeypatch):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(300, 24)).astype(np.float32)
    targets = targets_for(rng.integers(0, 3, size=300), 3)
    config = TrainingConfig(epochs=3, batch_size=32)
    unchanged = lambda x, y, generator: (x, y)  # noqa: E731
    foreach_head = train_head(features, targets, unchanged, config, seed=1)
    monkeypatch.setattr(torch.optim, "Adam", _per_parameter_adam)
    default_head = train_head(features, targets, unchanged, config, seed=1)
    for (name, a), (_, b) in zip(foreach_head.state_dict().items(), default_head.state_dict().items()):
        assert torch.equal(a, b), name
    assert not torch.equal(foreach_head[-1].weight, torch.zeros_like(foreach_head[-1].weight))
