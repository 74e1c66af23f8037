"""Prediction perturbation: Gaussian noise on the API's probability vectors, clipped to [0, 1] and renormalised.

Paper: Xu et al. "Student Surpasses Teacher: Imitation Attack for Black-Box NLP APIs", COLING 2022 (the
defense He et al. 2022, §5, and Li et al. §5.1.2 (2) compare against).
Threat model: the adversary queries the API and sees the perturbed vectors; it knows sigma, never the noise
(drawn from the API's own generator, in the order queries arrive).

Deviation in the parameter's unit: Li et al.'s text gives the noise "a variance of sigma"; here ``sigma`` is the
standard deviation, so sigma = 0.05 is a variance of 0.0025, and Li et al.'s sigma = v is ``sigma=sqrt(v)`` here.
Default sigma = 0.05: the value is not stated in the text available offline, so it is this harness's choice
(small enough that the argmax of a confident answer rarely flips). Rows whose entries all clip to 0 answer the
uniform vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench import OutputDefense, register_defense, require, within
from bench.privacy.outputs import gaussian_perturbation, softmax


@register_defense("perturbation")
@dataclass
class PredictionPerturbation(OutputDefense):
    """Answer renormalise(clip(softmax(logits) + N(0, sigma^2)))."""

    version: ClassVar[str] = "1"

    sigma: float = within(0.05, "[0, 100]")  # standard deviation of the Gaussian noise on each probability, >= 0

    def __post_init__(self) -> None:
        require(self.sigma >= 0, f"perturbation sigma must be >= 0, got {self.sigma}.")

    def answer(self, logits, rng):
        """The softmax plus seeded noise, clipped and renormalised per row."""
        return gaussian_perturbation(softmax(logits), self.sigma, rng)
