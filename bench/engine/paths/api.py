"""The prediction API path: the server trains a victim on its training text and serves its predictions.

Two defense families act here. An ``OutputDefense`` changes the API's answers, or, for the nasty teacher, the
victim's training objective. A text defense (``TokenDefense``) acts on the victim's training data: a span defense
rewrites its sensitive spans; any other token mechanism privatizes it token by token. The release is query access
(kind ``predictions``, ``bench.core.releases.PredictionAccess``). Tasks that declare this path declare it alone
(``ApiTask``), with the private attributes their examples carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.core.components import ApiTask, OutputDefense, SpanDefense, TokenDefense, Truth
from bench.core.errors import BenchError
from bench.core.examples import TaskData, flatten_segments
from bench.core.releases import PredictionAccess, Release, ReleaseKind
from bench.core.seeding import numpy_generator
from bench.engine.paths.base import CellContext, CellOutput, ReleasePath
from bench.engine.paths.tokens import public_token_mechanism
from bench.engine.spans import rewrite_split
from bench.models.api import PredictionAPI
from bench.privacy.public import IdentityTokens
from bench.privacy.token_space import space_of


@dataclass
class PredictionOutput(CellOutput):
    """A prediction API's output: the private attributes of each attacked row (engine-only)."""

    truth_attributes: dict | None = None  # attribute name -> each attacked row's value (Truth.attributes)

    def truth(self, release: Release, data: TaskData) -> Truth:
        """The texts and labels behind ``release``, and their private attributes."""
        truth = super().truth(release, data)
        truth.attributes = self.truth_attributes
        return truth


class ApiPath(ReleasePath):
    """Query access to a victim trained on the client's (defended) data, behind an output defense."""

    name = "api"
    families = (OutputDefense, TokenDefense)  # a text defense guards the victim's training data
    yields = {ReleaseKind.PREDICTIONS: PredictionAccess}
    hooks = ApiTask
    output = PredictionOutput

    def run(self, defense, context: CellContext, server) -> PredictionOutput:
        """Train the victim, serve its answers, and release query access to them."""
        return run_api(defense, context, server)


def run_api(defense, context: CellContext, server) -> PredictionOutput:
    """The server trains a victim on its training data and serves its predictions; the release is query access.

    Queries are raw text (the API user's own); the victim's utility is the accuracy of the argmax of its defended
    answers on the original evaluation split. The adversary gets ``PredictionAccess``: the API, its own query pool
    (1x: as many texts as the victim's training set, disjoint from it), its attribute-labelled auxiliary texts, and
    the target texts whose attributes the engine scores (``Release.split == "attribute_eval"``).
    """
    spec, task, data, seed = context.spec, context.task, context.data, context.spec.seed
    if context.options.adapt:
        raise BenchError("privacy-adaptive pretraining does not apply to a prediction API's victim; drop adapt=.")
    server.encoder = context.encoder
    train_items, train_labels = list(data.train.texts), data.train.labels
    notes: dict[str, Any] = {
        "victim": f"frozen {spec.encoder} features + MLP head ({context.training.head_layers} hidden layers, "
                  f"{context.training.epochs} epochs)",
        "deviations": f"He et al. / Li et al. fine-tune BERT-base victims and imitations (5 epochs, Adam, lr 2e-5) "
                      f"on the full data sets; here the encoder ({spec.encoder}) is frozen, only heads train, and the "
                      f"victim trains on {len(data.train)} examples ({len(data.queries)} queries: 1x)"}
    objective = None
    if isinstance(defense, OutputDefense):
        objective = defense.distillation()
        mechanism = defense.output_mechanism()
    else:
        if isinstance(defense, SpanDefense):  # the server's training text, its sensitive spans rewritten
            rewritten = rewrite_split(defense, task, data, "train", numpy_generator(seed, "client-spans"))
            train_items, train_labels = list(rewritten.texts), np.asarray(rewritten.labels)
            notes.update({"spans_rewritten": rewritten.rewritten, "spans_declared": rewritten.candidates})
        mechanism = public_token_mechanism(defense, spec.task)
        if not isinstance(mechanism, IdentityTokens) and not isinstance(defense, SpanDefense):
            space = space_of(defense.token_space(), server.encoder)
            segments, regroup = flatten_segments(train_items)
            ids = space.client_ids(segments, numpy_generator(seed, "client-train-oov"))
            mechanism.fit(ids, space)
            train_items = regroup(space.render(mechanism.privatize(ids, space, numpy_generator(seed, "client-train"))))
        notes["data_defense"] = mechanism.describe()
    server.fit_released(train_items, train_labels, objective)
    notes.update({**server.facts, **defense.describe(server.encoder.dim)})
    api = PredictionAPI(server.encoder, server.head, defense if isinstance(defense, OutputDefense) else None,
                        numpy_generator(seed, "api-answers"))
    eval_logits = server.logits(list(data.eval.texts))
    answers = api.answer_logits(eval_logits)
    utility = task.score(answers.argmax(axis=1), data.eval.labels)
    notes["victim_accuracy_undefended_outputs"] = round(float(np.mean(eval_logits.argmax(axis=1) == data.eval.labels)),
                                                        4)
    notes["public_mechanism"] = mechanism.describe()
    access = PredictionAccess(
        query_pool=tuple(data.queries.texts), auxiliary=tuple(data.auxiliary.texts),
        auxiliary_attributes={k: v.copy() for k, v in data.attributes["auxiliary"].items()},
        targets=tuple(data.attribute_eval.texts), heldout=tuple(data.eval.texts), num_labels=type(task).num_labels,
        measure=type(task).attribute_measure, answer=api)
    release = Release(ReleaseKind.PREDICTIONS, access, owners=np.arange(len(data.attribute_eval)),
                      mechanism=mechanism, split="attribute_eval")
    return PredictionOutput(utility, {ReleaseKind.PREDICTIONS: release}, notes, server.encoder,
                            truth_attributes={k: v.copy() for k, v in data.attributes["attribute_eval"].items()})
