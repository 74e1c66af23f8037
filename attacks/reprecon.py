"""Representation reconstruction (RepRecon): learn to undo the defense, then search like RSS.

Paper: Huang et al. "TextHide: Tackling Data Privacy in Language Understanding Tasks." Findings of
EMNLP 2020, Appendix C.3 and Table 8.
Threat model: the adversary holds the public encoder, the task corpus, and pairs of released and
original representations for the training split (the release's ``known_pairs``: it knows which
training sentence each released training row came from). It trains an MLP (two hidden layers of
1024, 20 epochs) to map a released representation to the original one, maps each released
evaluation row through it, and returns the corpus sentence nearest (cosine) to the reconstruction.

Scored with RSS's five metrics (Identity, JCdist, TF-IDFsim, Label, SBERTsim); the random reference
returns a uniformly drawn corpus sentence, as in ``rss``. The MLP's initialisation and batch order
are seeded by the ``seed`` parameter, so two runs of one spec attack identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import PublicKnowledge, Release, ReleaseKind, register_attack, require, within
from bench.attacks.rss import RSS
from bench.core.errors import BenchError
from bench.core.progress import track
from bench.core.seeding import derive_seed
from bench.privacy.neighbours import cosine_search


@register_attack()
@dataclass
class RepRecon(RSS):
    """An MLP trained on known (released, original) pairs reconstructs representations; RSS searches them."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.SENTENCE_EMBEDDINGS,)

    hidden: int = within(1024, "[1, 65536]")  # width of each of the MLP's two hidden layers (paper: 1024, 1024)
    epochs: int = within(20, "[1, 1e5]")  # passes over the known pairs (paper: 20)
    lr: float = within(1e-3, "(0, 10]")  # Adam learning rate
    batch_size: int = within(64, "[1, 65536]")  # pairs per step
    seed: int = within(0, "[0, 4294967295]")  # seeds the MLP's initialisation and batch order

    def __post_init__(self) -> None:
        require(self.hidden >= 1, f"reprecon hidden must be >= 1, got {self.hidden}.")
        require(self.epochs >= 1, f"reprecon epochs must be >= 1, got {self.epochs}.")
        require(self.lr > 0, f"reprecon lr must be positive, got {self.lr}.")
        require(self.batch_size >= 1, f"reprecon batch_size must be >= 1, got {self.batch_size}.")

    def attack(self, release: Release, public: PublicKnowledge) -> np.ndarray:
        """Index of the corpus sentence nearest to each reconstructed representation."""
        if release.known_pairs is None:
            raise BenchError("reprecon needs known (released, original) pairs, and this release has none.")
        corpus_reps = public.encoder.encode(public.index)
        released_train, rows = release.known_pairs
        reconstruct = self.fit(released_train, corpus_reps[rows])
        _, nearest = cosine_search(corpus_reps, reconstruct(release.data), k=1)
        return nearest[:, 0]

    def fit(self, released: np.ndarray, original: np.ndarray):
        """Train the reconstruction MLP with MSE; returns ``released rows -> reconstructed rows``."""
        import torch
        from torch import nn

        from bench.models.generators import torch_generator

        x, y = torch.as_tensor(released, dtype=torch.float32), torch.as_tensor(original, dtype=torch.float32)
        with torch.random.fork_rng():
            torch.manual_seed(derive_seed(self.seed, "reprecon-init"))
            model = nn.Sequential(
                nn.Linear(x.shape[1], self.hidden), nn.ReLU(),
                nn.Linear(self.hidden, self.hidden), nn.ReLU(),
                nn.Linear(self.hidden, y.shape[1]),
            )
        optimizer = torch.optim.Adam(model.parameters(), lr=self.lr, foreach=True)
        order_generator = torch_generator(self.seed, "reprecon-batches")
        for _ in track(range(self.epochs), f"reprecon: training the reconstruction MLP on {len(x):,} pairs",
                       unit="epochs"):
            order = torch.randperm(len(x), generator=order_generator)
            for start in range(0, len(x), self.batch_size):
                idx = order[start : start + self.batch_size]
                loss = nn.functional.mse_loss(model(x[idx]), y[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        model.eval()

        def reconstruct(rows: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                return model(torch.as_tensor(rows, dtype=torch.float32)).numpy()

        return reconstruct
