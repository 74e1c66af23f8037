"""Token inversion: recover each input token from a token-level release.

Paper: Chen Qu et al. "Natural Language Understanding with Privacy-Preserving BERT." CIKM 2021, §5.4,
after Congzheng Song and Ananth Raghunathan. "Information Leakage in Embedding Models." CCS 2020.
Threat model: the adversary holds the public input embedding table and the release. For released
token vectors it guesses the regular vocabulary token nearest to each vector (exact search); for a
released token sequence it guesses the released token itself, so the metric is the fraction of
tokens the mechanism left unchanged. Metric: fraction of the evaluation set's (regular) tokens
recovered at their position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import Attack, PublicKnowledge, Release, ReleaseKind, Truth, register_attack
from bench.mechanisms import client_token_ids, embedding_table, nearest_tokens, regular_token_ids


@register_attack()
@dataclass
class Inversion(Attack):
    """Nearest-token inversion of token vectors; unchanged-token rate of token sequences."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.TOKEN_EMBEDDINGS, ReleaseKind.TEXT)

    def attack(self, release: Release, public: PublicKnowledge) -> list[np.ndarray]:
        """Guessed token ids for every released sentence."""
        if release.kind is ReleaseKind.TEXT:
            items = list(release.data)
            return client_token_ids(public.encoder, items) if items and isinstance(items[0], str) else items
        regular = regular_token_ids(public.encoder.tokenizer.get_vocab())
        return nearest_tokens(list(release.data), embedding_table(public.encoder), regular)

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> list[np.ndarray]:
        """A uniformly drawn regular token at every released position."""
        regular = regular_token_ids(public.encoder.tokenizer.get_vocab())
        return [rng.choice(regular, size=len(x)) for x in release.data]

    def score(self, guesses: list[np.ndarray], truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Fraction of the true tokens guessed at their position."""
        true_ids = client_token_ids(public.encoder, truth.texts)
        hits = sum(int(np.sum(g[: len(t)] == t[: len(g)])) for g, t in zip(guesses, true_ids))
        total = sum(len(t) for t in true_ids)
        return {"token_accuracy": hits / total if total else 0.0}
