"""Span masking: every chosen sensitive span replaced by as many [MASK] tokens as it has words.

Paper: Jiajia Li et al. "Semantics-Preserved Distortion for Personal Privacy Protection in Information
Management", §5.1.1: the baseline of Tables 1 and 5 ("spans replaced by mask tokens of the same length").
Threat model: the client rewrites its own training text before release; the released text keeps every other
word, so an adversary sees the sentence with holes where the sensitive spans were, and their lengths.
The mask is BERT's "[MASK]" string, which the WordPiece encoders here read as their mask token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench import Edit, SpanDefense, register_defense
from bench.core.params import require, within

MASK = "[MASK]"


@register_defense("mask")
@dataclass
class SpanMask(SpanDefense):
    """Replace each chosen sensitive span by [MASK] tokens, one per word."""

    version: ClassVar[str] = "1"

    kinds: str = "all"  # span kinds to rewrite, joined by "+" (e.g. PER+ORG, NP); all = every kind the task declares
    fraction: float = within(1.0, "(0, 1]")  # share of the chosen spans rewritten, drawn at random over the split

    def __post_init__(self) -> None:
        require(0.0 < self.fraction <= 1.0, f"mask fraction must lie in (0, 1], got {self.fraction}.")

    def rewrite(self, batch, rng):
        """One [MASK] per word of every chosen span."""
        return [[Edit(span, (MASK,) * (span.end - span.start)) for span in spans] for spans in batch.chosen]
