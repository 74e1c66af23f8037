"""The model release of a trained sentence server: query access, the membership candidates, and shadow training.

Every cell whose server trains on a release (the tokens and representations paths) defers this release; it is built
only when an attack takes it (``CellOutput.deferred``). The candidates are a seeded sample of the server's training
examples (members) and as many held-out examples of the same distribution (non-members, which the task declares:
``Task.membership_pools``), shuffled together; which is which stays in ``CellOutput.membership``.

A query runs the deployed pipeline on a plaintext example, as a client of the service sends it: the defense's client
part first (a token mechanism privatizes the query with fresh randomness; a representation defense hides it with the
client's inference transform and secrets), then the server's model; the adversary sees the logits. The adversary
never sees the randomness or the secrets. A shadow model reruns the whole cell (client part and server training) on
the adversary's own examples, with a fresh defense of the same public parameters and its own seed: the training
algorithm is public, the secrets are the shadow's own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bench.core.components import Truth
from bench.core.errors import BenchError
from bench.core.examples import Examples, TaskData
from bench.core.params import build_component, component_args
from bench.core.releases import Release, ReleaseKind, ServerModel
from bench.core.seeding import numpy_generator
from bench.engine.sanity import guard

QUERY_FORMS = {
    "tokens": "the candidate's text privatized by the client's token mechanism with fresh randomness (as a client "
              "sends a query), encoded by the server",
    "representations": "the candidate's text encoded by the public encoder, then the client's inference transform "
                       "(its secrets, fresh randomness; none for the identity), as a client sends a query",
}


def defer_model_release(output, path, defense, context, server, mechanism) -> None:
    """Give ``output`` (whose ``query`` the path has set) a deferred model release."""
    output.deferred[ReleaseKind.MODEL] = lambda: model_release(output, path, defense, context, server, mechanism)


def membership_candidates(task, data: TaskData, seed: int) -> tuple[Examples, np.ndarray, Examples]:
    """``(candidates, member flags, public pool)``: half members, half non-members, in a seeded random order."""
    pools = task.membership_pools(data, seed)
    if pools is None:
        raise BenchError(f"task '{task.registry_name}' declares no held-out non-members for this run's sizes; give a "
                         "smaller --n-train or --n-eval, or a task that declares them (the GLUE tasks).")
    held_out, public = pools
    rng = numpy_generator(seed, "membership-candidates")
    count = min(len(data.train), len(held_out))
    members = data.train.subset(rng.permutation(len(data.train))[:count])
    nonmembers = held_out.subset(rng.permutation(len(held_out))[:count])
    texts = members.texts + nonmembers.texts
    labels = np.concatenate([members.labels, nonmembers.labels])
    flags = np.r_[np.ones(count, bool), np.zeros(count, bool)]
    order = rng.permutation(2 * count)
    return Examples(tuple(texts[i] for i in order), labels[order]), flags[order], public


def model_release(output, path, defense, context, server, mechanism) -> Release:
    """The trained server's model release (``ServerModel``); its truth goes to ``output.membership``."""
    task, data, spec = context.task, context.data, context.spec
    if output.query is None:
        raise BenchError("this cell's server was not trained (its release was reused): run it in full.")
    candidates, members, public = membership_candidates(task, data, spec.seed)
    output.membership = Truth(list(candidates.texts), candidates.labels, np.zeros(0), members=members)
    payload = ServerModel(
        candidates=candidates.texts, labels=candidates.labels.copy(), num_labels=type(task).num_labels,
        public=(public.texts, public.labels.copy()), train_size=len(data.train), query=output.query,
        shadow=shadow_trainer(path, defense, context), weights=server.head, query_form=QUERY_FORMS.get(path.name, ""),
        audit=audit_trainer(path, defense, context, output.membership))
    return Release(ReleaseKind.MODEL, payload, owners=np.arange(len(candidates)),
                   mechanism=mechanism, split="membership")


def audit_trainer(path, defense, context, truth: Truth):
    """``(canary texts, labels) -> query``: the cell rerun on its own training split plus each canary with
    probability 1/2 (independently, from the engine's generator); the inclusion bits go to ``truth.canaries``."""
    def audit(texts, labels):
        included = numpy_generator(context.spec.seed, "membership-audit").random(len(texts)) < 0.5
        truth.canaries = included
        train = context.data.train
        chosen = np.flatnonzero(included)
        examples = Examples(tuple(train.texts) + tuple(texts[i] for i in chosen),
                            np.concatenate([train.labels, np.asarray(labels)[chosen]]))
        return shadow_trainer(path, defense, context)(examples.texts, examples.labels, context.spec.seed)

    return audit


def shadow_trainer(path, defense, context):
    """``(texts, labels, seed) -> query``: the cell rerun on the given examples, with a fresh defense and that seed."""
    def train(texts, labels, seed: int):
        spec = dataclasses.replace(context.spec, seed=int(seed), attack=None, attack_args={})
        examples = Examples(tuple(texts), np.asarray(labels))
        data = TaskData(examples, examples.subset(np.arange(min(2, len(examples)))), "shadow")
        shadow = dataclasses.replace(context, spec=spec, data=data)
        fresh = guard(build_component(type(defense), component_args(defense)))
        return path.run(fresh, shadow, context.task.server(spec, context.training)).query

    return train
