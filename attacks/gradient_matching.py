"""Gradient matching (DLG): recover a client's sentence representation from its shared gradient.

Paper: Ligeng Zhu, Zhijian Liu, Song Han. "Deep Leakage from Gradients." NeurIPS 2019; as run
against TextHide in Huang et al., Findings of EMNLP 2020, §4.3, Table 2 and Appendix C.
Threat model: the adversary (the server, or an eavesdropper on client updates) sees single-example
updates of the server's head, knows the head's weights and each update's (mixed) target — the
paper's easier setting — and the public mechanism; not the mask pool, the mixing weights or the
partners. It optimises a random dummy representation (times a random dummy mask when the release
is masked) until its gradient matches the observed one (L-BFGS; bench.models.gradient_inversion) and
reports the dummy representation, its magnitudes taken from the matched input when masked.

Metrics over N attacks: ``success_rate``, the fraction with MSE(recovered, true) <= ``threshold``
(0.001, the paper's criterion), and ``mse``, the mean MSE; the true representation is the owner's
own (member 0 of a mixture), as the public encoder computes it. Deviation: L-BFGS uses a strong
Wolfe line search by default (``line_search=none`` gives DLG's plain lr-1 steps, which diverge on
some starts); attacks per minute go to the record's notes. Setting: Huang et al.'s Table 2 was measured in a
CIFAR-10 / LeNet-5 mimic of TextHide (their Appendix C.1, success judged on the recovered image); this attack
runs on text representations, so their figures are a qualitative reference, not a target.
Limit of this setting: the representation enters the mask directly and only the head after the mask trains, so the
gradient determines the masked product mask ⊙ e and nothing else; a perfect match recovers |e| but each
coordinate's sign only by chance (the dummy mask's), and success against a masked release (m >= 1) is about
2^-d whatever the optimiser does (``python scripts/known_limits.py gradient-signs``: gradients matched to 1e-10,
magnitudes to 1e-10, signs agreeing 0.38-0.75). In Huang et al.'s mimic the input passes through trained layers
before the mask, whose gradients depend on it directly. The unmasked rows (m = 0: mix-only and the baseline) are not
limited so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import Attack, Metric, PublicKnowledge, Release, ReleaseKind, Truth, register_attack, require, within


@register_attack("gradient-matching")
@dataclass
class GradientMatching(Attack):
    """DLG with L-BFGS on each single-example update; success = MSE to the true representation <= 0.001."""

    version: ClassVar[str] = "2"  # 2: the random reference's spread from public sentences, not the task corpus
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.GRADIENTS,)
    knowledge: ClassVar[dict[str, str]] = {
        "public": "the random reference: Gaussian guesses with the spread of public sentences' representations (an "
                  "adversary who knows the public encoder can compute it)",
    }
    stable: ClassVar[dict[str, int]] = {"privacy/success_rate": 1, "privacy/mse": 1}  # 2 moved only the reference
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("success_rate", True, "fraction of attacks whose recovered representation has MSE <= the threshold"),
        Metric("mse", False, "mean squared error of the recovered representation (lower = closer)", 0.0,
               float("inf")),
    )
    check_args: ClassVar[dict] = {"attacks": 4, "steps": 100}  # --check: a few short attacks (32 full ones took minutes)

    attacks: int = within(50, "[1, 1e6]")  # N independent attacks: the first N updates of the release (paper: 50)
    steps: int = within(1200, "[1, 1e8]")  # L-BFGS steps per attack (paper: 1,200)
    inner: int = within(20, "[1, 1e5]")  # inner L-BFGS iterations per step (paper: 20)
    history: int = within(100, "[1, 1e5]")  # L-BFGS history size (paper: 100)
    threshold: float = within(0.001, "(0, 1e30]")  # success: MSE(recovered, true representation) <= this (paper: 0.001)
    line_search: str = "strong_wolfe"  # strong_wolfe, or none for DLG's plain lr-1 steps
    workers: int = within(1, "[1, 1024]")  # parallel processes, one attack each at a time

    def __post_init__(self) -> None:
        for name in ("attacks", "steps", "inner", "history", "workers"):
            require(getattr(self, name) >= 1, f"gradient-matching {name} must be >= 1, got {getattr(self, name)}.")
        require(self.threshold > 0, f"gradient-matching threshold must be > 0, got {self.threshold}.")
        require(self.line_search in ("strong_wolfe", "none"),
                f"gradient-matching line_search must be strong_wolfe or none, got '{self.line_search}'.")
        self.run_notes: dict = {}

    def _settings(self):
        from bench.models.gradient_inversion import MatchingSettings

        return MatchingSettings(self.steps, self.inner, self.history, line_search=self.line_search)

    @staticmethod
    def masked(release: Release) -> bool:
        """Whether the public mechanism flips signs with a secret mask (TextHide with m != 0)."""
        return bool(getattr(release.mechanism, "masked", False))

    def attack(self, release: Release, public: PublicKnowledge) -> np.ndarray:
        """The recovered representation behind each of the first N updates."""
        from bench.models.gradient_inversion import run_attacks

        data = release.data
        count = min(self.attacks, len(data.gradients))
        recovered, distances, per_minute = run_attacks(
            data.model, data.gradients[:count], data.targets[:count], data.regression, self.masked(release),
            self._settings(), self.workers,
        )
        self.run_notes = {"attacks": count, "attacks_per_minute": round(per_minute, 1),
                          "dummy_mask": self.masked(release),
                          "matched_updates": int(np.sum(distances < 1e-6))}
        return recovered

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> np.ndarray:
        """Gaussian representations with the per-coordinate spread of public sentences' representations."""
        count = min(self.attacks, len(release.data.gradients))
        spread = public.encoder.encode(public.public).std(axis=0)
        return rng.standard_normal((count, len(spread))) * spread

    def score(self, guesses: np.ndarray, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Success rate and mean MSE against the owners' true representations."""
        from bench.models.gradient_inversion import success

        true = public.encoder.encode(truth.texts[: len(guesses)])
        mse, hit = success(guesses, true, self.threshold)
        return {"success_rate": float(hit.mean()), "mse": float(mse.mean())}
