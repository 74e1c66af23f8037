"""The protocol of one cell: client → server → evaluation → release, owned by the engine.

The client protocols, chosen per cell by ``choose_protocol``:

- ``tokens``: the client splits its text in a public token space and runs the defense's token
  mechanism on both splits; the server encodes the released ids or vectors with its own encoder
  (privacy-adaptive pretraining first, when the server options ask for it), trains and predicts.
- ``representations``: the client encodes its text with the public encoder and hides it in batches
  with the defense's transform (TextHide's mixing and masking, d_chi noise): once, or every epoch afresh
  where the defense's paper does so (``RepresentationDefense.rehides_each_epoch``); the server trains on the
  hidden batches it receives and predicts hidden evaluation representations.
- ``pretraining`` (tasks that declare it alone, the clinical tasks): the client rewrites its text with a span
  defense (or releases it as it is with ``none``), further pretrains a masked LM on it and releases the weights
  (kind ``model``); the utility is the task's ``utility_task`` scored with the released encoder as the server's.
- ``api``: the server trains a victim on its (possibly defended) training text and serves its predictions;
  an output defense changes the answers; the release is query access (``run_api``).

The server (the task family's, ``bench.models.servers``) only ever receives releases; the truth stays
here and in the runner.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.core.components import OutputDefense, RepresentationDefense, SpanDefense, TokenDefense
from bench.core.errors import BenchError
from bench.core.releases import GradientRelease, Release, ReleaseKind
from bench.core.spec import RunSpec
from bench.data.examples import TaskData, flatten_segments

GRADIENT_UPDATES = 64  # single-example updates a gradients release holds (the attack's N is at most this)


@dataclass
class CellContext:
    """What the engine holds for one cell: the spec, the task, its data, the training settings, the options."""

    spec: RunSpec
    task: Any
    data: TaskData
    training: Any  # bench.models.training.TrainingConfig
    options: Any  # bench.engine.server_options.ServerOptions
    # the client's part alone: the server neither trains nor predicts, the output has no utility (bench.engine.reuse
    # regenerates a release so; the token and frozen representation protocols honour it)
    client_only: bool = False

    @functools.cached_property
    def encoder(self):
        """The public encoder, shared and frozen (its features cached on disk)."""
        from bench.models.loading import load_encoder

        return load_encoder(self.spec.encoder, self.spec.device, self.spec.pooling, self.spec.max_length)

    def fresh_encoder(self):
        """A private copy of the encoder for modes that change its weights; it bypasses the feature cache."""
        from bench.models.loading import fresh_encoder

        return fresh_encoder(self.spec.encoder, self.spec.device, self.spec.pooling, self.spec.max_length,
                             self.spec.seed)


@dataclass
class CellOutput:
    """Utility of the server's model on privatized evaluation data, and the releases attacks see."""

    utility: dict[str, float]
    releases: dict[ReleaseKind, Release]
    notes: dict[str, Any] = field(default_factory=dict)
    encoder: Any = None  # the public encoder an adversary holds for this release
    deferred: dict[ReleaseKind, Any] = field(default_factory=dict)  # kind -> () -> Release, built only if attacked
    truth_spans: list | None = None  # original pieces behind each slot of the release (Truth.spans), engine-only
    truth_records: list | None = None  # the people behind a model release's training data (Truth.records)
    truth_attributes: dict | None = None  # private attributes of each attacked row (Truth.attributes), engine-only
    # the task's metrics of the deterministic probe on the server's frozen features (bench.models.probe), by the
    # task's metric names; empty where no probe applies (fine-tuning, other task families)
    probe: dict[str, float] = field(default_factory=dict)

    def release(self, kind: ReleaseKind) -> Release:
        """The release of ``kind``, building a deferred one on first use."""
        if kind not in self.releases:
            self.releases[kind] = self.deferred.pop(kind)()
        return self.releases[kind]


def choose_protocol(defense_cls: type, server_protocols: tuple[str, ...], wanted: ReleaseKind | None) -> str:
    """The client protocol of a cell: the one that yields the attacked release kind, else the server's first."""
    offered = [p for p in server_protocols
               if (p == "tokens" and issubclass(defense_cls, TokenDefense))
               or (p == "pretraining" and rewrites_text(defense_cls))
               or (p == "representations" and issubclass(defense_cls, RepresentationDefense))
               or (p == "api" and issubclass(defense_cls, (TokenDefense, OutputDefense)))]
    if not offered:
        raise BenchError(f"defense '{defense_cls.registry_name}' has no client part this task's server can train "
                         f"from (it takes {', '.join(server_protocols)}).")
    if wanted is not None:
        for protocol in offered:
            if wanted in PROTOCOL_KINDS[protocol]:
                return protocol
        if wanted == ReleaseKind.PREDICTIONS or "api" in offered:
            raise BenchError(f"this task's server ({', '.join(server_protocols)}) yields no {wanted} release: "
                             "prediction-API attacks need a task that serves one (trustpilot, blog, agnews), and "
                             "those tasks release predictions only.")
        yields = sorted({kind.value for protocol in offered for kind in PROTOCOL_KINDS[protocol]}
                        & {kind.value for kind in released_kinds(defense_cls)}) or ["nothing an attack takes"]
        raise BenchError(f"defense '{defense_cls.registry_name}' yields no {wanted.value} release on this task "
                         f"(its server takes {', '.join(server_protocols)}, so the release is "
                         f"{' or '.join(yields)}); choose an attack on that release (bench list shows the pairs).")
    return offered[0]


def rewrites_text(defense_cls: type) -> bool:
    """Whether a defense's release is text a client can pretrain on: a span defense's rewrite, or the text as it
    is (a token defense whose mechanism is the identity, ``none``); token-level perturbations are not."""
    from bench.privacy.public import IdentityTokens

    if issubclass(defense_cls, SpanDefense):
        return True
    try:
        return issubclass(defense_cls, TokenDefense) and isinstance(defense_cls().token_mechanism(), IdentityTokens)
    except BenchError:
        return False


def released_kinds(defense_cls: type) -> tuple[ReleaseKind, ...]:
    """The release kinds a defense can yield: its own, and for a text defense also the predictions of a prediction
    API whose victim trained on its release (it acts there as a data defense)."""
    kinds = tuple(defense_cls.releases)
    if issubclass(defense_cls, TokenDefense) and ReleaseKind.PREDICTIONS not in kinds:
        kinds += (ReleaseKind.PREDICTIONS,)
    return kinds


PROTOCOL_KINDS = {
    "tokens": (ReleaseKind.TEXT, ReleaseKind.TOKEN_EMBEDDINGS, ReleaseKind.REWRITTEN_TEXT),
    "representations": (ReleaseKind.SENTENCE_EMBEDDINGS, ReleaseKind.GRADIENTS),
    "pretraining": (ReleaseKind.MODEL,),
    "api": (ReleaseKind.PREDICTIONS,),
}


def run_protocol(protocol: str, defense, context: CellContext, server) -> CellOutput:
    """Run the client protocol ``protocol`` for ``defense`` with the task's ``server``."""
    if protocol == "tokens":
        return run_tokens(defense, context, server)
    if protocol == "pretraining":
        return run_pretraining(defense, context, server)
    if protocol == "api":
        return run_api(defense, context, server)
    return run_representations(defense, context, server)


# -- tokens ----------------------------------------------------------------------------------------


def run_tokens(defense: TokenDefense, context: CellContext, server) -> CellOutput:
    """The client privatizes its splits token by token; the server encodes what it receives.

    A task that evaluates on original data (``evaluate_on = "original"``) has only its training split
    privatized: its evaluation split is released by the identity mechanism, and the attacked release is the
    training split's (``Release.split == "train"``). The task aligns the labels the client sends with the
    token space (``Task.token_labels``) and maps predictions back for scoring (``Task.task_predictions``).
    """
    from bench.core.seeding import numpy_generator
    from bench.privacy.public import IdentityTokens

    seed, spec, task = context.spec.seed, context.spec, context.task
    server.encoder = context.encoder if context.training.mode == "frozen" else context.fresh_encoder()
    notes: dict[str, Any] = {}
    if context.options.adapt:
        server.encoder, notes = _adapted_encoder(defense, context)
    if getattr(server.encoder, "tokenizer", None) is None:
        raise BenchError(f"{spec.defense} perturbs tokens and needs a real encoder (minilm or a hub id), "
                         f"not '{server.encoder.name}'.")
    original_eval = task.evaluate_on == "original"
    space_ref = defense.token_space()
    space = space_ref.build(server.encoder)
    train, evaluation = context.data.train, context.data.eval
    train_texts, train_labels, eval_texts, eval_labels = list(train.texts), train.labels, list(evaluation.texts), \
        evaluation.labels
    rewritten = {}
    if isinstance(defense, SpanDefense):  # the client rewrites its sensitive spans first (bench.engine.spans)
        from bench.engine.spans import rewrite_split

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
    mechanism = public_token_mechanism(defense)
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
        probe = _probe_scores(task, server, None if found is None else task.task_predictions(found, eval_texts,
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
    if type(task).span_kinds and space.format == "wordpiece" and _attack_reads_spans(spec):
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
            from bench.engine.spans import non_overlapping_spans, public_span_rows, span_prior

            public_spans = non_overlapping_spans(task, context.data, "eval")
            release.span_prior = span_prior(regroup_eval(eval_ids), eval_texts, public_spans,
                                            server.encoder.tokenizer, server.encoder.max_length)
            release.span_public = public_span_rows(regroup_eval(eval_ids), eval_texts, public_spans,
                                                   server.encoder.tokenizer, server.encoder.max_length)
    return CellOutput(utility, {kind: release}, notes, server.encoder, truth_spans=truth_spans, probe=probe)


def _probe_scores(task, server, found, labels, notes: dict) -> dict[str, float]:
    """The task's metrics of the server's probe predictions ``found`` (in the form ``task.score`` takes); empty
    when the server fitted no probe (None). The notes say how the probe was fitted."""
    if found is None:
        return {}
    from bench.models.probe import describe

    notes["probe"] = describe()
    if not server.probe.regression:
        notes["probe_iterations"] = server.probe.iterations  # lbfgs's (MAX_ITER: stopped before its tolerance)
    return task.score(found, labels)


def _attack_reads_spans(spec: RunSpec) -> bool:
    """Whether the cell's attack is scored on the task's sensitive spans (``Attack.needs_spans``)."""
    from bench.core.registry import ATTACKS

    return spec.attack is not None and ATTACKS.get(spec.attack).needs_spans


def _span_slots(task, context, split, rewritten, originals, original_ids, released, encoder):
    """Where the sensitive spans of the attacked release lie, their original pieces, and what the record says."""
    from bench.engine.spans import locate_slots, non_overlapping_spans

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


def public_token_mechanism(defense: TokenDefense):
    """A fresh token mechanism of ``defense``, stamped with its origin (the defense's name and arguments)."""
    from bench.core.params import component_args

    mechanism = defense.token_mechanism()
    mechanism.origin = {"defense": type(defense).registry_name, **component_args(defense)}
    return mechanism


def _adapted_encoder(defense: TokenDefense, context: CellContext):
    """The server's encoder after privacy-adaptive pretraining (cached), and what the record says of it.

    One checkpoint serves every run seed (adaptation seed 0), as the paper pretrains once.
    """
    from bench.models.adaptation import adapt_encoder
    from bench.models.encoders import Encoder, quiet_loading

    spec = context.spec
    if defense.token_space().format != "wordpiece":
        raise BenchError("privacy-adaptive pretraining works in the encoder's WordPiece space; drop vectors= "
                         "or the server's adapt=.")
    path = adapt_encoder(public_token_mechanism(defense), spec.encoder, context.options.adaptation(), spec.device,
                         spec.task)
    info = json.loads((path / "adaptation.json").read_text(encoding="utf-8"))
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


# -- pretraining on the client's text ---------------------------------------------------------------------


@dataclass
class ModelRelease:
    """The ``data`` of a ``model`` release: the released MLM and the public knowledge that comes with the setting.

    Attributes:
        path: the directory of the released MLM (``load_mlm``-loadable), or the ``load_mlm`` name of an MLM
            released as it is.
        first_names, last_names: the public name lists names are drawn from (``bench.data.clinical.name_lists``).
        conditions: the vocabulary of conditions, most frequent first, and ``condition_counts``, their frequencies
            among held-out patients, never the ones behind the data (a published prevalence: an adversary's prior).
        known_names: ``(first, last)`` of each patient behind the data, row ``i`` = ``Release.owners[i]``: whom a
            probing adversary asks about (Lehman et al.'s probe assumes the name known, the conditions not).
        base: the public MLM the release was pretrained from (``load_mlm``-loadable; the release itself for an MLM
            released as it is), which a generating adversary compares names against.
    """

    path: str
    first_names: list[str]
    last_names: list[str]
    conditions: list[str]
    condition_counts: np.ndarray
    known_names: list[tuple[str, str]] = field(default_factory=list)
    base: str = ""


@dataclass
class _PublicUtilityData(TokenDefense):
    """The utility task's data is public (NCBI-disease): it reaches the utility server unprotected."""

    registry_name = "public-utility-data"  # not a registered defense: the origin its identity mechanism names

    def token_mechanism(self):
        from bench.privacy.public import IdentityTokens

        return IdentityTokens()


def run_pretraining(defense: TokenDefense, context: CellContext, server) -> CellOutput:
    """The client (a hospital) rewrites its training split with a span defense (``none``: as it is), further
    pretrains the MLM on it (``context.options.pretraining``) and releases the weights; the utility task's
    server (a tagger) runs on the released encoder, trained and scored on that task's own data."""
    from bench.core.registry import TASKS
    from bench.core.seeding import numpy_generator
    from bench.models.encoders import Encoder, quiet_loading
    from bench.models.further_pretraining import pretrained_mlm
    from bench.models.offline_mlm import offline_dir
    from bench.privacy.public import IdentityTokens

    spec, task, data = context.spec, context.task, context.data
    mechanism = public_token_mechanism(defense)
    notes: dict[str, Any] = {"public_mechanism": mechanism.describe()}
    texts = list(data.train.texts)
    if isinstance(defense, SpanDefense):
        from bench.engine.spans import rewrite_split

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
    return CellOutput(utility.utility, {ReleaseKind.MODEL: release}, notes, encoder, truth_records=patients,
                      probe=utility.probe)


# -- sentence representations -------------------------------------------------------------------------


@dataclass
class ClientSide:
    """What a representation defense's ``prepare`` may use: the cell's public facts and the client's encoder."""

    task: str
    n_train: int
    seed: int
    mode: str
    encoder: Any

    def public_texts(self, task: str) -> list:
        """Training texts of another (public) task, as many as the cell's training split."""
        from bench.core.registry import TASKS

        return list(TASKS.get(task)().load(self.n_train, 2, self.seed).train.texts)

    def sampler(self, texts: list):
        """``(count, generator) -> representations`` of random members of ``texts``, encoded as the client
        encodes its own (cached features when frozen; through the encoder being trained when fine-tuning)."""
        import torch

        encoder = self.encoder
        if self.mode == "frozen":
            reps = torch.from_numpy(encoder.encode(texts))
            return lambda count, g: reps[torch.randint(len(texts), (count,), generator=g)]
        return lambda count, g: encoder.pooled(
            [texts[i] for i in torch.randint(len(texts), (count,), generator=g).tolist()]).cpu()


def run_representations(defense: RepresentationDefense, context: CellContext, server) -> CellOutput:
    """The client encodes and hides; the server trains on hidden batches and predicts hidden evaluation data."""
    import torch

    from bench.models.generators import torch_generator
    from bench.models.servers import HiddenBatches
    from bench.models.training import client_shards, targets_for

    spec, config = context.spec, context.training
    seed = spec.seed
    train, evaluation = context.data.train, context.data.eval
    num_labels = context.task.num_labels
    y_train, y_eval = targets_for(train.labels, num_labels), targets_for(evaluation.labels, num_labels)
    clients = defense.client_count()
    shards = client_shards(len(train), clients, seed)
    transforms = [defense.client_transform(c) for c in range(clients)]
    encoder = context.encoder if config.mode == "frozen" else context.fresh_encoder()
    defense.setup(encoder.dim, torch_generator(seed, "client-secrets"))
    defense.prepare(ClientSide(spec.task, spec.n_train, seed, config.mode, encoder))
    y_all = torch.from_numpy(y_train)

    def release_once(x_train):
        """The training split hidden once as its batches are: what the learning attacks and the probe get."""
        return release_like_training(defense, torch.from_numpy(x_train), y_all, config.batch_size,
                                     torch_generator(seed, "client-release-train"))

    known = None
    if context.client_only and config.mode != "frozen":
        raise BenchError("a fine-tuned encoder's release depends on the server's training: run the cell in full.")
    if config.mode == "frozen":
        x_train = encoder.encode(train.texts)
        x_all = torch.from_numpy(x_train)
        if defense.rehides_each_epoch:
            def batch(idx, client, generator):
                return transforms[client](x_all[idx], y_all[idx], generator)
        else:  # the training split is released once; every epoch trains on that release
            known, known_targets = release_once(x_train)

            def batch(idx, client, generator):
                return known[idx], known_targets[idx]
        if not context.client_only:
            server.fit_hidden(HiddenBatches(len(train), x_train.shape[1], y_train.shape[1], shards, batch))
    else:
        texts = train.texts

        def batch(idx, client, generator):
            reps = encoder.pooled([texts[i] for i in idx.tolist()])
            x, y = transforms[client](reps.cpu(), y_all[idx], generator)
            return x.to(encoder.device), y.to(encoder.device)

        encoder.model.train()
        server.fit_hidden(HiddenBatches(len(train), encoder.dim, y_train.shape[1], shards, batch,
                                        list(encoder.model.parameters()), encoder.device, finetuning=True))
        encoder.model.eval()
        x_train = encoder.encode(train.texts)  # by the fine-tuned encoder
    x_eval = torch.from_numpy(encoder.encode(evaluation.texts))
    sent = defense.hide_inference(x_eval, torch_generator(seed, "client-inference"))
    if known is None:  # re-hidden every epoch, or encoded by a fine-tuned encoder: released once, after training
        known, known_targets = release_once(x_train)
    utility, probe, probe_notes = {}, {}, {}
    if not context.client_only:  # the server's part: the releases below never depend on it when frozen
        if config.mode == "frozen" and hasattr(server, "fit_probe"):
            # the probe trains on the training split hidden once as its batches are (``known``, with mixed
            # targets); predict_hidden then gives its predictions of the hidden evaluation representations
            server.fit_probe(known.numpy(), known_targets.numpy())
        utility = context.task.score(server.predict_hidden(sent), evaluation.labels)
        probe = _probe_scores(context.task, server, getattr(server, "probe_predictions", None), evaluation.labels,
                              probe_notes)
    mechanism = defense.representation_mechanism()
    observed, _ = release_like_training(defense, x_eval, torch.from_numpy(y_eval), config.batch_size,
                                        torch_generator(seed, "client-release"))
    corpus_row = {text: i for i, text in enumerate(context.data.index_corpus()[0])}
    release = Release(ReleaseKind.SENTENCE_EMBEDDINGS, observed.numpy(), owners=np.arange(len(evaluation)),
                      mechanism=mechanism, known_pairs=(known.numpy(), np.array([corpus_row[t] for t in train.texts])))
    notes = {
        **probe_notes,
        "attacked_release": "evaluation sentences hidden as training batches of "
        f"{config.batch_size} (what an eavesdropper on training traffic sees); known pairs: the "
        "training split hidden the same way, with its plaintext (for learning attacks)",
        **({"clients": clients} if clients > 1 else {}),
        "public_mechanism": mechanism.describe(),
        **defense.describe(encoder.dim),
    }

    def gradients() -> Release:
        return gradient_release(defense, mechanism, x_eval, torch.from_numpy(y_eval), config, seed)

    return CellOutput(utility, {ReleaseKind.SENTENCE_EMBEDDINGS: release}, notes, encoder,
                      deferred={ReleaseKind.GRADIENTS: gradients}, probe=probe)


def release_like_training(defense: RepresentationDefense, reps, targets, batch_size: int, generator):
    """Hide ``reps`` exactly as training batches are hidden; row i still belongs to example i.

    This is what an eavesdropper on training traffic observes for these sentences. Returns the
    hidden rows and their (mixed) targets.
    """
    import torch

    order = torch.randperm(len(reps), generator=generator)
    bounds = list(range(0, len(order), batch_size)) + [len(order)]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] == 1:
        del bounds[-2]  # a batch of one could only mix with itself: fold it into the previous one
    out, out_targets = torch.empty_like(reps), torch.empty_like(targets)
    for start, stop in zip(bounds, bounds[1:]):
        idx = order[start:stop]
        out[idx], out_targets[idx] = defense.hide_batch(reps[idx], targets[idx], generator)
    return out, out_targets


def gradient_release(defense: RepresentationDefense, mechanism, reps, targets, config, seed: int) -> Release:
    """Single-example client updates on the server's freshly initialised head (DLG's setting).

    The first ``GRADIENT_UPDATES`` evaluation examples are hidden as training batches are (mixing
    partners from their batch), and each one's hidden representation and target make one update:
    the gradient of the head's loss, as a federated client with batch size 1 would send it in the
    first round. Only the head's gradients are released: they are the part of the update that
    sees the hidden representation directly.
    """
    import torch

    from bench.models.generators import torch_generator
    from bench.models.training import initial_head, loss_fn

    hidden, mixed = release_like_training(defense, reps, targets, config.batch_size,
                                          torch_generator(seed, "client-updates"))
    count = min(len(reps), GRADIENT_UPDATES)
    model = initial_head(reps.shape[1], targets.shape[1], config, seed).eval()
    regression = targets.shape[1] == 1
    updates = []
    for i in range(count):
        loss = loss_fn(model(hidden[i : i + 1]), mixed[i : i + 1], regression)
        updates.append([g.detach().numpy().copy() for g in torch.autograd.grad(loss, list(model.parameters()))])
    data = GradientRelease(model, updates, mixed[:count, None, :].numpy(), regression, batch_size=1)
    return Release(ReleaseKind.GRADIENTS, data, owners=np.arange(count), mechanism=mechanism)


# -- a prediction API ----------------------------------------------------------------------------------


def run_api(defense, context: CellContext, server) -> CellOutput:
    """The server trains a victim on its training data and serves its predictions; the release is query access.

    A text defense acts on the victim's training data (a span defense rewrites its sensitive spans; any other
    token mechanism privatizes it token by token); an output defense changes the API's answers, or, for the
    nasty teacher, the victim's training objective. Queries are raw text (the API user's own); the victim's
    utility is the accuracy of the argmax of its defended answers on the original evaluation split. The
    adversary gets ``PredictionAccess``: the API, its own query pool (1x: as many texts as the victim's training
    set, disjoint from it), its attribute-labelled auxiliary texts, and the target texts whose attributes the
    engine scores (``Release.split == "attribute_eval"``).
    """
    from bench.core.releases import PredictionAccess
    from bench.core.seeding import numpy_generator
    from bench.models.api import PredictionAPI
    from bench.privacy.public import IdentityTokens

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
            from bench.engine.spans import rewrite_split

            rewritten = rewrite_split(defense, task, data, "train", numpy_generator(seed, "client-spans"))
            train_items, train_labels = list(rewritten.texts), np.asarray(rewritten.labels)
            notes.update({"spans_rewritten": rewritten.rewritten, "spans_declared": rewritten.candidates})
        mechanism = public_token_mechanism(defense)
        if not isinstance(mechanism, IdentityTokens) and not isinstance(defense, SpanDefense):
            space = defense.token_space().build(server.encoder)
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
    return CellOutput(utility, {ReleaseKind.PREDICTIONS: release}, notes, server.encoder,
                      truth_attributes={k: v.copy() for k, v in data.attributes["attribute_eval"].items()})
