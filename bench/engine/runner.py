"""Resolve a cell's spec and run it: ``run_cell(spec) -> ResultRecord``."""

from __future__ import annotations

import datetime as dt
import functools
import os
import platform
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Mapping

from bench.core.components import Cell, PublicKnowledge, Truth
from bench.core.errors import BenchError
from bench.core.params import build_component, component_args
from bench.results.record import ResultRecord
from bench.core.registry import ATTACKS, DEFENSES, TASKS
from bench.core.spec import RunSpec

CHECK_SIZES = {"n_train": 64, "n_eval": 32}  # --check: a smoke run of any config in seconds


def compatible_kind(defense_cls: type, attack_cls: type):
    """The first release kind the defense produces and the attack accepts, else a BenchError."""
    for kind in defense_cls.releases:
        if kind in attack_cls.accepts:
            return kind
    produced = ", ".join(str(k) for k in defense_cls.releases) or "nothing"
    accepted = ", ".join(str(k) for k in attack_cls.accepts) or "nothing"
    raise BenchError(
        f"defense '{defense_cls.registry_name}' releases {produced} but attack "
        f"'{attack_cls.registry_name}' accepts {accepted}, so they cannot be paired."
    )


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
) -> RunSpec:
    """Validate names and values and resolve every default; raises ``BenchError`` on bad input."""
    from bench.models.encoders import POOLINGS, resolve_device
    from bench.core.params import parse_arg_string
    from bench.models.training import TrainingConfig, training_defaults

    task_cls = TASKS.get(task)
    defense_cls = DEFENSES.get(defense)
    resolved_defense = component_args(build_component(defense_cls, defense_args))
    resolved_attack: dict[str, Any] = {}
    if attack is not None:
        attack_cls = ATTACKS.get(attack)
        compatible_kind(defense_cls, attack_cls)
        resolved_attack = component_args(build_component(attack_cls, attack_args))
    overrides = parse_arg_string(training_args) if isinstance(training_args, str) else dict(training_args or {})
    if "mode" in overrides:
        raise BenchError("choose the training mode with --mode (or mode: in a grid), not in the training arguments.")
    training = component_args(build_component(TrainingConfig, {**training_defaults(mode, encoder), **overrides}))
    n_train = task_cls.default_n_train if n_train is None else n_train
    n_eval = task_cls.default_n_eval if n_eval is None else n_eval
    if n_train < 2 or n_eval < 2:
        raise BenchError(f"n_train and n_eval must be at least 2, got {n_train} and {n_eval}.")
    if pooling not in POOLINGS:
        raise BenchError(f"pooling must be one of {', '.join(POOLINGS)}, got '{pooling}'.")
    if max_length < 8:
        raise BenchError(f"max_length must be at least 8 tokens, got {max_length}.")
    return RunSpec(
        task=task,
        defense=defense,
        attack=attack,
        encoder=encoder,
        defense_args=resolved_defense,
        attack_args=resolved_attack,
        training=training,
        n_train=n_train,
        n_eval=n_eval,
        pooling=pooling,
        max_length=max_length,
        device=resolve_device(device),
        seed=seed,
    )


def run_cell(spec: RunSpec) -> ResultRecord:
    """Run one cell: load data, run the defense, run the attack and its random reference."""
    from bench.core.metrics import metric_info
    from bench.core.seeding import numpy_generator
    from bench.models.training import TrainingConfig

    started = time.perf_counter()
    task = build_component(TASKS.get(spec.task), {})
    defense = build_component(DEFENSES.get(spec.defense), spec.defense_args)
    data = task.load(spec.n_train, spec.n_eval, spec.seed)
    cell = Cell(spec, task, data, TrainingConfig(**spec.training))
    output = defense.run(cell)
    metrics = {f"utility/{name}": value for name, value in output.utility.items()}
    notes = dict(data.notes, **output.notes)

    if spec.attack is not None:
        attack_cls = ATTACKS.get(spec.attack)
        attack = build_component(attack_cls, spec.attack_args)
        release = output.release(compatible_kind(type(defense), attack_cls))
        corpus, corpus_labels = data.corpus()
        public = PublicKnowledge(output.encoder or cell.encoder, corpus, spec.task)
        truth = Truth(
            [data.eval.texts[i] for i in release.owners], data.eval.labels[release.owners], corpus_labels
        )
        guesses = attack.attack(release, public)
        random_guesses = attack.random_guess(release, public, numpy_generator(spec.seed, "random-guess"))
        for prefix, found in (("privacy", guesses), ("random", random_guesses)):
            for name, value in attack.score(found, truth, public).items():
                metrics[f"{prefix}/{spec.attack}/{name}"] = value
        notes.update(getattr(attack, "run_notes", {}))  # what the attack measured about itself (speed, ...)
        notes["attacked_rows"] = int(len(release.owners))
        notes["attack_corpus_size"] = len(corpus)

    return ResultRecord(
        run_id=uuid.uuid4().hex,
        config_hash=spec.config_hash(),
        seed=spec.seed,
        spec=spec.to_dict(),
        versions=_versions(spec, output.encoder or cell.encoder),
        data_hash=data.data_hash(),
        data_source=data.source,
        sizes={"n_train": len(data.train), "n_eval": len(data.eval)},
        metrics={k: float(v) for k, v in metrics.items()},
        higher_is_better={k: metric_info(k).higher_is_better for k in metrics},
        notes=notes,
        runtime_s=round(time.perf_counter() - started, 3),
        hardware=_hardware(spec.device),
        created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )


def component_versions(spec: RunSpec) -> str:
    """``task@v defense@v attack@v`` for a spec, in the form records keep."""
    parts = [f"{spec.task}@{TASKS.get(spec.task).version}", f"{spec.defense}@{DEFENSES.get(spec.defense).version}"]
    parts.append(f"{spec.attack}@{ATTACKS.get(spec.attack).version}" if spec.attack else "")
    return " ".join(parts)


@functools.lru_cache(maxsize=1)  # the code a process runs is the code it started with
def _git_sha() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        changed = subprocess.run(  # code edited since the commit (results/ does not count)
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"],
            cwd=root, capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        return f"{sha}-dirty" if changed else sha
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _versions(spec: RunSpec, encoder) -> dict[str, str]:
    import torch
    import transformers

    import bench

    task_version, defense_version, attack_version = component_versions(spec).split(" ")
    versions = {
        "bench": bench.__version__,
        "git_sha": _git_sha(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "task": task_version,
        "defense": defense_version,
        "encoder": f"{spec.encoder}@{encoder.revision}",
    }
    if attack_version:
        versions["attack"] = attack_version
    return versions


def _hardware(device: str) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "device": device,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        # the CPU model and the kernels torch picked for it: features (and so trained heads) differ in the
        # last bits between CPUs, which 120 epochs can amplify to a visible utility difference
        "cpu_model": _cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _cpu_model() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
