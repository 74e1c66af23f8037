"""Gradient matching (DLG): recover a client's sentence representation from its shared gradient.

Paper: Ligeng Zhu, Zhijian Liu, Song Han. "Deep Leakage from Gradients." NeurIPS 2019; as run
against TextHide in Huang et al., Findings of EMNLP 2020, §4.3, Table 2, Algorithm 2 and Appendix C.
Threat model: the adversary (the server, or an eavesdropper on client updates) sees single-example
updates in the first round of federated training, knows the models they were taken on and each update's
(mixed) target — the paper's easier setting — and the public mechanism; not the mask pool, the mixing
weights or the partners. The update is TextHide's as the paper's mimic has it (Appendix C.1: trained layers,
then mix and mask, then the head): the representation passes a client layer before the hiding, and the update
holds that layer's gradients with the head's, as Algorithm 2's clients send the encoder's gradients with the
classifier's. The adversary optimises a random dummy representation (and a random dummy mask after the client
layer when the release is masked; one dummy input, no dummy partners, as the paper's Algorithm 3) until the
gradients it produces match all the observed ones (L-BFGS; bench.models.gradient_inversion).

Metrics over N attacks: ``success_rate``, the fraction with MSE(recovered, true) <= ``threshold``
(0.001, the paper's criterion), and ``mse``, the mean MSE; ``magnitude_success_rate`` and ``magnitude_mse``
score |recovered| against |true| the same way (what a sign mask leaves). The true representation is the
owner's own (member 0 of a mixture), as the public encoder computes it. Attacks per minute go to the record's notes.

Deviation: L-BFGS uses a strong Wolfe line search by default (``line_search=none`` gives DLG's plain lr-1 steps,
which diverge on some starts). Setting: Huang et al.'s Table 2 was measured in a CIFAR-10 / LeNet-5 mimic of
TextHide (their Appendix C.1, success judged on the recovered image, d the mask's size); here the attacked input
is the text representation itself, of size d, so their figures are a qualitative reference, not a target.
Limit of this setting: the client layer is one dense layer of width d with the head's activation, freshly
initialised (a first-round update), standing for the trainable encoder of Algorithm 2; the cell's own server
trains no such layer on frozen features, so the release is the mimic's update, not the cell's training traffic.
Masked attacks that fail stall before the step budget, the dummy grown far past the true representation
(``python scripts/known_limits.py gradient-stalls``), so success falls with d faster than in the paper's table.
Versions 1-2 released the head's gradients alone, taken on the masked representation: a mask then hides every
sign whatever the optimiser does (``python scripts/known_limits.py gradient-signs``), which is why the update
carries the client layer's gradients.
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

    # 2: the random reference's spread from public sentences, not the task corpus; 3: the update holds a client
    # layer's gradients before the mask with the head's, and |e| is scored
    version: ClassVar[str] = "3"
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.GRADIENTS,)
    knowledge: ClassVar[dict[str, str]] = {
        "public": "the random reference: Gaussian guesses with the spread of public sentences' representations (an "
                  "adversary who knows the public encoder can compute it)",
    }
    stable: ClassVar[dict[str, int]] = {"random/success_rate": 2, "random/mse": 2}  # 3 moved only the attack's
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("success_rate", True, "fraction of attacks whose recovered representation has MSE <= the threshold"),
        Metric("mse", False, "mean squared error of the recovered representation (lower = closer)", 0.0,
               float("inf")),
        Metric("magnitude_success_rate", True, "fraction of attacks whose recovered |representation| has MSE <= "
               "the threshold to the true one's (signs ignored)"),
        Metric("magnitude_mse", False, "mean squared error of the recovered |representation| (signs ignored)", 0.0,
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
            self._settings(), self.workers, client=data.client,
        )
        self.run_notes = {"attacks": count, "attacks_per_minute": round(per_minute, 1),
                          "dummy_mask": self.masked(release),
                          "matched_gradients": "client layer and head" if data.client is not None else "head",
                          "matched_updates": int(np.sum(distances < 1e-6))}
        return recovered

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> np.ndarray:
        """Gaussian representations with the per-coordinate spread of public sentences' representations."""
        count = min(self.attacks, len(release.data.gradients))
        spread = public.encoder.encode(public.public).std(axis=0)
        return rng.standard_normal((count, len(spread))) * spread

    def score(self, guesses: np.ndarray, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Success rate and mean MSE against the owners' true representations, and the same on absolute values."""
        from bench.models.gradient_inversion import magnitude_success, success

        true = public.encoder.encode(truth.texts[: len(guesses)])
        mse, hit = success(guesses, true, self.threshold)
        magnitude_mse, magnitude_hit = magnitude_success(guesses, true, self.threshold)
        return {"success_rate": float(hit.mean()), "mse": float(mse.mean()),
                "magnitude_success_rate": float(magnitude_hit.mean()), "magnitude_mse": float(magnitude_mse.mean())}
