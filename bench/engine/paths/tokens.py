"""The tokens path: the client privatizes its text token by token; the server encodes what it receives.

The defense family is ``TokenDefense``; a ``SpanDefense`` first rewrites the task's sensitive spans
(``bench.engine.spans``), then its text is released unchanged. The client splits its text in a public token space
and runs the defense's token mechanism on both splits. The server encodes the released ids or vectors with its
own encoder (privacy-adaptive pretraining first, when the server options ask for it), trains and predicts.

A task that evaluates on original data (``TokenTask.evaluate_on = "original"``) has only its training split
privatized: its evaluation split is released by the identity mechanism, and the attacked release is the training
split's (``Release.split == "train"``). The task aligns the labels the client sends with the token space
(``TokenTask.token_labels``) and maps predictions back for scoring (``TokenTask.task_predictions``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.core.components import SpanDefense, SpanTask, TokenDefense, TokenTask, Truth, span_kinds
from bench.core.errors import BenchError
from bench.core.examples import TaskData, flatten_segments
from bench.core.files import Build
from bench.core.params import build_component, component_args
from bench.core.registry import ATTACKS, DEFENSES
from bench.core.releases import Release, ReleaseKind, ServerModel
from bench.core.seeding import numpy_generator
from bench.core.spec import RunSpec
from bench.engine.membership import defer_model_release
from bench.engine.paths.base import CellContext, CellOutput, ReleasePath, probe_scores
from bench.engine.server_options import ServerOptions
from bench.engine.spans import locate_slots, non_overlapping_spans, public_span_rows, rewrite_split, span_prior
from bench.models.adaptation import ADAPTED_MARKER, adapt_encoder, adaptation_seconds, adaptation_target
from bench.models.encoders import Encoder, TableView, quiet_loading
from bench.privacy.public import IdentityTokens
from bench.privacy.token_space import space_of


@dataclass
class TokenOutput(CellOutput):
    """A token release's output: for a task with sensitive spans, the original pieces behind each slot."""

    truth_spans: list | None = None  # original pieces behind each slot of the release (Truth.spans), engine-only

    def truth(self, release: Release, data: TaskData) -> Truth:
        """The texts and labels behind ``release``, and its slots' original pieces when it has slots."""
        truth = super().truth(release, data)
        truth.spans = self.truth_spans if release.slots is not None else None
        return truth


class TokensPath(ReleasePath):
    """Text or token vectors, privatized token by token on the client."""

    name = "tokens"
    families = (TokenDefense,)
    yields = {ReleaseKind.TEXT: list, ReleaseKind.TOKEN_EMBEDDINGS: list, ReleaseKind.REWRITTEN_TEXT: list,
              ReleaseKind.MODEL: ServerModel}
    hooks = TokenTask
    output = TokenOutput

    def run(self, defense: TokenDefense, context: CellContext, server) -> TokenOutput:
        """Privatize both splits, train the server on the training release and score it on the evaluation one."""
        return run_tokens(defense, context, server)


def run_tokens(defense: TokenDefense, context: CellContext, server) -> TokenOutput:
    """The client privatizes its splits token by token; the server encodes what it receives (see the module)."""
    seed, spec, task = context.spec.seed, context.spec, context.task
    server.encoder = context.encoder if context.training.mode == "frozen" else context.fresh_encoder()
    notes: dict[str, Any] = {}
    if context.options.adapt:
        server.encoder, notes = adapted_encoder(defense, context, body=not context.client_only or
                                                reads_encoder_body(spec))
    if getattr(server.encoder, "tokenizer", None) is None:
        raise BenchError(f"{spec.defense} perturbs tokens and needs a real encoder (minilm or a hub id), "
                         f"not '{server.encoder.name}'.")
    original_eval = task.evaluate_on == "original"
    space_ref = defense.token_space()
    space = space_of(space_ref, server.encoder)
    train, evaluation = context.data.train, context.data.eval
    train_texts, train_labels, eval_texts, eval_labels = list(train.texts), train.labels, list(evaluation.texts), \
        evaluation.labels
    rewritten = {}
    if isinstance(defense, SpanDefense):  # the client rewrites its sensitive spans first (bench.engine.spans)
        rewritten["train"] = rewrite_split(defense, task, context.data, "train", numpy_generator(seed, "client-spans"))
        train_texts, train_labels = rewritten["train"].texts, rewritten["train"].labels
        if not original_eval:
            rewritten["eval"] = rewrite_split(defense, task, context.data, "eval",
                                              numpy_generator(seed, "client-spans-eval"))
            eval_texts, eval_labels = rewritten["eval"].texts, rewritten["eval"].labels
    train_segments, regroup_train = flatten_segments(train_texts)  # a pair's sentences separately
    eval_segments, regroup_eval = flatten_segments(eval_texts)
    train_ids = space.client_ids(train_segments, numpy_generator(seed, "client-train-oov"))
    eval_ids = space.client_ids(eval_segments, numpy_generator(seed, "client-eval-oov"))
    mechanism = public_token_mechanism(defense, spec.task)
    mechanism.fit(train_ids if original_eval else train_ids + eval_ids, space)
    # the client-only part of a cell that reuses its utility (bench.engine.reuse) attacks the evaluation release
    # alone: the training split's, drawn from its own generator, is not needed then
    train_release = None if context.client_only and not original_eval else \
        regroup_train(space.render(mechanism.privatize(train_ids, space, numpy_generator(seed, "client-train"))))
    eval_mechanism = IdentityTokens() if original_eval else mechanism
    eval_release = regroup_eval(space.render(eval_mechanism.privatize(eval_ids, space, numpy_generator(seed,
                                                                                                      "client-eval"))))
    utility, probe = {}, {}
    if not context.client_only:  # the server's part: the release above never depends on it
        server.fit_tokens(train_release, task.token_labels(train_texts, train_labels, server.encoder))
        predictions = task.task_predictions(server.predict_tokens(eval_release), eval_texts, server.encoder)
        found = getattr(server, "probe_predictions", None)
        probe = probe_scores(task, server, None if found is None else task.task_predictions(found, eval_texts,
                                                                                            server.encoder),
                             eval_labels, notes)
        utility = task.score(predictions, eval_labels)
    kind = mechanism.release_kind
    if original_eval:
        release = Release(kind, train_release, owners=np.arange(len(train_release)),
                          mechanism=public_token_mechanism(defense), space=space_ref, split="train")
        notes["evaluation_data"] = ("original: the evaluation split is released unprotected (identity mechanism); "
                                    "only the training split is privatized, and its release is the attacked one")
    else:
        release = Release(kind, eval_release, owners=np.arange(len(eval_release)),
                          mechanism=public_token_mechanism(defense), space=space_ref)
    attacked_ids = train_ids if original_eval else eval_ids
    notes.update({"released_tokens": int(sum(len(x) for x in attacked_ids)), "token_space": space.format,
                  "public_mechanism": mechanism.describe(), **mechanism.facts(),
                  **defense.describe(server.encoder.dim)})
    truth_spans = None
    split = "train" if original_eval else "eval"
    done = rewritten.get(split)
    if done is not None:
        notes.update(spans_rewritten=done.rewritten, spans_declared=done.candidates)
    # only an attack scored on spans reads where they lie in the release; finding them may run spaCy over the split
    if span_kinds(type(task)) and space.format == "wordpiece" and _attack_reads_spans(spec):
        originals = list(getattr(context.data, split).texts)
        if done is not None:
            segments, regroup = flatten_segments(originals)
            original_ids = regroup(space.client_ids(segments))
        else:
            original_ids = regroup_train(train_ids) if original_eval else regroup_eval(eval_ids)
        release.slots, truth_spans, facts = _span_slots(task, context, split, done, originals, original_ids,
                                                        release.data, server.encoder)
        notes.update(facts)
        if original_eval:  # the evaluation split is released unprotected: its spans' frequencies are public
            public_spans = non_overlapping_spans(task, context.data, "eval")
            release.span_prior = span_prior(regroup_eval(eval_ids), eval_texts, public_spans,
                                            server.encoder.tokenizer, server.encoder.max_length)
            release.span_public = public_span_rows(regroup_eval(eval_ids), eval_texts, public_spans,
                                                   server.encoder.tokenizer, server.encoder.max_length)
    output = TokenOutput(utility, {kind: release}, notes, server.encoder, probe=probe, truth_spans=truth_spans)
    if not context.client_only and hasattr(server, "unit_logits"):  # the trained server's model is a release too
        def query(texts: list, labels, rng: np.random.Generator):
            """The deployed pipeline: the client privatizes the query as it does its evaluation data."""
            if isinstance(defense, SpanDefense) and not original_eval:
                raise BenchError(f"a query to a server of task '{spec.task}' would need the client's span rewrite, "
                                 "which membership inference does not run; use a task that evaluates on original "
                                 "text (conll2003).")
            segments, regroup = flatten_segments(list(texts))
            ids = space.client_ids(segments, rng)
            released = regroup(space.render(eval_mechanism.privatize(ids, space, rng)))
            return server.unit_logits(released, task.token_labels(list(texts), labels, server.encoder))

        output.query = query
        defer_model_release(output, TokensPath(), defense, context, server, public_token_mechanism(defense))
    return output


def _attack_reads_spans(spec: RunSpec) -> bool:
    """Whether the cell's attack is scored on the task's sensitive spans (``Attack.needs_spans``)."""
    return spec.attack is not None and ATTACKS.get(spec.attack).needs_spans


def reads_encoder_body(spec: RunSpec) -> bool:
    """Whether the cell's attack runs the encoder it holds (``Attack.reads_encoder_body``)."""
    return spec.attack is None or ATTACKS.get(spec.attack).reads_encoder_body


def _span_slots(task: SpanTask, context, split, rewritten, originals, original_ids, released, encoder):
    """Where the sensitive spans of the attacked release lie, their original pieces, and what the record says."""
    if rewritten is not None:
        spans, placed, texts = rewritten.chosen, rewritten.placed, rewritten.texts
        facts = {}  # run_tokens records the rewrite's own counts
    else:
        spans = placed = non_overlapping_spans(task, context.data, split)
        texts = originals
        facts = {"spans_declared": int(sum(map(len, spans)))}
    slots, truth = locate_slots(released, original_ids, originals, spans, texts, placed, encoder.tokenizer,
                                encoder.max_length)
    facts["span_slots"] = int(sum(map(len, slots)))
    return slots, truth, facts


def public_token_mechanism(defense: TokenDefense, task: str = ""):
    """A fresh token mechanism of ``defense``, stamped with its origin (the defense's name and arguments); told the
    cell's ``task`` when the client runs it (a mechanism whose model must never have seen that task's text)."""
    mechanism = defense.token_mechanism()
    mechanism.origin = {"defense": type(defense).registry_name, **component_args(defense)}
    if task:
        mechanism.bind_task(task)
    return mechanism


def adaptation_build(spec: RunSpec, attack_only: bool = False) -> Build | None:
    """The adapted server checkpoint that a cell pretrains before anything else when the cache lacks it, timed for
    this machine (``adaptation_seconds``); None when the cell's server adapts to nothing, or when the cell runs
    ``attack_only`` with an attack that reads no encoder body. Nothing is trained or removed."""
    config = ServerOptions.of(spec.server).adaptation()
    if config is None or (attack_only and not reads_encoder_body(spec)):
        return None
    defense = build_component(DEFENSES.get(spec.defense), spec.defense_args)
    if not isinstance(defense, TokenDefense):
        return None
    target, config, _ = adaptation_target(public_token_mechanism(defense), spec.encoder, config, spec.task)
    return Build("adapted server checkpoint", target, ADAPTED_MARKER, adaptation_seconds(config))


def adapted_encoder(defense: TokenDefense, context: CellContext, body: bool = True):
    """The server's encoder after privacy-adaptive pretraining (cached), and what the record says of it.

    One checkpoint serves every run seed (adaptation seed 0), as the paper pretrains once. Without ``body`` (an
    attack-only run whose attack reads no encoder body) nothing is pretrained or loaded: the public encoder's
    table, which adaptation freezes, under the checkpoint's name (``TableView``); the record's adaptation notes
    are then the reused run's.
    """
    spec = context.spec
    if defense.token_space().format != "wordpiece":
        raise BenchError("privacy-adaptive pretraining works in the encoder's WordPiece space; drop vectors= "
                         "or the server's adapt=.")
    mechanism, config = public_token_mechanism(defense), context.options.adaptation()
    if not body:
        target = adaptation_target(mechanism, spec.encoder, config, spec.task)[0]
        return TableView(context.encoder, f"adapted-{target.name}"), {"adaptation_objective": context.options.adapt}
    path = adapt_encoder(mechanism, spec.encoder, config, spec.device, spec.task)
    info = json.loads((path / ADAPTED_MARKER).read_text(encoding="utf-8"))
    with quiet_loading():
        encoder = Encoder(str(path), spec.device, spec.pooling, spec.max_length,
                          cache=context.training.mode == "frozen")
    pooler, original = (getattr(getattr(e, "model", None), "pooler", None) for e in (encoder, context.encoder))
    if pooler is not None and original is not None:
        pooler.load_state_dict(original.state_dict())  # MLM pretraining never touches (nor saves) it
    encoder.revision = f"adapted-{info['key']}"
    notes = {f"adaptation_{k}": info[k] for k in ("objective", "corpus", "head", "mlm_top1_before",
                                                   "mlm_top1_after", "sequences_per_s", "privatize_share")
             if k in info}
    notes["adaptation_objective"] = context.options.adapt
    return encoder, notes
