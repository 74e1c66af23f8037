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

from bench.core.options import PRETRAINING_PREFIXES, Adaptation, Pretraining, ServerSettings, server_args
from bench.core.params import require
from bench.data.public_corpus import check_corpus_name
from bench.models.adaptation import OBJECTIVES, AdaptationConfig
from bench.models.further_pretraining import PretrainingBudget
from bench.models.mlm import check_mlm_name


@dataclass(frozen=True)
class ServerOptions(Pretraining, Adaptation):
    """Options of the server's training beyond the head (``--server-args``): every field of ``Adaptation`` and of
    ``Pretraining``, of which a spec keeps the part that applies (``resolved``)."""

    def __post_init__(self) -> None:
        Adaptation.__post_init__(self)
        Pretraining.__post_init__(self)
        require(self.adapt in ("", *OBJECTIVES),
                f"adapt must be vanilla, prob or denoising (or empty), got '{self.adapt}'.")
        check_corpus_name(self.adapt_corpus)
        check_mlm_name(self.pretrain_mlm, self.pretrain_allow_untrained)

    @classmethod
    def of(cls, server: ServerSettings) -> "ServerOptions":
        """The options a spec's server settings stand for (the defaults elsewhere)."""
        return cls(**server_args(server))

    def resolved(self, given: dict, pretraining: bool = False) -> ServerSettings:
        """The settings a spec keeps: none when nothing is adapted, so plain cells keep their config hash; a
        pretraining task's, resolved, when the task pretrains."""
        own = [k for k in given if k.startswith(PRETRAINING_PREFIXES)]
        if pretraining:
            require(not self.adapt, "privacy-adaptive pretraining (adapt=) does not apply to a pretraining task.")
            return Pretraining(**_fields_of(self, Pretraining))
        require(not own, f"server options {', '.join(sorted(own))} apply to pretraining tasks only (clinical-deid, "
                         "clinical-spl, ...).")
        if not self.adapt:
            require(not given, f"server options {', '.join(sorted(given))} need adapt=vanilla, prob or denoising.")
            return None
        return Adaptation(**_fields_of(self, Adaptation))

    def pretraining(self, seed: int = 0):
        """The further-pretraining budget (``bench.models.further_pretraining.PretrainingBudget``)."""
        return PretrainingBudget(self.pretrain_mlm, self.pretrain_steps, seed=seed)

    def adaptation(self):
        """The adaptation budget (``bench.models.adaptation.AdaptationConfig``), or None."""
        if not self.adapt:
            return None
        return AdaptationConfig(self.adapt, self.adapt_steps, self.adapt_batch_size, self.adapt_lr,
                                corpus=self.adapt_corpus)


def _fields_of(options: ServerOptions, part: type) -> dict:
    """The values ``options`` holds for the fields of ``part`` (``Adaptation`` or ``Pretraining``)."""
    return {name: getattr(options, name) for name in part.__dataclass_fields__}
