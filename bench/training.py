"""The server's utility model: an MLP head on sentence representations, trained on releases.

Two modes. ``frozen`` (the CPU default): encoder features are computed once and cached, and only
the head trains. ``finetune`` (for GPUs, as the TextHide paper trains): the encoder trains through
the defense's batch transform together with the head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from bench.params import require
from bench.progress import track

# (representations, targets, generator) -> (released representations, released targets)
BatchTransform = Callable[..., tuple]

MODE_DEFAULTS = {
    # frozen: Adam on cached features; every epoch re-draws the defense's randomness (TextHide's
    # masks and partners), so epochs are cheap augmentation. On SST-2 at (256, 4), seeds 0-2:
    # 60 epochs / batch 32 / lr 1e-3 gave 0.704, 0.718, 0.693; 120 / 64 / 2e-3 gave 0.726, 0.733, 0.719.
    "frozen": {"epochs": 120, "lr": 2e-3, "batch_size": 64},
    # finetune: the TextHide reference settings for SST-2 (bert-base-cased, 20 epochs, lr 1e-5).
    "finetune": {"epochs": 20, "lr": 1e-5, "batch_size": 32},
}
# An untrained BiLSTM needs a transformer's-pretraining-free learning rate (offline choice, not the paper's).
ENCODER_DEFAULTS = {"bilstm": {"finetune": {"epochs": 10, "lr": 1e-3, "batch_size": 32}}}


@dataclass
class TrainingConfig:
    """How the server trains its utility model."""

    mode: str = "frozen"  # frozen (cached features, head only) or finetune (encoder trains too)
    epochs: int = 120  # passes over the training releases
    lr: float = 2e-3  # peak learning rate (Adam; AdamW when fine-tuning), cosine decay to 0
    batch_size: int = 64  # examples per batch; TextHide mixes within a batch (paper: 32)
    head_layers: int = 2  # hidden layers of the MLP head, each as wide as the encoder
    activation: str = "relu"  # relu, or tanh as in TextHide's code (tanh fails on frozen masked features)
    dropout: float = 0.0  # dropout on the head's input (TextHide used 0.4 on SST-2 when fine-tuning)

    def __post_init__(self) -> None:
        require(self.mode in MODE_DEFAULTS, f"mode must be frozen or finetune, got '{self.mode}'.")
        require(self.epochs >= 1, f"epochs must be at least 1, got {self.epochs}.")
        require(self.lr > 0, f"lr must be positive, got {self.lr}.")
        require(self.batch_size >= 2, f"batch_size must be at least 2, got {self.batch_size}.")
        require(self.head_layers >= 0, f"head_layers must be >= 0, got {self.head_layers}.")
        require(0 <= self.dropout < 1, f"dropout must be in [0, 1), got {self.dropout}.")
        require(self.activation in ACTIVATIONS, f"activation must be relu or tanh, got '{self.activation}'.")


def training_defaults(mode: str, encoder: str = "") -> dict:
    """The mode- (and encoder-) dependent defaults, applied before user overrides."""
    require(mode in MODE_DEFAULTS, f"mode must be frozen or finetune, got '{mode}'.")
    require(not (encoder == "bilstm" and mode == "frozen"),
            "the bilstm encoder has no pretrained weights: run it with --mode finetune.")
    return {"mode": mode, **MODE_DEFAULTS[mode], **ENCODER_DEFAULTS.get(encoder, {}).get(mode, {})}


ACTIVATIONS = ("relu", "tanh")


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


def _train_loop(
    n_examples, dim, num_outputs, config, seed, description, batch, optimizer_cls, extra_params=(), device="cpu"
):
    """Seeded batches, the client's own generator, cosine schedule; ``batch(idx, client) -> (x, y)``."""
    import torch

    from bench.seeding import derive_seed, torch_generator

    regression = num_outputs == 1
    order_generator = torch_generator(seed, "server-batches")
    client = torch_generator(seed, "client-hide")  # the defense's secret randomness
    with torch.random.fork_rng():
        torch.manual_seed(derive_seed(seed, "head-init"))  # head weights and dropout
        head = make_head(dim, num_outputs, config).to(device)
        optimizer = optimizer_cls(list(extra_params) + list(head.parameters()), lr=config.lr)
        schedule = _cosine(optimizer, config, n_examples)
        head.train()
        for _ in track(range(config.epochs), description, config.epochs):
            order = torch.randperm(n_examples, generator=order_generator)
            for start in range(0, n_examples, config.batch_size):
                idx = order[start : start + config.batch_size]
                if len(idx) < 2:
                    continue
                x, y = batch(idx, client)
                loss = loss_fn(head(x), y, regression)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
    return head.eval()


def train_head(
    features: np.ndarray,
    targets: np.ndarray,
    transform: BatchTransform,
    config: TrainingConfig,
    seed: int,
):
    """Train an MLP head on ``transform``-ed batches of cached features; returns the head."""
    import torch

    x_all, y_all = torch.from_numpy(features), torch.from_numpy(targets)
    return _train_loop(
        len(features), features.shape[1], targets.shape[1], config, seed,
        f"training head ({len(features)} examples)",
        lambda idx, client: transform(x_all[idx], y_all[idx], client),
        torch.optim.Adam,
    )


def finetune(
    encoder,
    texts: Sequence[str],
    targets: np.ndarray,
    transform: BatchTransform,
    config: TrainingConfig,
    seed: int,
):
    """Train encoder and head together through ``transform``; returns the head (encoder updated)."""
    import torch

    y_all = torch.from_numpy(targets)

    def batch(idx, client):
        reps = encoder.pooled([texts[i] for i in idx.tolist()])
        x, y = transform(reps.cpu(), y_all[idx], client)
        return x.to(encoder.device), y.to(encoder.device)

    encoder.model.train()
    head = _train_loop(
        len(texts), encoder.dim, targets.shape[1], config, seed, f"fine-tuning ({len(texts)} examples)",
        batch, torch.optim.AdamW, encoder.model.parameters(), encoder.device,
    )
    encoder.model.eval()
    return head.cpu()


def _cosine(optimizer, config: TrainingConfig, n_examples: int):
    """Cosine decay of the learning rate to 0 over all training steps."""
    import torch

    steps = config.epochs * -(-n_examples // config.batch_size)
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(steps, 1))


def predict(head, features: np.ndarray, num_labels: int) -> np.ndarray:
    """Class ids (or regression values) of the head on released features."""
    import torch

    with torch.inference_mode():
        outputs = head(torch.as_tensor(features, dtype=torch.float32))
    if num_labels == 1:
        return outputs[:, 0].numpy()
    return outputs.argmax(dim=1).numpy()
