"""The pretraining path: the client (a hospital) pretrains an MLM on its text and releases the weights.

The defense rewrites the client's text before pretraining: a ``SpanDefense``'s rewrite, or the text as it is
(``none``, a token defense whose mechanism is the identity). Token-level perturbations are no text to pretrain on.
The release is the further pretrained MLM (kind ``model``, ``bench.core.releases.ModelRelease``). The utility is
the task's ``utility_task`` scored with the released encoder as its server's (on the tokens path). Tasks that
declare this path declare it alone (``PretrainingTask``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.core.components import PretrainingTask, SpanDefense, TokenDefense, Truth
from bench.core.errors import BenchError
from bench.core.examples import TaskData
from bench.core.registry import TASKS
from bench.core.releases import ModelRelease, Release, ReleaseKind
from bench.core.seeding import numpy_generator
from bench.core.versions import rewrites_text
from bench.engine.paths.base import CellContext, CellOutput, ReleasePath
from bench.engine.paths.tokens import public_token_mechanism, run_tokens
from bench.engine.spans import rewrite_split
from bench.models.encoders import Encoder, quiet_loading
from bench.models.further_pretraining import pretrained_mlm
from bench.models.offline_mlm import offline_dir
from bench.privacy.public import IdentityTokens


@dataclass
class ModelOutput(CellOutput):
    """A model release's output: the people behind the pretraining data, the truth of an attack on the weights."""

    truth_records: list | None = None  # e.g. the patients (bench.data.clinical.Patient: name and conditions)

    def truth(self, release: Release, data: TaskData) -> Truth:
        """The people behind the weights; no example's text is public."""
        return Truth([], np.zeros(0), np.zeros(0), records=self.truth_records)


class PretrainingPath(ReleasePath):
    """Weights further pretrained on the client's (rewritten) text."""

    name = "pretraining"
    families = (TokenDefense,)  # those whose release is text to pretrain on (``rewrites_text``)
    yields = {ReleaseKind.MODEL: ModelRelease}
    hooks = PretrainingTask
    output = ModelOutput

    def drives(self, defense_cls: type) -> bool:
        """A span defense, or a token defense that releases the text as it is."""
        return rewrites_text(defense_cls)

    def run(self, defense: TokenDefense, context: CellContext, server) -> ModelOutput:
        """Rewrite, pretrain, release the weights; score the utility task's server on the released encoder."""
        return run_pretraining(defense, context, server)


@dataclass
class _PublicUtilityData(TokenDefense):
    """The utility task's data is public (NCBI-disease): it reaches the utility server unprotected."""

    registry_name = "public-utility-data"  # not a registered defense: the origin its identity mechanism names

    def token_mechanism(self):
        return IdentityTokens()


def run_pretraining(defense: TokenDefense, context: CellContext, server) -> ModelOutput:
    """The client rewrites its training split with a span defense (``none``: as it is), further pretrains the MLM
    on it (``context.options.pretraining``) and releases the weights; the utility task's server (a tagger) runs
    on the released encoder, trained and scored on that task's own data."""
    spec, task, data = context.spec, context.task, context.data
    mechanism = public_token_mechanism(defense)
    notes: dict[str, Any] = {"public_mechanism": mechanism.describe()}
    texts = list(data.train.texts)
    if isinstance(defense, SpanDefense):
        rewritten = rewrite_split(defense, task, data, "train", numpy_generator(spec.seed, "client-spans"))
        texts = list(rewritten.texts)
        notes.update({"spans_rewritten": rewritten.rewritten, "spans_declared": rewritten.candidates,
                      **defense.describe(0)})
    elif not isinstance(mechanism, IdentityTokens):
        raise BenchError(f"task '{spec.task}' pretrains on the client's text, which only a span defense (ndd, mask) "
                         f"or none rewrites; '{spec.defense}' perturbs tokens.")
    budget = context.options.pretraining(seed=0)  # one checkpoint per release, whatever the run seed
    path, facts = pretrained_mlm(budget, texts)
    notes.update(facts)
    offline = offline_dir(budget.mlm, progress=False)  # the public MLM the hospital started from (the comparator)
    base = str(offline) if offline is not None else budget.mlm
    name = str(path) if path is not None else base
    with quiet_loading():
        encoder = Encoder(name, spec.device, spec.pooling, spec.max_length, cache=context.training.mode == "frozen")
    if Path(name).is_dir():  # a checkpoint of ours: its cache key names it (for the feature cache)
        encoder.revision = f"pretrained-{Path(name).name}"
    notes["released_mlm"] = budget.mlm if path is None else f"{budget.mlm} further pretrained ({facts['pretrain_key']})"
    utility_task = TASKS.get(type(task).utility_task)()
    options = context.options
    utility_data = utility_task.load(options.utility_n_train, options.utility_n_eval, spec.seed)
    utility_context = CellContext(spec, utility_task, utility_data, context.training, context.options)
    utility_context.__dict__["encoder"] = encoder  # the released encoder is the utility server's
    utility = run_tokens(_PublicUtilityData(), utility_context, server)
    notes.update({"utility_task": utility_task.registry_name, "utility_sizes": [len(utility_data.train),
                                                                                len(utility_data.eval)]})
    patients = task.patients()
    known = [(p.first, p.last) for p in patients]
    release = Release(ReleaseKind.MODEL, ModelRelease(name, *task.public_knowledge(), known_names=known, base=base),
                      owners=np.arange(len(patients)), mechanism=mechanism, split="train")
    return ModelOutput(utility.utility, {ReleaseKind.MODEL: release}, notes, encoder, probe=utility.probe,
                       truth_records=patients)
