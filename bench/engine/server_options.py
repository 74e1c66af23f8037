"""Server options: choices of the service provider that no client mechanism makes.

Privacy-adaptive pretraining (Qu et al. 2021 §3.4, ``bench.models.adaptation``) is one: before
training on the releases, the server further pretrains its masked LM on public text privatized by
the release's own public mechanism, with the token embedding table frozen. It applies to every
defense that releases text or token vectors (``--server-args adapt=denoising``, ``server:`` in grids).

A task of the ``pretraining`` protocol (the clinical tasks) has its own: the MLM the client further pretrains on
its released text, the step budget (``bench.models.further_pretraining``), and the sizes of the utility task the
released encoder is scored on (``--server-args pretrain_steps=0`` releases the MLM as it is: the general-domain
row of Li et al. Table 7).

DP-SGD (Abadi et al. 2016, ``bench.models.dp_sgd``) is another: the server trains its head with per-example
clipping, Poisson sampling and noise calibrated to a target (epsilon, delta) (``--server-args dp_epsilon=8``, with
``dp_delta``, ``dp_clip`` and ``dp_accountant``). It applies to the servers that train a head on frozen features and
declare it (``Server.trains_privately``: sentence servers, taggers, a prediction API's victim); ``make_spec`` refuses
the others, and settings where one clipped row is not one example.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.core.components import RepresentationDefense
from bench.core.options import (
    DP_PREFIX,
    PRETRAINING_PREFIXES,
    Adaptation,
    AdaptedPrivateTraining,
    Pretraining,
    PrivateTraining,
    ServerSettings,
    server_args,
)
from bench.core.params import build_component, require
from bench.core.registry import TASKS
from bench.data.public_corpus import check_corpus_name
from bench.models.adaptation import OBJECTIVES, AdaptationConfig
from bench.models.dp_sgd import DPSGD
from bench.models.further_pretraining import PretrainingBudget
from bench.models.mlm import check_mlm_name


@dataclass(frozen=True)
class ServerOptions(PrivateTraining, Pretraining, Adaptation):
    """Options of the server's training beyond the head (``--server-args``): every field of ``Adaptation``, of
    ``Pretraining`` and of ``PrivateTraining``, of which a spec keeps the part that applies (``resolved``)."""

    def __post_init__(self) -> None:
        Adaptation.__post_init__(self)
        Pretraining.__post_init__(self)
        PrivateTraining.__post_init__(self)
        require(self.adapt in ("", *OBJECTIVES),
                f"adapt must be vanilla, prob or denoising (or empty), got '{self.adapt}'.")
        check_corpus_name(self.adapt_corpus)
        check_mlm_name(self.pretrain_mlm, self.pretrain_allow_untrained)

    @classmethod
    def of(cls, server: ServerSettings) -> "ServerOptions":
        """The options a spec's server settings stand for (the defaults elsewhere)."""
        return cls(**server_args(server))

    def resolved(self, given: dict, pretraining: bool = False) -> ServerSettings:
        """The settings a spec keeps: none when nothing is adapted or privately trained, so plain cells keep their
        config hash; a pretraining task's, resolved, when the task pretrains."""
        own = [k for k in given if k.startswith(PRETRAINING_PREFIXES)]
        private = [k for k in given if k.startswith(DP_PREFIX)]
        if pretraining:
            require(not self.adapt, "privacy-adaptive pretraining (adapt=) does not apply to a pretraining task.")
            require(not private, "DP-SGD (dp_epsilon=) trains a server's model by gradient descent on the releases, "
                                 "and a pretraining task's client releases its further-pretrained MLM itself: no "
                                 "server trains on its release.")
            return Pretraining(**_fields_of(self, Pretraining))
        require(not own, f"server options {', '.join(sorted(own))} apply to pretraining tasks only (clinical-deid, "
                         "clinical-spl, ...).")
        require(self.dp_epsilon is not None or not private,
                f"server options {', '.join(sorted(private))} need dp_epsilon= (DP-SGD's target epsilon; inf: none).")
        rest = [k for k in given if not k.startswith(DP_PREFIX)]
        if not self.adapt:
            require(not rest, f"server options {', '.join(sorted(rest))} need adapt=vanilla, prob or denoising.")
            return PrivateTraining(**_fields_of(self, PrivateTraining)) if private else None
        if private:
            return AdaptedPrivateTraining(**_fields_of(self, AdaptedPrivateTraining))
        return Adaptation(**_fields_of(self, Adaptation))

    def pretraining(self, seed: int = 0):
        """The further-pretraining budget (``bench.models.further_pretraining.PretrainingBudget``)."""
        return PretrainingBudget(self.pretrain_mlm, self.pretrain_steps, seed=seed)

    def private_training(self) -> DPSGD | None:
        """The server's DP-SGD (``bench.models.dp_sgd.DPSGD``), or None without dp_epsilon."""
        if self.dp_epsilon is None:
            return None
        return DPSGD(self.dp_epsilon, self.dp_delta, self.dp_clip, self.dp_accountant)

    def check_private_training(self, spec, path: str, defense) -> None:
        """Refuse, in one sentence, DP-SGD where the server does not train its model by gradient descent on the
        releases one example at a time: a server that does not declare it (``trains_privately``), a fine-tuned
        encoder, federated clients, or a defense that mixes examples within a batch (a clipped row would not bound
        one example's gradient)."""
        if self.dp_epsilon is None:
            return
        server = build_component(TASKS.get(spec.task), {}).server(spec, spec.training)  # a dataclass: no weights
        require(type(server).trains_privately,
                f"DP-SGD (dp_epsilon=) needs a server that trains by gradient descent on the releases, and task "
                f"'{spec.task}'s server ({type(server).__name__}, on the {path} path) does not train by DP-SGD here.")
        require(spec.training.mode == "frozen",
                "DP-SGD trains the server's head on frozen features here: run it with --mode frozen.")
        if path == "api":
            require(defense.distillation() is None,
                    f"defense '{spec.defense}' trains the victim by its own distillation loop, not by DP-SGD.")
        if path == "representations":
            require(defense.client_count() == 1, f"DP-SGD trains one client's head here; defense '{spec.defense}' "
                                                 f"has {defense.client_count()} federated clients.")
            cls = type(defense)
            mixes = (cls.hide_batch is not RepresentationDefense.hide_batch
                     or cls.client_transform is not RepresentationDefense.client_transform)
            require(not mixes, f"defense '{spec.defense}' hides training batches as a whole (it may mix examples "
                               "within a batch), so a clipped row would not bound one example's gradient: DP-SGD "
                               "does not apply to it.")

    def adaptation(self):
        """The adaptation budget (``bench.models.adaptation.AdaptationConfig``), or None."""
        if not self.adapt:
            return None
        return AdaptationConfig(self.adapt, self.adapt_steps, self.adapt_batch_size, self.adapt_lr,
                                corpus=self.adapt_corpus)


def _fields_of(options: ServerOptions, part: type) -> dict:
    """The values ``options`` holds for the fields of ``part`` (a part of ``ServerOptions``)."""
    return {name: getattr(options, name) for name in part.__dataclass_fields__}
