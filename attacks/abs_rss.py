"""Similarity search on absolute values (abs-RSS): the nearest corpus sentence once the sign mask is taken off.

Paper: Carlini et al. "Is Private Learning Possible with Instance Encoding?" IEEE S&P 2021, the attack on
InstaHide: a mask that flips signs coordinate by coordinate leaves every absolute value as it was, so the attack
works on absolute values, where the mask is gone. For TextHide (Huang et al. 2020, Algorithm 1) the same holds:
|σ ⊙ e| = |e| for any mask σ in {-1, +1}^d, whatever the pool size m.
Threat model: RSS's (``rss``): the adversary holds the public encoder and the task corpus (every sentence of the
run's train and evaluation slices, without knowing which one was released). It indexes the corpus by the absolute
values of its undefended representations and, for each released representation, returns the sentence whose absolute
values are nearest by cosine (exact search with faiss).

On a masked, unmixed release (TextHide's inference queries: ``--traffic inference``) the true sentence matches
exactly, at cosine 1. On a mixed release (the training traffic) |Σ λ_j e_j| is no member's absolute value, and the
attack returns the corpus sentence whose absolute values are nearest the mixture's.

Limit of this setting: one guess per released row, scored against the row's owner. On a mixed release the owner is
the heaviest member of its mix in about 1/k of the rows, so Identity stays near 1/k even where the returned sentence
is another member of the mix; Carlini et al. recover mixed members (they cluster encodings that share one and solve
for it), which this search does not. docs/attacks/abs-rss.md measures both with scripts/abs_rss_mixing.py.

Scored with RSS's five metrics (Identity, JCdist, TF-IDFsim, Label, SBERTsim) against the same random reference (a
uniformly drawn corpus sentence).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench import PublicKnowledge, Release, register_attack
from bench.attacks.rss import RSS
from bench.privacy.neighbours import cosine_search


@register_attack("abs-rss")
@dataclass
class AbsRSS(RSS):
    """Nearest corpus sentence (cosine of absolute values) to each released sentence representation."""

    def attack(self, release: Release, public: PublicKnowledge) -> np.ndarray:
        """Index of the corpus sentence whose absolute values are most similar to each released row's."""
        corpus_reps = public.encoder.encode(public.index)
        _, nearest = cosine_search(np.abs(corpus_reps), np.abs(release.data), k=1)
        return nearest[:, 0]
