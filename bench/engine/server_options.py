"""Server options: choices of the service provider that no client mechanism makes.

Privacy-adaptive pretraining (Qu et al. 2021 §3.4, ``bench.models.adaptation``) is one: before
training on the releases, the server further pretrains its masked LM on public text privatized by
the release's own public mechanism, with the token embedding table frozen. It applies to every
defense that releases text or token vectors (``--server-args adapt=denoising``, ``server:`` in grids).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.core.params import require
from bench.models.adaptation import OBJECTIVES


@dataclass
class ServerOptions:
    """Options of the server's training beyond the head (``--server-args``)."""

    adapt: str = ""  # privacy-adaptive pretraining: vanilla, prob or denoising MLM; empty = none
    adapt_steps: int = 300  # its optimizer steps on privatized public text (a CPU budget)
    adapt_batch_size: int = 16  # sequences per step (a CPU budget; see AdaptationConfig)
    adapt_lr: float = 5e-5  # AdamW learning rate
    adapt_corpus: str = "auto"  # public text: offline squad/conll2003/agnews/auto, or a hub corpus

    def __post_init__(self) -> None:
        require(self.adapt in ("", *OBJECTIVES),
                f"adapt must be vanilla, prob or denoising (or empty), got '{self.adapt}'.")
        require(self.adapt_steps >= 1, f"adapt_steps must be >= 1, got {self.adapt_steps}.")
        require(self.adapt_batch_size >= 1, f"adapt_batch_size must be >= 1, got {self.adapt_batch_size}.")
        require(self.adapt_lr > 0, f"adapt_lr must be > 0, got {self.adapt_lr}.")
        from bench.data.public_corpus import check_corpus_name

        check_corpus_name(self.adapt_corpus)

    def resolved(self, given: dict) -> dict:
        """The options a spec keeps: none when nothing is adapted, so plain cells keep their config hash."""
        if not self.adapt:
            require(not given, f"server options {', '.join(sorted(given))} need adapt=vanilla, prob or denoising.")
            return {}
        from bench.core.params import component_args

        return component_args(self)

    def adaptation(self):
        """The adaptation budget (``bench.models.adaptation.AdaptationConfig``), or None."""
        if not self.adapt:
            return None
        from bench.models.adaptation import AdaptationConfig

        return AdaptationConfig(self.adapt, self.adapt_steps, self.adapt_batch_size, self.adapt_lr,
                                corpus=self.adapt_corpus)
