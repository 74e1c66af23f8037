"""Further MLM pretraining on a client's released text (the clinical setting of Lehman et al. / Li et al. §6).

A hospital further pretrains a masked LM (``load_mlm`` name: ``minilm-mlm`` offline, a hub id such as
``bert-base-uncased`` online) on its notes, as the defense released them, and shares the weights. Training is
``bench.models.offline_mlm.train`` (every layer, BERT masking, packed sequences, AdamW with warm-up and linear
decay) under a step budget; the checkpoint is cached under ``$BENCH_CACHE_DIR/pretrained/<key>`` (the user's
cache directory, never the repository), the key covering the MLM and its revision, the hash of the exact
released sentences, the budget and the recipe. Zero steps release the MLM as it is (the general-domain row).
An interrupted build keeps its state under ``$BENCH_CACHE_DIR/partial/pretrained-<key>`` (saved every five minutes
of training) and the next build of the same key continues from it, bit for bit.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.core import smoke
from bench.core.cache import cache_root
from bench.core.files import atomic_directory, verified
from bench.core.params import require
from bench.models.offline_mlm import offline_dir

VERSION = 1  # of the recipe, in the cache key
INFO_FILE = "pretraining.json"


@dataclass(frozen=True)
class PretrainingBudget:
    """How the released MLM is further pretrained (everything here is in the cache key)."""

    mlm: str = "minilm-mlm"  # the MLM pretrained further (load_mlm name)
    steps: int = 200  # optimizer steps (a CPU budget, about 8 minutes of minilm on 2 cores; 0 = the MLM as it is)
    batch_size: int = 16  # packed sequences per step
    seq_len: int = 64  # tokens per packed sequence
    lr: float = 1e-4  # AdamW peak learning rate
    seed: int = 0  # packing order, masking, dropout

    def __post_init__(self) -> None:
        require(self.steps >= 0, f"pretrain_steps must be >= 0 (0 = the MLM as it is), got {self.steps}.")
        require(self.batch_size >= 1, f"pretrain_batch_size must be >= 1, got {self.batch_size}.")
        require(self.lr > 0, f"pretrain_lr must be > 0, got {self.lr}.")


def pretraining_key(budget: PretrainingBudget, sentences: list[str]) -> str:
    """16 hex digits over the MLM (and its revision), the budget, the recipe and the exact sentences."""
    from bench.models.encoders import locate

    offline = offline_dir(budget.mlm, progress=False)  # a trained offline MLM is named by its own cache key
    base = offline.name if offline is not None else f"{budget.mlm}@{locate(budget.mlm)[1]}"
    digest = hashlib.sha256()
    for sentence in sentences:
        digest.update(sentence.encode("utf-8") + b"\n")
    payload = json.dumps(smoke.mark({"budget": asdict(budget), "base": base, "corpus": digest.hexdigest(),
                                     "version": VERSION}), sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def pretrained_mlm(budget: PretrainingBudget, sentences: list[str], progress: bool = False) -> tuple[Path | None, dict]:
    """The directory of the MLM further pretrained on ``sentences`` (None for 0 steps: the MLM as it is), and what
    the record says of the run (steps, seconds, CPU seconds, sequences, key). Cached; a file lock serialises
    builders. ``seconds`` is wall-clock, less the time the process spent stopped (``offline_mlm.StopWatch``;
    checkpoints built before 2026-11-28 17:12 UTC count that time too); ``cpu_seconds`` (all threads, absent from
    checkpoints built before 2026-11-28) is CPU time."""
    from filelock import FileLock


    if budget.steps == 0:
        return None, {"pretrain_steps": 0}
    key = pretraining_key(budget, sentences)
    target = cache_root() / "pretrained" / key
    locks = cache_root() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(locks / f"pretrained-{key}.lock"):
        if not verified(target, INFO_FILE, "further-pretrained checkpoint"):
            _build(budget, sentences, target, key, progress)
    info = json.loads((target / INFO_FILE).read_text(encoding="utf-8"))
    smoke.note(f"further pretraining {info['steps']} steps (key {key})")
    facts = ("key", "steps", "seconds", "cpu_seconds", "sequences", "sentences")
    return target, {f"pretrain_{k}": info[k] for k in facts if k in info}


def _build(budget: PretrainingBudget, sentences: list[str], target: Path, key: str, progress: bool) -> None:
    import shutil

    from bench.models.mlm import load_mlm
    from bench.models.offline_mlm import MLMRecipe, resume_folder, train

    mlm = load_mlm(budget.mlm, seed=budget.seed)
    recipe = MLMRecipe(encoder=budget.mlm, budget_minutes=24 * 60.0, steps=budget.steps, batch_size=budget.batch_size,
                       seq_len=budget.seq_len, lr=budget.lr, seed=budget.seed)
    partial = resume_folder("pretrained", key)  # an interrupted build continues from here
    log = train(mlm, sentences, recipe, progress=progress, resume=partial)
    mlm.head = f"{mlm.head}; further pretrained {log.steps} steps on a client's released text (key {key})"
    info = {"key": key, "budget": asdict(budget), "steps": log.steps, "seconds": round(log.seconds, 1),
            "cpu_seconds": round(log.cpu_seconds, 1), "sequences": log.sequences, "sentences": len(sentences),
            "version": VERSION}
    with atomic_directory(target) as folder:
        mlm.save(folder)
        (folder / INFO_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")
    shutil.rmtree(partial, ignore_errors=True)
