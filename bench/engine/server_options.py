"""Server options: choices of the service provider that no client mechanism makes.

Privacy-adaptive pretraining (Qu et al. 2021 §3.4, ``bench.models.adaptation``) is one: before
training on the releases, the server further pretrains its masked LM on public text privatized by
the release's own public mechanism, with the token embedding table frozen. It applies to every
defense that releases text or token vectors (``--server-args adapt=denoising``, ``server:`` in grids).

A task of the ``pretraining`` protocol (the clinical tasks) has its own: the MLM the client further pretrains on
its released text, the step budget (``bench.models.further_pretraining``), and the sizes of the utility task the
released encoder is scored on (``--server-args pretrain_steps=0`` releases the MLM as it is: the general-domain
row of Li et al. Table 7).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.core.params import component_args, require, within
from bench.data.public_corpus import check_corpus_name
from bench.models.adaptation import OBJECTIVES, AdaptationConfig
from bench.models.further_pretraining import PretrainingBudget
from bench.models.mlm import check_mlm_name

PRETRAINING_PREFIXES = ("pretrain_", "utility_")  # options of pretraining tasks only


@dataclass
class ServerOptions:
    """Options of the server's training beyond the head (``--server-args``)."""

    adapt: str = ""  # privacy-adaptive pretraining: vanilla, prob or denoising MLM; empty = none
    adapt_steps: int = within(300, "[1, 1e8]")  # its optimizer steps on privatized public text (a CPU budget)
    adapt_batch_size: int = within(16, "[1, 65536]")  # sequences per step (a CPU budget; see AdaptationConfig)
    adapt_lr: float = within(5e-5, "(0, 10]")  # AdamW learning rate
    adapt_corpus: str = "auto"  # public text: offline squad/conll2003/agnews/auto, or a hub corpus
    pretrain_mlm: str = "minilm-mlm"  # pretraining tasks: the MLM further pretrained on the release (load_mlm name)
    pretrain_steps: int = within(200, "[0, 1e8]")  # pretraining tasks: its optimizer steps (0 = the MLM as it is)
    pretrain_allow_untrained: bool = False  # pretraining tasks: accept an MLM with an untrained head (tests only)
    utility_n_train: int = within(1000, "[2, 1e8]")  # pretraining tasks: training sentences of the utility task
    utility_n_eval: int = within(300, "[2, 1e8]")  # pretraining tasks: evaluation sentences of the utility task

    def __post_init__(self) -> None:
        require(self.adapt in ("", *OBJECTIVES),
                f"adapt must be vanilla, prob or denoising (or empty), got '{self.adapt}'.")
        require(self.adapt_steps >= 1, f"adapt_steps must be >= 1, got {self.adapt_steps}.")
        require(self.adapt_batch_size >= 1, f"adapt_batch_size must be >= 1, got {self.adapt_batch_size}.")
        require(self.adapt_lr > 0, f"adapt_lr must be > 0, got {self.adapt_lr}.")

        check_corpus_name(self.adapt_corpus)
        require(self.pretrain_steps >= 0, f"pretrain_steps must be >= 0 (0 = the MLM as it is), got "
                                          f"{self.pretrain_steps}.")
        require(self.utility_n_train >= 2 and self.utility_n_eval >= 2,
                f"utility_n_train and utility_n_eval must be at least 2, got {self.utility_n_train} and "
                f"{self.utility_n_eval}.")

        check_mlm_name(self.pretrain_mlm, self.pretrain_allow_untrained)

    def resolved(self, given: dict, pretraining: bool = False) -> dict:
        """The options a spec keeps: none when nothing is adapted, so plain cells keep their config hash; a
        pretraining task's (``pretrain_*``, ``utility_*``), resolved, when the task pretrains."""
        own = [k for k in given if k.startswith(PRETRAINING_PREFIXES)]
        if pretraining:
            require(not self.adapt, "privacy-adaptive pretraining (adapt=) does not apply to a pretraining task.")
            return {k: v for k, v in component_args(self).items() if k.startswith(PRETRAINING_PREFIXES)}
        require(not own, f"server options {', '.join(sorted(own))} apply to pretraining tasks only (clinical-deid, "
                         "clinical-spl, ...).")
        if not self.adapt:
            require(not given, f"server options {', '.join(sorted(given))} need adapt=vanilla, prob or denoising.")
            return {}
        return {k: v for k, v in component_args(self).items() if not k.startswith(PRETRAINING_PREFIXES)}

    def pretraining(self, seed: int = 0):
        """The further-pretraining budget (``bench.models.further_pretraining.PretrainingBudget``)."""
        return PretrainingBudget(self.pretrain_mlm, self.pretrain_steps, seed=seed)

    def adaptation(self):
        """The adaptation budget (``bench.models.adaptation.AdaptationConfig``), or None."""
        if not self.adapt:
            return None

        return AdaptationConfig(self.adapt, self.adapt_steps, self.adapt_batch_size, self.adapt_lr,
                                corpus=self.adapt_corpus)
