"""The server's utility model: an MLP head on sentence representations, trained on releases.

Two modes. ``frozen`` (the CPU default): encoder features are computed once and cached, and only
the head trains. ``finetune`` (for GPUs, as the TextHide paper trains): the encoder trains through
the defense's batch transform together with the head.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from bench.core.options import TrainingConfig  # defined with the spec that records it; read here
from bench.core.params import require
from bench.core.progress import track
from bench.core.seeding import derive_seed, numpy_generator
from bench.models.generators import torch_generator

# (representations, targets, generator) -> (released representations, released targets)
BatchTransform = Callable[..., tuple]

MODE_DEFAULTS = {
    # frozen: Adam on cached features; a defense that re-hides every epoch (TextHide's masks and
    # partners) re-draws its randomness each epoch, so epochs are cheap augmentation. On SST-2 at (256, 4), seeds 0-2:
    # 60 epochs / batch 32 / lr 1e-3 gave 0.704, 0.718, 0.693; 120 / 64 / 2e-3 gave 0.726, 0.733, 0.719.
    "frozen": {"epochs": 120, "lr": 2e-3, "batch_size": 64},
    # finetune: the TextHide reference settings for SST-2 (bert-base-cased, 20 epochs, lr 1e-5).
    "finetune": {"epochs": 20, "lr": 1e-5, "batch_size": 32},
}
# An untrained BiLSTM needs a transformer's-pretraining-free learning rate (offline choice, not the paper's).
ENCODER_DEFAULTS = {"bilstm": {"finetune": {"epochs": 10, "lr": 1e-3, "batch_size": 32}}}


def training_defaults(mode: str, encoder: str = "") -> dict:
    """The mode- (and encoder-) dependent defaults, applied before user overrides."""
    require(mode in MODE_DEFAULTS, f"mode must be frozen or finetune, got '{mode}'.")
    require(not (encoder == "bilstm" and mode == "frozen"),
            "the bilstm encoder has no pretrained weights: run it with --mode finetune.")
    return {"mode": mode, **MODE_DEFAULTS[mode], **ENCODER_DEFAULTS.get(encoder, {}).get(mode, {})}


def make_head(dim: int, num_outputs: int, config: TrainingConfig):
    """MLP: dropout, then ``head_layers`` layers of width ``dim`` with the activation, then linear."""
    from torch import nn

    activation = {"relu": nn.ReLU, "tanh": nn.Tanh}[config.activation]
    layers: list = [nn.Dropout(config.dropout)]
    for _ in range(config.head_layers):
        layers += [nn.Linear(dim, dim), activation()]
    layers.append(nn.Linear(dim, num_outputs))
    return nn.Sequential(*layers)


def loss_fn(outputs, targets, regression: bool):
    """Soft-label cross-entropy (mixed one-hot targets), or MSE for regression."""
    import torch.nn.functional as F

    if regression:
        return F.mse_loss(outputs[:, 0], targets[:, 0])
    return -(targets * F.log_softmax(outputs, dim=-1)).sum(dim=1).mean()


def targets_for(labels: np.ndarray, num_labels: int) -> np.ndarray:
    """One-hot float targets for classification, a float column for regression (num_labels=1)."""
    if num_labels == 1:
        return labels.astype(np.float32).reshape(-1, 1)
    return np.eye(num_labels, dtype=np.float32)[labels.astype(int)]


def initial_head(dim: int, num_outputs: int, config: TrainingConfig, seed: int, device: str = "cpu"):
    """The server's head before training: seeded, the same weights every run of a spec starts from."""
    import torch

    with torch.random.fork_rng():
        return _seeded_head(dim, num_outputs, config, seed, device)


def initial_client_layer(dim: int, config: TrainingConfig, seed: int):
    """The client's trained layer before the hiding (a dense layer of width ``dim`` with the head's activation),
    as the gradients release's federated update has it: seeded, freshly initialised."""
    import torch
    from torch import nn

    activation = {"relu": nn.ReLU, "tanh": nn.Tanh}[config.activation]
    with torch.random.fork_rng():
        torch.manual_seed(derive_seed(seed, "client-layer-init"))
        return nn.Sequential(nn.Linear(dim, dim), activation())


def _seeded_head(dim, num_outputs, config, seed, device):
    """Seed torch's global generator and build the head (the caller forks the generator)."""
    import torch


    torch.manual_seed(derive_seed(seed, "head-init"))  # later draws (dropout) continue from here
    return make_head(dim, num_outputs, config).to(device)


def client_shards(n_examples: int, clients: int, seed: int) -> list[np.ndarray]:
    """Disjoint, seeded shards of the training indices, one per client (all of them for one client)."""
    if clients <= 1:
        return [np.arange(n_examples)]

    order = numpy_generator(seed, "client-shards").permutation(n_examples)
    return [np.sort(part) for part in np.array_split(order, clients)]


def _stream_name(base: str, client: int) -> str:
    # client 0 keeps the single-client names, so one client reproduces centralised training exactly
    return base if client == 0 else f"{base}-{client}"


def train_loop(
    shards, dim, num_outputs, config, seed, description, batch, optimizer_cls, extra_params=(), device="cpu",
    privacy=None,
):
    """Seeded rounds over client shards; ``batch(idx, client, generator) -> (x, y)`` hides one client's batch.

    Each round every client takes its next batch from its own shuffled shard and computes the loss on
    it; the server averages the clients' losses (so their gradients, as FedSGD) and takes one step.
    With a single shard holding every example this is ordinary minibatch training. ``privacy``
    (``bench.models.dp_sgd.DPSGD``) with a finite epsilon trains the head by DP-SGD instead (one client,
    the head alone); with epsilon = inf the loop below runs as it is and only its facts are recorded.
    """
    import torch


    regression = num_outputs == 1
    shards = [torch.as_tensor(np.asarray(shard), dtype=torch.long) for shard in shards]
    order_generators = [torch_generator(seed, _stream_name("server-batches", c)) for c in range(len(shards))]
    clients = [torch_generator(seed, _stream_name("client-hide", c)) for c in range(len(shards))]  # secret
    rounds = max(-(-len(shard) // config.batch_size) for shard in shards)
    if privacy is not None and privacy.private:
        require(len(shards) == 1 and not list(extra_params),
                "DP-SGD trains one client's head here (no federated clients, no fine-tuned encoder).")
        with torch.random.fork_rng():
            head = _seeded_head(dim, num_outputs, config, seed, device)
            return privacy.train(head, len(shards[0]), lambda idx: batch(shards[0][idx], 0, clients[0]), config,
                                 seed, regression, optimizer_cls, lambda opt, r: cosine_schedule(opt, config, r),
                                 lambda epochs: track(epochs, description + " by DP-SGD", config.epochs,
                                                      unit="epochs"))
    if privacy is not None:
        privacy.record_plain(sum(len(shard) for shard in shards), config.epochs * rounds)
    with torch.random.fork_rng():
        head = _seeded_head(dim, num_outputs, config, seed, device)
        # foreach: on CPU torch defaults to one call per parameter and operation; the foreach path does the same
        # arithmetic, bit for bit (tests/unit/test_training.py), in a few calls per step (25% of the main job's time)
        optimizer = optimizer_cls(list(extra_params) + list(head.parameters()), lr=config.lr, foreach=True)
        schedule = cosine_schedule(optimizer, config, rounds)
        head.train()
        for _ in track(range(config.epochs), description, config.epochs, unit="epochs"):
            orders = [shard[torch.randperm(len(shard), generator=g)] for shard, g in zip(shards, order_generators)]
            for start in range(0, rounds * config.batch_size, config.batch_size):
                losses = []
                for client, order in enumerate(orders):
                    idx = order[start : start + config.batch_size]
                    if len(idx) < 2:
                        continue
                    x, y = batch(idx, client, clients[client])
                    losses.append(loss_fn(head(x), y, regression))
                if not losses:
                    continue
                loss = losses[0] if len(losses) == 1 else torch.stack(losses).mean()  # one client: the same value
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
    return head.eval()


def _per_client(transform, shards) -> list:
    """One batch transform per client (the same one for every client unless a list is given)."""
    transforms = list(transform) if isinstance(transform, (list, tuple)) else [transform] * len(shards)
    require(len(transforms) == len(shards), "give one batch transform per client shard.")
    return transforms


def train_head(
    features: np.ndarray,
    targets: np.ndarray,
    transform: BatchTransform | Sequence[BatchTransform],
    config: TrainingConfig,
    seed: int,
    shards: Sequence[np.ndarray] | None = None,
    privacy=None,
):
    """Train an MLP head on ``transform``-ed batches of cached features; returns the head.

    ``shards`` (index arrays, one per federated client, each with its own transform) turn this into
    a FedSGD simulation; by default one client holds every example. ``privacy``: DP-SGD (``train_loop``).
    """
    import torch

    shards = list(shards) if shards is not None else [np.arange(len(features))]
    transforms = _per_client(transform, shards)
    x_all, y_all = torch.from_numpy(features), torch.from_numpy(targets)
    return train_loop(
        shards, features.shape[1], targets.shape[1], config, seed,
        f"training head ({len(features)} examples, {len(shards)} client{'s' * (len(shards) > 1)})",
        lambda idx, client, generator: transforms[client](x_all[idx], y_all[idx], generator),
        torch.optim.Adam, privacy=privacy,
    )


def finetune(
    encoder,
    texts: Sequence[str],
    targets: np.ndarray,
    transform: BatchTransform | Sequence[BatchTransform],
    config: TrainingConfig,
    seed: int,
    shards: Sequence[np.ndarray] | None = None,
):
    """Train encoder and head together through ``transform``; returns the head (encoder updated).

    ``shards`` as in ``train_head``: each client encodes its own batch with the shared encoder.
    """
    import torch

    shards = list(shards) if shards is not None else [np.arange(len(texts))]
    transforms = _per_client(transform, shards)
    y_all = torch.from_numpy(targets)

    def batch(idx, client, generator):
        reps = encoder.pooled([texts[i] for i in idx.tolist()])
        x, y = transforms[client](reps.cpu(), y_all[idx], generator)
        return x.to(encoder.device), y.to(encoder.device)

    encoder.model.train()
    head = train_loop(
        shards, encoder.dim, targets.shape[1], config, seed, f"fine-tuning ({len(texts)} examples)",
        batch, torch.optim.AdamW, encoder.model.parameters(), encoder.device,
    )
    encoder.model.eval()
    return head.cpu()


def cosine_schedule(optimizer, config: TrainingConfig, rounds_per_epoch: int):
    """Cosine decay of the learning rate to 0 over all training steps."""
    import torch

    steps = config.epochs * rounds_per_epoch
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(steps, 1))


def predict(head, features: np.ndarray, num_labels: int) -> np.ndarray:
    """Class ids (or regression values) of the head on released features."""
    import torch

    with torch.inference_mode():
        outputs = head(torch.as_tensor(features, dtype=torch.float32))
    if num_labels == 1:
        return outputs[:, 0].numpy()
    return outputs.argmax(dim=1).numpy()
