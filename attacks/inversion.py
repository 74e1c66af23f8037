"""Token inversion: recover each input token from a token-level release.

Paper: Chen Qu et al. "Natural Language Understanding with Privacy-Preserving BERT." CIKM 2021, §5.4,
after Congzheng Song and Ananth Raghunathan. "Information Leakage in Embedding Models." CCS 2020.
Threat model: the adversary holds the public input embedding table, the public mechanism with its
parameters, the task corpus (for token frequencies) and the release. For released token vectors it
guesses the regular vocabulary token nearest to each vector (exact search); for a released token
sequence it guesses the released token itself, so ``token_accuracy`` is the fraction of tokens the
mechanism left unchanged. For token sequences it also makes the Bayesian guess
argmax_x Pr[x]·Pr[y|x] (bench.posterior: prior from the corpus' token counts, channel from the
public mechanism), reported as ``bayes_token_accuracy``. Metric: fraction of the evaluation set's
(regular) tokens recovered at their position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import Attack, PublicKnowledge, Release, ReleaseKind, Truth, register_attack
from bench.mechanisms import (
    client_token_ids,
    embedding_table,
    nearest_tokens,
    regular_token_ids,
    token_counts,
)
from bench.params import require
from bench.seeding import numpy_generator


@register_attack()
@dataclass
class Inversion(Attack):
    """Nearest-token inversion of token vectors; unchanged-token rate of token sequences."""

    version: ClassVar[str] = "2"  # 2: adds the Bayesian guess
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.TOKEN_EMBEDDINGS, ReleaseKind.TEXT)

    bayes: bool = True  # also make the Bayesian guess for text releases of a known mechanism
    trials: int = 20  # d_chi text only: mechanism runs per candidate token to estimate its channel
    support: int = 2000  # d_chi text only: candidate input tokens (the most frequent in the corpus)

    def __post_init__(self) -> None:
        require(self.trials >= 1, f"inversion trials must be >= 1, got {self.trials}.")
        require(self.support >= 1, f"inversion support must be >= 1, got {self.support}.")

    def attack(self, release: Release, public: PublicKnowledge) -> dict[str, list[np.ndarray]]:
        """Guessed token ids for every released sentence, by metric name."""
        regular = regular_token_ids(public.encoder.tokenizer.get_vocab())
        table = embedding_table(public.encoder)
        if release.kind is not ReleaseKind.TEXT:
            return {"token_accuracy": nearest_tokens(list(release.data), table, regular)}
        items = list(release.data)
        released = client_token_ids(public.encoder, items) if items and isinstance(items[0], str) else items
        guesses = {"token_accuracy": released}
        if self._bayes_applies(release):
            from bench.posterior import bayes_guesses

            counts = token_counts(client_token_ids(public.encoder, public.corpus), len(table))
            guesses["bayes_token_accuracy"] = bayes_guesses(
                released, release.public["mechanism"], table, regular, counts, numpy_generator(0, "inversion-channel"),
                trials=self.trials, support=self.support,
            )
        return guesses

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator):
        """A uniformly drawn regular token at every released position (one draw serves every metric)."""
        regular = regular_token_ids(public.encoder.tokenizer.get_vocab())
        drawn = [rng.choice(regular, size=len(x)) for x in release.data]
        return {"token_accuracy": drawn, **({"bayes_token_accuracy": drawn} if self._bayes_applies(release) else {})}

    def _bayes_applies(self, release: Release) -> bool:
        return self.bayes and release.kind is ReleaseKind.TEXT and bool(release.public.get("mechanism"))

    def score(self, guesses: dict[str, list[np.ndarray]], truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Fraction of the true tokens guessed at their position, for each kind of guess."""
        true_ids = client_token_ids(public.encoder, truth.texts)
        total = sum(len(t) for t in true_ids)
        return {name: _hits(found, true_ids) / total if total else 0.0 for name, found in guesses.items()}


def _hits(guesses: list[np.ndarray], true_ids: list[np.ndarray]) -> int:
    return sum(int(np.sum(g[: len(t)] == t[: len(g)])) for g, t in zip(guesses, true_ids))
