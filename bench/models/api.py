"""A prediction API's victim: an MLP head on frozen encoder features, trained on the server's (possibly defended)
training data, answering queries with probability vectors after an output defense.

Plain training is ``bench.models.training.train_head`` (soft-label cross-entropy). The nasty teacher (Ma et al.
2021, "Undistillable", Eq. 2) trains the victim instead with

    L = CE(victim(x), y) - omega * tau^2 * KL(softmax(victim(x) / tau) || softmax(adversary(x) / tau)),

where the adversary is a normally trained network of the same architecture (here: the plain victim head, on the
same frozen features): the victim keeps its accuracy while its soft outputs move as far as possible from what a
normal network would teach. Only the head trains (the encoder is frozen): a deviation from the paper, which
trains the whole network.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from bench.core.errors import BenchError
from bench.core.params import require
from bench.models.generators import torch_generator
from bench.models.training import cosine_schedule, initial_head, targets_for, train_head
from bench.privacy.outputs import softmax

if TYPE_CHECKING:
    from bench.core.components import OutputDefense
    from bench.models.encoders import Encoder


@contextmanager
def one_thread() -> Iterator[None]:
    """torch and BLAS on one thread while the block runs: the small steps of heads and attribute MLPs thrash on two
    shared cores (a victim head's 840 Adam steps took 170 s with two threads on the loaded machine)."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(before)


def train_victim(features: np.ndarray, labels: np.ndarray, num_labels: int, config, seed: int, objective=None,
                 privacy=None):
    """The victim head: plain cross-entropy (by DP-SGD with ``privacy``, ``bench.models.dp_sgd.DPSGD``), or the
    self-undermining objective ``objective`` (``bench.privacy.public.SelfUndermining``) against a plainly trained
    head. Returns ``(head, facts)``."""
    require(objective is None or privacy is None,
            "a self-undermining victim trains by its own distillation loop, not by DP-SGD.")
    targets = targets_for(labels, num_labels)
    unchanged = lambda x, y, generator: (x, y)  # noqa: E731  (the server's own data)
    with one_thread():
        plain = train_head(features, targets, unchanged, config, seed, privacy=privacy)
        if objective is None:
            return plain, {}
        return nasty_head(features, targets, plain, objective.tau, objective.omega, config, seed)


def nasty_head(features: np.ndarray, targets: np.ndarray, adversary, tau: float, omega: float, config, seed: int):
    """Train a head from its seeded initialisation with the self-undermining loss against ``adversary``'s logits.

    Returns ``(head, facts)``: facts hold the mean KL(victim || adversary) at temperature tau reached at the end.
    """
    import torch
    import torch.nn.functional as F


    x, y = torch.from_numpy(features), torch.from_numpy(targets)
    with torch.inference_mode():
        teacher = F.log_softmax(adversary(x) / tau, dim=1)
    head = initial_head(x.shape[1], y.shape[1], config, seed).train()
    optimizer = torch.optim.Adam(head.parameters(), lr=config.lr, foreach=True)
    rounds = -(-len(x) // config.batch_size)
    schedule = cosine_schedule(optimizer, config, rounds)
    order_generator = torch_generator(seed, "nasty-batches")
    for _ in range(config.epochs):
        order = torch.randperm(len(x), generator=order_generator)
        for start in range(0, len(x), config.batch_size):
            idx = order[start : start + config.batch_size]
            if len(idx) < 2:
                continue
            loss = self_undermining_loss(head(x[idx]), y[idx], teacher[idx], tau, omega)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    head.eval()
    with torch.inference_mode():
        kl = F.kl_div(teacher, F.log_softmax(head(x) / tau, dim=1), log_target=True, reduction="batchmean")
    return head, {"nasty_kl_from_adversary": float(kl)}


def self_undermining_loss(logits, targets, teacher_log_probs, tau: float, omega: float):
    """Ma et al.'s Eq. 2 on a batch: mean cross-entropy on the (soft) targets minus
    ``omega * tau**2`` times the mean KL(softmax(logits / tau) || the adversary's tempered distribution)."""
    import torch.nn.functional as F

    ce = -(targets * F.log_softmax(logits, dim=1)).sum(dim=1).mean()
    kl = F.kl_div(teacher_log_probs, F.log_softmax(logits / tau, dim=1), log_target=True, reduction="batchmean")
    return ce - omega * tau**2 * kl


def logits_of(head, features: np.ndarray) -> np.ndarray:
    """The head's logits for a batch of features."""
    import torch

    with torch.inference_mode():
        return head(torch.as_tensor(features, dtype=torch.float32)).double().numpy()


@dataclass
class PredictionAPI:
    """The served victim: texts -> encoder features -> logits -> the output defense's answers.

    The defense's noise comes from one generator, drawn from in the order queries arrive (the API's own secret).
    """

    encoder: Encoder
    head: Any
    defense: OutputDefense | None  # None: the plain softmax
    rng: np.random.Generator

    def logits(self, texts: list) -> np.ndarray:
        """The victim's logits for raw texts."""
        return logits_of(self.head, self.encoder.encode(list(texts)))

    def answer_logits(self, logits: np.ndarray) -> np.ndarray:
        """The answers for a batch of logits (the output defense applied)."""
        if not np.isfinite(logits).all():
            raise BenchError("the victim's outputs hold NaN or infinite values (its training diverged), so nothing is "
                             "recorded; try parameter values nearer their defaults (the defense's, --train-args lr=).")
        return softmax(logits) if self.defense is None else self.defense.answer(logits, self.rng)

    def __call__(self, texts: list) -> np.ndarray:
        return self.answer_logits(self.logits(texts))
