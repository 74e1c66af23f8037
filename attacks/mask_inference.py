"""Mask token inference: mask each released token and let a masked LM guess the original.

Paper: Xiang Yue, Minxin Du, Tianhao Wang, Yaliang Li, Huan Sun, Sherman S. M. Chow. "Differential
Privacy for Text Analytics via Natural Text Sanitization." Findings of ACL 2021 (the mask token
inference attack of their privacy experiments).
Threat model: the adversary holds a released (sanitized) text and a masked LM — a public checkpoint,
or a privacy-adapted one (``checkpoint``), to measure whether adaptation helps the attacker too. For
each position it masks the released token and takes the MLM's most probable regular token as its
guess of the original; the context is the rest of the released text. Metric ``token_accuracy``: the
fraction of the evaluation set's tokens recovered at their position. ``mlm_top1`` states the MLM's
strength: its masked-token top-1 accuracy on 200 held-out SQuAD sentences (public text, not any GLUE
evaluation data); the head it uses goes to the record's notes. With ``max_sentences`` the metric is
over the first N released sentences only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from attacks.inversion import TokenGuesses, _hits, _released_ids
from bench import Attack, PublicKnowledge, Release, ReleaseKind, Truth, register_attack, require
from bench.data import flatten_segments
from bench.token_space import space_for

HELD_OUT = 200  # public sentences that measure the MLM (SQuAD contexts)


@register_attack("mask-inference")
@dataclass
class MaskInference(Attack):
    """Each released token masked in turn; the MLM's top-1 regular token is the guess of the original."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.TEXT,)

    mlm: str = "minilm"  # the attacker's masked LM: a hub id with its head, or minilm with a fresh tied head
    checkpoint: str = ""  # a saved (privacy-adapted) MLM directory to use instead of ``mlm``
    batch_size: int = 64  # masked rows per forward pass
    max_sentences: int = 0  # attack only the first N released sentences (0 = all)

    def __post_init__(self) -> None:
        require(self.batch_size >= 1, f"mask-inference batch_size must be >= 1, got {self.batch_size}.")
        require(self.max_sentences >= 0, f"mask-inference max_sentences must be >= 0, got {self.max_sentences}.")
        self.run_notes: dict = {}
        self._model = None
        self._top1: float | None = None

    def _load(self):
        from bench.mlm import load_mlm

        if self._model is None:
            self._model = load_mlm(self.checkpoint or self.mlm)
        return self._model

    def _segments(self, release: Release, public: PublicKnowledge) -> tuple[list[np.ndarray], object]:
        space = space_for(release.public, public.encoder)
        require(space.format == "wordpiece", f"mask-inference needs a WordPiece release, not {space.format}.")
        released = _released_ids(release, space)
        if self.max_sentences:
            released = released[: self.max_sentences]
        return released, space

    def attack(self, release: Release, public: PublicKnowledge) -> TokenGuesses:
        """The MLM's guess at every position of every released sentence."""
        from bench.mlm import predict_masked

        released, space = self._segments(release, public)
        mlm = self._load()
        rows, positions = [], []
        for ids in released:
            for position in range(len(ids)):
                masked = np.array(ids, dtype=np.int64)
                masked[position] = mlm.tokenizer.mask_token_id
                rows.append(masked)
                positions.append(position)
        found = predict_masked(mlm, rows, np.asarray(positions), self.batch_size) if rows else np.zeros(0, np.int64)
        bounds = np.cumsum([0] + [len(ids) for ids in released])
        self.run_notes = {"mlm": self.checkpoint or self.mlm, "mlm_head": mlm.head, "masked_positions": len(rows)}
        return TokenGuesses({"token_accuracy": [found[a:b] for a, b in zip(bounds, bounds[1:])]}, space)

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> TokenGuesses:
        """A uniformly drawn regular token at every position."""
        released, space = self._segments(release, public)
        return TokenGuesses({"token_accuracy": [rng.choice(space.candidates, size=len(x)) for x in released]}, space)

    def score(self, guesses: TokenGuesses, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Fraction of the original tokens recovered, and the MLM's held-out top-1 accuracy."""
        from bench.mlm import masked_token_accuracy
        from bench.public_corpus import public_corpus

        found = guesses.by_metric["token_accuracy"]
        true_ids = guesses.space.client_ids(flatten_segments(truth.texts)[0])[: len(found)]
        total = sum(len(t) for t in true_ids)
        if self._top1 is None:  # measured once per attack, reported beside the privacy and the random scores
            held_out, _, _ = public_corpus("squad", public.task, HELD_OUT, seed=0)
            self._top1 = masked_token_accuracy(self._load(), held_out)
        return {"token_accuracy": _hits(found, true_ids) / total if total else 0.0, "mlm_top1": self._top1}

