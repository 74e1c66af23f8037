"""Most-least: the API answers 0.5 + eps on its most likely class, 0.5 - eps on its least likely, 0 elsewhere.

Paper: He et al. "Extracted BERT Model Leaks More Information than You Think!", EMNLP 2022, §5 (Li et al.
§5.1.2 (5)).
Threat model: the adversary queries the API and sees only which class is most and which least likely; it knows
eps. The argmax, so the victim's accuracy, is unchanged.

Default eps = 0.01 (the text available offline does not state He et al.'s value: this harness's choice, a small
margin as the defense intends). eps must lie in (0, 0.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench import OutputDefense, register_defense, require, within
from bench.privacy.outputs import most_least


@register_defense("most-least")
@dataclass
class MostLeast(OutputDefense):
    """Answer 0.5 + eps / 0.5 - eps on the most / least likely class."""

    version: ClassVar[str] = "1"

    eps: float = within(0.01, "(0, 0.5)")  # margin, in (0, 0.5)

    def __post_init__(self) -> None:
        require(0 < self.eps < 0.5, f"most-least eps must lie in (0, 0.5), got {self.eps}.")

    def answer(self, logits, rng):
        """The two-class answer of each row (no randomness)."""
        return most_least(logits, self.eps)
