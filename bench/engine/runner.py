"""Resolve a cell's spec and run it: ``run_cell(spec) -> ResultRecord``."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any, Mapping

import numpy as np

from bench.core.components import SpanDefense, span_kinds
from bench.core.errors import BenchError
from bench.core.examples import data_dir
from bench.core.metrics import PROBE_PREFIX, check_values, probe_metrics
from bench.core.params import build_component, component_args, parse_arg_string
from bench.core.registry import ATTACKS, DEFENSES, TASKS
from bench.core.releases import ReleaseKind
from bench.core.seeding import numpy_generator
from bench.core.smoke import NOTE as SMOKE_NOTE
from bench.core.smoke import smoke_budget
from bench.core.spec import TRAFFICS, TRAINING, RunSpec
from bench.core.versions import compatible_kind
from bench.engine import reuse
from bench.engine.cell import run_defense
from bench.engine.knowledge import knowledge_for
from bench.engine.paths import choose_path
from bench.engine.provenance import hardware, versions
from bench.engine.sanity import check_attack, check_client_part
from bench.engine.server_options import ServerOptions
from bench.models.encoders import POOLINGS, check_precision, on_device, resolve_device
from bench.models.loading import check_encoder
from bench.models.training import TrainingConfig, training_defaults
from bench.results.migrations import portable_source
from bench.results.notes import check as check_notes
from bench.results.record import ResultRecord

CHECK_SIZES = {"n_train": 64, "n_eval": 32}  # --check: a smoke run of any config in seconds
CHECK_STEPS = 3  # --check: steps of privacy-adaptive or further pretraining, unless the user chose them


def check_spans(task_cls: type, defense_cls: type, attack_cls: type | None, defense_args: dict) -> None:
    """A span defense, or an attack scored on sensitive spans, needs a task that declares them (of the kinds
    the defense names)."""
    declared = span_kinds(task_cls)
    for name, needs in ((f"defense '{defense_cls.registry_name}'", issubclass(defense_cls, SpanDefense)),
                        (f"attack '{attack_cls.registry_name}'" if attack_cls else "",
                         bool(getattr(attack_cls, "needs_spans", False)))):
        if needs and not declared:
            raise BenchError(f"{name} works on sensitive spans, and task '{task_cls.registry_name}' declares none "
                             "(conll2003, ptb and squad do).")
    if issubclass(defense_cls, SpanDefense):
        kinds, _ = build_component(defense_cls, defense_args).selection()
        unknown = [k for k in kinds if k not in declared]
        if unknown:
            raise BenchError(f"task '{task_cls.registry_name}' has no span kind '{unknown[0]}'; it declares "
                             f"{', '.join(declared)}.")


def make_spec(
    task: str = "sst2",
    defense: str = "none",
    attack: str | None = None,
    encoder: str = "minilm",
    defense_args: Mapping[str, Any] | str | None = None,
    attack_args: Mapping[str, Any] | str | None = None,
    training_args: Mapping[str, Any] | str | None = None,
    mode: str = "frozen",
    n_train: int | None = None,
    n_eval: int | None = None,
    pooling: str = "mean",
    max_length: int = 128,
    device: str = "auto",
    seed: int = 0,
    server_args: Mapping[str, Any] | str | None = None,
    precision: str = "fp32",
    traffic: str = TRAINING,
    *,
    device_here: bool = True,
    smoke: bool = False,
) -> RunSpec:
    """Validate names and values and resolve every default; raises ``BenchError`` on bad input.

    Everything a cell needs is checked here, before anything runs: the components exist and declare
    their metrics and release kinds, the names their parameters hold resolve (their ``check()``: models,
    files, tasks), the defense has a client part the task's server trains from, the attack accepts what
    the defense releases (as the ``traffic`` asked for), and the server options apply to the release.
    ``smoke``: a ``--check`` cell, whose artefacts are built at the smoke budget (``bench.core.smoke``).
    """
    for name, value in (("n_train", n_train), ("n_eval", n_eval), ("max_length", max_length), ("seed", seed)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise BenchError(f"{name} must be a whole number, got {value!r}.")
    for name, value in (("mode", mode), ("pooling", pooling), ("device", device), ("precision", precision),
                        ("traffic", traffic)):
        if not isinstance(value, str):
            raise BenchError(f"{name} must be a name, got {value!r}.")
    task_cls = TASKS.get(task)
    defense_cls = DEFENSES.get(defense)
    defense_obj = build_component(defense_cls, defense_args)
    defense_obj.check()  # names its parameters hold (files, tasks, models) resolve before anything runs
    resolved_defense = component_args(defense_obj)
    resolved_attack: dict[str, Any] = {}
    wanted = None
    if attack is None and (parse_arg_string(attack_args) if isinstance(attack_args, str) else attack_args):
        raise BenchError("attack arguments were given without an attack; name one with --attack (or attacks: in a "
                         "grid), or drop --attack-args.")
    if attack is not None:
        attack_cls = ATTACKS.get(attack)
        wanted = compatible_kind(defense_cls, attack_cls, task_cls)
        attack_obj = build_component(attack_cls, attack_args)
        attack_obj.check()  # e.g. rss sbert=, mask-inference mlm=: resolved without loading weights
        attack_obj.check_task(task_cls)  # e.g. aia attributes=: the task has them
        resolved_attack = component_args(attack_obj)
    path = choose_path(defense_cls, task_cls.protocols, wanted)
    check_traffic(traffic, defense, path, wanted)
    check_spans(task_cls, defense_cls, ATTACKS.get(attack) if attack is not None else None, resolved_defense)
    given_server = parse_arg_string(server_args) if isinstance(server_args, str) else dict(server_args or {})
    options = build_component(ServerOptions, given_server)
    resolved_server = options.resolved(given_server, pretraining=path.name == "pretraining")
    if options.adapt and path.name != "tokens":
        raise BenchError(f"privacy-adaptive pretraining (adapt={options.adapt}) needs a text or token-vector release; "
                         f"defense '{defense}' releases sentence representations here.")
    overrides = parse_arg_string(training_args) if isinstance(training_args, str) else dict(training_args or {})
    if "mode" in overrides:
        raise BenchError("choose the training mode with --mode (or mode: in a grid), not in the training arguments.")
    defaults = {**training_defaults(mode, encoder), **task_cls.training_defaults}
    training = build_component(TrainingConfig, {**defaults, **overrides})
    if path.name == "representations" and not defense_cls.rehides_each_epoch:
        _check_release_once(defense, defense_obj, training.mode)
    n_train = task_cls.default_n_train if n_train is None else n_train
    n_eval = task_cls.default_n_eval if n_eval is None else n_eval
    if n_train < 2 or n_eval < 2:
        raise BenchError(f"n_train and n_eval must be at least 2, got {n_train} and {n_eval}.")
    if pooling not in POOLINGS:
        raise BenchError(f"pooling must be one of {', '.join(POOLINGS)}, got '{pooling}'.")
    if max_length < 8:
        raise BenchError(f"max_length must be at least 8 tokens, got {max_length}.")
    check_precision(precision)

    check_encoder(encoder)  # its configuration resolves (no weights load; a hub id fails fast without the hub)
    spec = RunSpec(
        task=task,
        defense=defense,
        attack=attack,
        encoder=encoder,
        defense_args=resolved_defense,
        attack_args=resolved_attack,
        training=training,
        server=resolved_server,
        n_train=n_train,
        n_eval=n_eval,
        pooling=pooling,
        max_length=max_length,
        device=resolve_device(device, here=device_here),  # False: a remote worker checks its own GPUs
        precision=precision,
        seed=seed,
        smoke=smoke,
        traffic=traffic,
    )
    options.check_private_training(spec, path.name, defense_obj)  # DP-SGD: the server trains by it
    return spec


def check_traffic(traffic: str, defense: str, path, wanted: ReleaseKind | None) -> None:
    """The traffic a cell attacks is one its path releases the attacked kind as."""
    if traffic not in TRAFFICS:
        raise BenchError(f"traffic must be one of {', '.join(TRAFFICS)}, got '{traffic}'.")
    if traffic == TRAINING:
        return
    if wanted is None:
        raise BenchError(f"traffic '{traffic}' names the release an attack takes; name an attack, or drop it.")
    if traffic not in path.traffics_of(wanted):
        raise BenchError(f"defense '{defense}' releases {wanted.value} as {' or '.join(path.traffics_of(wanted))} "
                         f"traffic only on this task, not as {traffic} traffic; attack sentence representations "
                         "(rss, reprecon, abs-rss) for the inference queries.")


def _check_release_once(defense: str, defense_obj, mode: str) -> None:
    """A representation defense that releases its training split once: only with frozen features and one client."""
    if mode == "finetune":
        raise BenchError(f"defense '{defense}' releases each training example once, and a fine-tuned encoder would "
                         "need the client to encode and release it again every epoch: run it with --mode frozen.")
    if defense_obj.client_count() > 1:
        raise BenchError(f"defense '{defense}' has {defense_obj.client_count()} federated clients but releases its "
                         "training split once, which the engine does for one client only; set rehides_each_epoch "
                         "or use one client.")


def majority_reference(task, data) -> dict[str, Any]:
    """``{"majority_utility": {metric: value}}``: the task's metrics for answering the training split's most
    frequent label on every evaluation example, the floor a server has to beat (class-id labels only; empty for
    regression, tagging and reading tasks)."""

    train, evaluation = np.asarray(data.train.labels), np.asarray(data.eval.labels)
    if train.ndim != 1 or evaluation.ndim != 1 or train.dtype.kind not in "iub" or not (len(train) and len(evaluation)):
        return {}
    values, counts = np.unique(train, return_counts=True)
    try:  # a task whose scorer does not take one class id per example has no such floor
        scores = task.score(np.full(len(evaluation), values[counts.argmax()]), evaluation)
        return {"majority_utility": {name: float(value) for name, value in scores.items()}}
    except (TypeError, ValueError, IndexError):
        return {}


def run_cell(spec: RunSpec) -> ResultRecord:
    """Run one cell: the client's mechanism, the server's training and evaluation, the attack and its
    random reference, each scored by the engine against the truth only it holds."""
    # components that load their own models (NDD's MLM) put them on the cell's device and run at its precision;
    # a --check cell builds what it caches at the smoke budget, and its record lists what that was
    with on_device(spec.device, spec.precision), smoke_budget(spec.smoke) as used:
        record = _run_cell(spec)
    if spec.smoke:
        record.notes[SMOKE_NOTE] = list(used)
    return record


def _run_cell(spec: RunSpec) -> ResultRecord:
    started = time.perf_counter()
    attack_cls = ATTACKS.get(spec.attack) if spec.attack is not None else None
    reused = reuse.prepare(spec)  # a recorded configuration's release and utility, when reuse is on and fits
    context, output, wanted, path = reused.cell or run_defense(spec)
    task, data = context.task, context.data
    check_client_part(spec, output, data)  # a non-finite utility or release, or a collapsed token release
    utility = check_values(f"task '{spec.task}'", task.metrics, output.utility)
    metrics = {f"utility/{name}": value for name, value in utility.items()}
    directions = {f"utility/{m.name}": m.higher_is_better for m in task.metrics}
    probe = {PROBE_PREFIX + name: value for name, value in output.probe.items()}  # frozen sentence servers only
    probe = check_values(f"task '{spec.task}' (probe)", probe_metrics(task.metrics), probe)
    metrics.update({f"utility/{name}": value for name, value in probe.items()})
    directions.update({f"utility/{m.name}": m.higher_is_better for m in probe_metrics(task.metrics)})
    notes = dict(data.notes, **output.notes)
    notes.update(majority_reference(task, data))
    check_notes(notes, path.name)  # before the attack runs, so a note the schema lacks costs no attack's time
    kept = reuse.before_attack(spec, output, wanted)  # the release's digest, before an attack can touch it

    if attack_cls is not None:
        attack = build_component(attack_cls, spec.attack_args)
        release = output.release(wanted)
        public = knowledge_for(attack_cls, release, data, output.encoder or context.encoder, spec.task)
        truth = output.truth(release, data)  # the path's output holds what only the engine knows
        guesses = attack.attack(release, public)
        random_guesses = attack.random_guess(release, public, numpy_generator(spec.seed, "random-guess"))
        check_attack(spec, release, data, guesses, random_guesses)  # non-finite guesses, or a broken deferred release
        for prefix, found in (("privacy", guesses), ("random", random_guesses)):
            scores = check_values(f"attack '{spec.attack}'", attack_cls.metrics, attack.score(found, truth, public))
            for name, value in scores.items():
                metrics[f"{prefix}/{spec.attack}/{name}"] = value
        for metric in attack_cls.metrics:
            for prefix in ("privacy", "random"):
                directions[f"{prefix}/{spec.attack}/{metric.name}"] = metric.higher_is_better
        notes.update(getattr(attack, "run_notes", {}))  # what the attack measured about itself (speed, ...)
        notes["attacked_rows"] = int(len(release.owners))
        if len(path.traffics_of(wanted)) > 1:  # a kind released as more than one traffic: which one was attacked
            notes["traffic"] = spec.traffic
        notes.update(public.notes())
    notes["protocol"] = path.name
    notes.update(kept.notes(reused))  # release_digest, attack_s; reused_from and what was reused
    check_notes(notes, path.name)  # every key declared, typed and on its path (bench.results.notes)

    record = ResultRecord(
        run_id=uuid.uuid4().hex,
        config_hash=spec.config_hash(),
        seed=spec.seed,
        spec=spec.to_dict(),
        versions=versions(spec, output.encoder or context.encoder),
        data_hash=data.data_hash(),
        data_source=portable_source(data.source, data_dir()),
        sizes={"n_train": len(data.train), "n_eval": len(data.eval)},
        metrics={k: float(v) for k, v in metrics.items()},
        higher_is_better={k: directions[k] for k in metrics},
        notes=notes,
        runtime_s=round(time.perf_counter() - started, 3),
        hardware=hardware(spec.device),
        created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
    kept.keep(record, output, reused)  # into the release store, for the next attack on this configuration
    return record
