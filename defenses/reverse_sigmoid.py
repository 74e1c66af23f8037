"""Reverse sigmoid: a deceptive perturbation of the API's probabilities that poisons gradients of extraction.

Paper: Lee et al. "Defending against Neural Network Model Stealing Attacks Using Deceptive Perturbations", IEEE
S&P Workshops 2019 (Li et al. §5.1.2 (3)): each probability y becomes y - beta * (sigmoid(gamma * logit(y)) - 1/2),
then the vector is renormalised (their alpha); entries that would go negative are clipped to 0 first (a choice of
this harness; the paper picks beta small enough to avoid them).
Threat model: the adversary queries the API and sees the perturbed vectors; it knows beta and gamma.

Defaults beta = 0.5, gamma = 0.5: the values Li et al. and He et al. used are not in the text available offline;
these are this harness's choice within the ranges Lee et al. explore. Deterministic (no noise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench import OutputDefense, register_defense, require, within
from bench.privacy.outputs import reverse_sigmoid, softmax


@register_defense("reverse-sigmoid")
@dataclass
class ReverseSigmoid(OutputDefense):
    """Answer the reverse-sigmoid perturbation of the softmax."""

    version: ClassVar[str] = "1"

    beta: float = within(0.5, "[0, 1000]")  # perturbation magnitude, >= 0 (0 = the plain softmax)
    gamma: float = within(0.5, "[1e-3, 1e3]")  # slope of the inner sigmoid, > 0

    def __post_init__(self) -> None:
        require(self.beta >= 0, f"reverse-sigmoid beta must be >= 0, got {self.beta}.")
        require(self.gamma > 0, f"reverse-sigmoid gamma must be > 0, got {self.gamma}.")

    def answer(self, logits, rng):
        """The perturbed, renormalised softmax of each row."""
        return reverse_sigmoid(softmax(logits), self.beta, self.gamma)
