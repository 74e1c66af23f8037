"""Softening predictions: the prediction API answers softmax(logits / tau) instead of the plain softmax.

Paper: Xu et al. "Student Surpasses Teacher: Imitation Attack for Black-Box NLP APIs", COLING 2022 (the
defense He et al. 2022, §5, and Li et al. §5.1.2 (1) compare against).
Threat model: the adversary queries the victim's API with its own texts and sees only the softened probability
vectors; it knows the defense and tau, not the victim's weights or training data.

Default tau = 2 (a flattening temperature, as the name says): neither Li et al. nor the He et al. setting they
follow states the value in the text available offline, so it is this harness's choice. The argmax, so the
victim's accuracy, is unchanged for every tau > 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench import OutputDefense, register_defense, require, within
from bench.privacy.outputs import softmax


@register_defense("softening")
@dataclass
class Softening(OutputDefense):
    """Answer softmax(logits / tau)."""

    version: ClassVar[str] = "1"

    tau: float = within(2.0, "[1e-3, 1e3]")  # softmax temperature (1 = the plain softmax; > 1 flattens the answers)

    def __post_init__(self) -> None:
        require(self.tau > 0, f"softening tau must be > 0, got {self.tau}.")

    def answer(self, logits, rng):
        """The tempered softmax of each row of logits (no randomness)."""
        return softmax(logits, self.tau)
