"""Federated simulation (TextHide Algorithm 2): one client with full batches is ordinary training."""

import numpy as np
import torch

from bench.models.training import TrainingConfig, client_shards, initial_head, loss_fn, train_head


def data(n=40, dim=8, seed=0):
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((n, dim)).astype(np.float32)
    labels = (features[:, 0] > 0).astype(int)
    return features, np.eye(2, dtype=np.float32)[labels]


def identity(reps, targets, generator):
    return reps, targets


def full_batch_gradient_descent(features, targets, config, seed, client_batches):
    """Plain training written out: every step averages the losses of the given index sets."""
    head = initial_head(features.shape[1], targets.shape[1], config, seed).train()
    optimizer = torch.optim.Adam(head.parameters(), lr=config.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=config.epochs)
    x, y = torch.from_numpy(features), torch.from_numpy(targets)
    for _ in range(config.epochs):
        loss = torch.stack([loss_fn(head(x[idx]), y[idx], False) for idx in client_batches]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    return head.eval()


def same_weights(a, b):
    return all(torch.allclose(p, q, atol=1e-6) for p, q in zip(a.parameters(), b.parameters()))


def test_one_client_with_full_batches_is_ordinary_training():
    features, targets = data()
    config = TrainingConfig(epochs=15, lr=1e-2, batch_size=len(features))
    federated = train_head(features, targets, [identity], config, seed=3, shards=client_shards(40, 1, 3))
    plain = full_batch_gradient_descent(features, targets, config, 3, [np.arange(40)])
    assert same_weights(federated, plain)
    untrained = initial_head(8, 2, config, 3)
    assert not same_weights(federated, untrained)  # the comparison is not vacuous


def test_two_clients_average_their_gradients():
    features, targets = data()
    shards = client_shards(40, 2, seed=1)
    assert sorted(np.concatenate(shards).tolist()) == list(range(40))  # disjoint and complete
    config = TrainingConfig(epochs=10, lr=1e-2, batch_size=20)  # each client's whole shard per round
    federated = train_head(features, targets, [identity, identity], config, seed=1, shards=shards)
    plain = full_batch_gradient_descent(features, targets, config, 1, shards)
    assert same_weights(federated, plain)


def test_shards_with_unequal_sizes_differ_from_pooled_training():
    features, targets = data()
    shards = [np.arange(10), np.arange(10, 40)]  # FedSGD weighs clients equally, not examples
    config = TrainingConfig(epochs=10, lr=1e-2, batch_size=40)
    federated = train_head(features, targets, [identity, identity], config, seed=1, shards=shards)
    pooled = full_batch_gradient_descent(features, targets, config, 1, [np.arange(40)])
    assert not same_weights(federated, pooled)
