"""Token inversion: recover each input token from a token-level release.

Paper: Chen Qu et al. "Natural Language Understanding with Privacy-Preserving BERT." CIKM 2021, §5.4,
after Congzheng Song and Ananth Raghunathan. "Information Leakage in Embedding Models." CCS 2020.
Threat model: the adversary holds the public token space (the encoder's input embedding table, or
the word-vector file a release names), the public mechanism with its parameters, public text (for token
frequencies) and the release. For released token vectors it
guesses the regular vocabulary token nearest to each vector (exact search); for a released token
sequence it guesses the released token itself, so ``token_accuracy`` is the fraction of tokens the
mechanism left unchanged. For token sequences it also makes the Bayesian guess
argmax_x Pr[x]·Pr[y|x] (bench.privacy.posterior: prior from public text's token counts, channel from the
public mechanism), reported as ``bayes_token_accuracy``. Metric: fraction of the evaluation set's
(regular) tokens recovered at their position.
The prior and the candidate inputs are counted on public sentences that no private split of the run holds, plus
one for every token the release shows, so that a released token public text lacks can still be its own input
(version 4; version 2 counted the task corpus, attacked sentences included, which let tokens occurring only there
be won through that leak; version 3 had no add-one and guessed such tokens as something else). SanText+'s
sensitive set is the least frequent share w of that vocabulary: the adversary's estimate of the client's set, not
the set itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from bench import Attack, Metric, PublicKnowledge, Release, ReleaseKind, Truth, register_attack
from bench.core.examples import flatten_segments
from bench.core.params import require, within
from bench.core.seeding import numpy_generator
from bench.privacy.mechanisms import nearest_tokens, token_counts
from bench.privacy.posterior import bayes_guesses
from bench.privacy.token_space import space_of


@dataclass
class TokenGuesses:
    """Guessed token ids per sentence for each metric, and the token space they are in."""

    by_metric: dict[str, list[np.ndarray]]
    space: Any


@register_attack()
@dataclass
class Inversion(Attack):
    """Nearest-token inversion of token vectors; unchanged-token rate of token sequences."""

    version: ClassVar[str] = "2"  # 2: adds the Bayesian guess; 3, 4 (version_for): its prior from public text
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.TOKEN_EMBEDDINGS, ReleaseKind.TEXT)
    reads_encoder_body: ClassVar[bool] = False  # the embedding table and tokenizer alone
    knowledge: ClassVar[dict[str, str]] = {
        "public": "Qu et al. §5.4: the Bayesian guess's prior Pr[x] is the token frequency of public text",
    }
    # version 3 moved only the Bayesian guess: the plain guess and the random draws are as before
    stable: ClassVar[dict[str, int]] = {"privacy/token_accuracy": 1, "random/token_accuracy": 2,
                                        "random/bayes_token_accuracy": 2}
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("token_accuracy", True, "fraction of the evaluation tokens recovered at their position"),
        Metric("bayes_token_accuracy", True,
               "fraction of the evaluation tokens recovered by the Bayesian (maximum a posteriori) guess"),
    )

    bayes: bool = True  # also make the Bayesian guess for text releases of a known mechanism
    trials: int = within(20, "[1, 1e5]")  # d_chi text only: mechanism runs per candidate token to estimate its channel
    support: int = within(2000, "[1, 1e8]")  # d_chi text only: candidate input tokens (the most frequent in the corpus)

    @classmethod
    def version_for(cls, args: dict[str, Any], kind: ReleaseKind | None) -> str:
        """4 where the Bayesian guess runs (text releases): its prior from public text, add-one on the release's
        tokens (3 had no smoothing); else 2."""
        return "4" if kind is ReleaseKind.TEXT and args.get("bayes", True) else cls.version

    def __post_init__(self) -> None:
        require(self.trials >= 1, f"inversion trials must be >= 1, got {self.trials}.")
        require(self.support >= 1, f"inversion support must be >= 1, got {self.support}.")

    def attack(self, release: Release, public: PublicKnowledge) -> TokenGuesses:
        """Guessed token ids for every released sentence, by metric name."""
        space = space_of(release.space, public.encoder)
        if release.kind is not ReleaseKind.TEXT:
            vectors, _ = flatten_segments(list(release.data))
            return TokenGuesses({"token_accuracy": nearest_tokens(vectors, space.table, space.candidates)}, space)
        released = _released_ids(release, space)
        guesses = {"token_accuracy": released}
        if self._bayes_applies(release):
            corpus_ids = space.client_ids(list(public.public))
            counts = token_counts([x[x >= 0] for x in corpus_ids], len(space.table))
            shown = np.concatenate([x[x >= 0] for x in released]) if released else np.zeros(0, dtype=np.int64)
            counts[np.unique(shown)] += 1  # add-one on the release's tokens: one public text lacks can be its input
            guesses["bayes_token_accuracy"] = bayes_guesses(
                released, release.mechanism, space.table, self._vocabulary(space, counts), counts,
                numpy_generator(0, "inversion-channel"), trials=self.trials, support=self.support,
            )
        return TokenGuesses(guesses, space)

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> TokenGuesses:
        """A uniformly drawn vocabulary token at every released position (one draw serves every metric)."""
        space = space_of(release.space, public.encoder)
        shapes = _released_ids(release, space) if release.kind is ReleaseKind.TEXT else \
            flatten_segments(list(release.data))[0]
        drawn = [rng.choice(space.candidates, size=len(x)) for x in shapes]
        names = ["token_accuracy"] + (["bayes_token_accuracy"] if self._bayes_applies(release) else [])
        return TokenGuesses({name: drawn for name in names}, space)

    def score(self, guesses: TokenGuesses, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Fraction of the true tokens guessed at their position, for each kind of guess."""
        true_ids = guesses.space.client_ids(flatten_segments(truth.texts)[0])  # a missing word (-1) never matches
        total = sum(len(t) for t in true_ids)
        return {name: hits(found, true_ids) / total if total else 0.0 for name, found in guesses.by_metric.items()}

    def _bayes_applies(self, release: Release) -> bool:
        return self.bayes and release.kind is ReleaseKind.TEXT and release.mechanism.has_channel

    @staticmethod
    def _vocabulary(space, counts: np.ndarray) -> np.ndarray:
        """The mechanism's vocabulary as the adversary rebuilds it (word spaces: the public text's words)."""
        return space.candidates if space.format == "wordpiece" else np.flatnonzero(counts)


def _released_ids(release: Release, space) -> list[np.ndarray]:
    """The released token ids per segment (a pair's two sentences in turn; released words read back in the space)."""
    items, _ = flatten_segments(list(release.data))
    return space.released_ids(items) if items and isinstance(items[0], str) else items


def hits(guesses: list[np.ndarray], true_ids: list[np.ndarray]) -> int:
    return sum(int(np.sum(g[: len(t)] == t[: len(g)])) for g, t in zip(guesses, true_ids))
