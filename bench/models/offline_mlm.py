"""The offline encoder's masked LM, trained here: ``load_mlm("minilm-mlm")``.

No checkpoint with a pretrained MLM head can be installed offline; all-MiniLM-L6-v2 (``minilm``) ships its
encoder only, so ``load_mlm("minilm")`` has a fresh, untrained head. This module trains that MLM — every
layer: embeddings, encoder and the head (whose decoder is tied to the input embeddings) — on the offline
public corpus (``bench.data.public_corpus``: SQuAD contexts + CoNLL-03 sentences, without their held-out
sentences) within a fixed CPU budget, and caches it under ``$BENCH_CACHE_DIR/mlm/<key>``, the key covering
the encoder and its revision, the corpus hash, the budget and the recipe (``MLMRecipe``, ``VERSION``).

Each step is cheap: sentences are packed into short sequences (``seq_len`` tokens, [CLS] ... [SEP], the
sentences of a sequence joined by [SEP]), masked as BERT (``bench.models.mlm.bert_mask``), and the vocabulary
projection runs at the masked positions only (``masked_logits``). AdamW with a linear warm-up and a linear
decay over the budget (time or steps, whichever ends first). ``info.json`` beside the weights says how many
steps and seconds it took, the throughput, and the held-out masked top-1 (``masked_token_accuracy`` on
``bench.data.public_corpus.held_out``, text never trained on), also at the ``checkpoints`` along the way.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from bench.core import smoke
from bench.core.cache import cache_root, cached_infos
from bench.core.files import atomic_directory, atomic_writer, verified
from bench.core.machine import cpu_model
from bench.core.params import require
from bench.core.progress import note, progress_bar
from bench.core.seeding import numpy_generator

# The command line imports this module as it starts (for MLMRecipe), so the masked LM and the corpora, which pull
# in the encoders and the search, are imported by the functions that train or key a recipe.

NAME = "minilm-mlm"  # the load_mlm name of the trained MLM of the offline encoder
VERSION = 2  # of the recipe, in the cache key (2: a step budget)
INFO_FILE = "info.json"
STATE_FILE = "state.pt"  # of an interrupted run (train's resume folder)
SAVE_EVERY_SECONDS = 300.0  # a save of minilm's MLM with its AdamW moments writes about 270 MB, in about a second


@dataclass(frozen=True)
class MLMRecipe:
    """How the offline MLM is trained (everything here is in the cache key)."""

    encoder: str = "minilm"  # the encoder whose MLM is trained (load_mlm name)
    # steps fix the model whatever else runs on the machine: 800 steps take about 30 minutes on 2 idle cores
    # (264 steps took 10 there); the time budget is a safety cap. The lr decays over the first limit reached.
    budget_minutes: float = 120.0  # training-time cap (evaluations excluded)
    steps: int = 800  # optimizer steps (0 = as many as the time budget allows)
    batch_size: int = 16  # packed sequences per step
    seq_len: int = 64  # tokens per packed sequence, [CLS] and [SEP] included
    lr: float = 3e-4  # AdamW peak learning rate
    warmup: float = 0.05  # share of the budget spent warming the learning rate up linearly
    weight_decay: float = 0.01  # AdamW weight decay
    train_embeddings: bool = True  # the input embedding table (= the tied decoder weight) trains too
    corpus: str = "auto"  # public corpus (bench.data.public_corpus)
    # the task the MLM serves: a source that is its data is left out of the corpus, so that an MLM used against
    # a task's release never trained on that task's text ("" = none left out)
    exclude_task: str = ""
    seed: int = 0  # packing order, masking, dropout
    # added with --check's smoke budget (bench.core.smoke); at their defaults they are left out of the key, so every
    # recipe from before keeps its key
    layers: int = 0  # transformer layers kept from the encoder, the first ones (0 = all)
    sentences: int = 0  # corpus sentences trained on, the first ones (0 = all)
    smoke: bool = False  # built for a --check cell (measured on a few held-out sentences): never used by a real run

    def __post_init__(self) -> None:
        require(self.budget_minutes > 0, f"MLM budget must be > 0 minutes, got {self.budget_minutes}.")
        require(self.steps >= 0, f"MLM steps must be >= 0 (0 = up to the time budget), got {self.steps}.")
        require(self.batch_size >= 1, f"MLM batch size must be >= 1, got {self.batch_size}.")
        require(8 <= self.seq_len <= 512, f"MLM sequence length must be in 8..512, got {self.seq_len}.")
        require(self.lr > 0, f"MLM learning rate must be > 0, got {self.lr}.")
        require(0 <= self.warmup < 1, f"MLM warm-up share must be in [0, 1), got {self.warmup}.")
        require(self.layers >= 0 and self.sentences >= 0, "MLM layers and sentences must be >= 0 (0 = all).")


ADDED_LATER = {"layers": 0, "sentences": 0, "smoke": False}  # recipe fields left out of the key at these values


@dataclass
class Checkpoint:
    """The held-out top-1 of the MLM after some training."""

    step: int
    minutes: float  # training time so far (evaluations excluded)
    loss: float  # mean training loss since the previous checkpoint
    top1: float


@dataclass
class TrainingLog:
    """What a training run did."""

    steps: int = 0
    seconds: float = 0.0  # wall-clock training time, less the time the process spent stopped (StopWatch)
    cpu_seconds: float = 0.0  # CPU time of this process meanwhile (all threads): below threads x seconds when shared
    sequences: int = 0
    checkpoints: list[Checkpoint] = field(default_factory=list)


def recipe_for(task: str | None, steps: int | None = None) -> MLMRecipe:
    """The default recipe of the MLM used on ``task``: its text left out when it is a source of the public corpus
    (a task whose text is not in the corpus, e.g. ``ptb``, or ``agnews``, an offline source that ``auto`` does not
    include, shares the MLM trained on the whole corpus). ``steps`` replaces the default step budget."""
    from bench.data.public_corpus import AUTO, source_of_task

    default = MLMRecipe()
    sources = AUTO if default.corpus == "auto" else (default.corpus,)
    exclude = task if source_of_task(task) in sources else ""
    return MLMRecipe(exclude_task=exclude, steps=default.steps if steps is None else steps)


def offline_steps(name: str) -> int | None:
    """The step budget that a name of the offline MLM asks for, or None when ``name`` is not one: ``minilm-mlm``
    is the default recipe's; ``minilm-mlm@N`` is the same recipe trained for N steps (a weaker or stronger MLM, its
    learning rate decaying over those N steps)."""
    if name == NAME:
        return MLMRecipe().steps
    if not name.startswith(NAME + "@"):
        return None
    budget = name[len(NAME) + 1:]
    require(budget.isdigit() and int(budget) >= 1,
            f"'{name}': the offline MLM's step budget must be a whole number of steps, at least 1 (e.g. {NAME}@200).")
    return int(budget)


def smoke_recipe(task: str | None) -> MLMRecipe:
    """The offline MLM at the smoke budget (``bench.core.smoke``) for ``task``: ``minilm-mlm@20``, the encoder's first
    layer only, small batches of the first sentences of the corpus."""
    return replace(recipe_for(task, smoke.MLM_STEPS), batch_size=smoke.MLM_BATCH, seq_len=smoke.MLM_SEQ_LEN,
                   layers=smoke.MLM_LAYERS, sentences=smoke.SENTENCES, smoke=True)


def offline_dir(name: str, task: str | None = None, progress: bool = True) -> Path | None:
    """The directory of the offline MLM that ``name`` names (``minilm-mlm``, ``minilm-mlm@N``) for ``task``, trained
    now if it is not cached; None when ``name`` is another MLM (a hub id, a saved directory). At the smoke budget
    (``bench.core.smoke``) every such name is the smoke recipe's MLM."""
    steps = offline_steps(name)
    if steps is None:
        return None
    if smoke.active():
        path = prepare(smoke_recipe(task), progress=False)
        smoke.note(f"{NAME}@{smoke.MLM_STEPS} for {name} (key {path.name})")
        return path
    return prepare(recipe_for(task, steps), progress=progress)


def offline_target(name: str, task: str | None = None) -> tuple[Path, int] | None:
    """Where ``offline_dir`` keeps the offline MLM ``name`` for ``task`` and its step budget; None for another MLM.
    Nothing is trained."""
    steps = offline_steps(name)
    if steps is None:
        return None
    recipe = smoke_recipe(task) if smoke.active() else recipe_for(task, steps)
    return _located(recipe)[0], recipe.steps


def offline_seconds(steps: int) -> float | None:
    """The expected time of training an offline MLM for ``steps`` steps on this machine: at the median time per
    step of the MLMs cached here (smoke-budget ones aside); None without one."""
    import statistics

    rates = [float(found["seconds"]) / float(found["steps"]) for found in cached_infos("mlm", INFO_FILE)
             if not found.get("recipe", {}).get("smoke") and found.get("steps") and found.get("seconds")]
    return steps * statistics.median(rates) if rates else None


def _located(recipe: MLMRecipe) -> tuple[Path, tuple[list[str], str, str]]:
    """The cache folder of ``recipe``'s MLM, and its public corpus (sentences, description, hash)."""
    from bench.data.public_corpus import public_corpus

    corpus = public_corpus(recipe.corpus, exclude_task=recipe.exclude_task or None)
    return cache_root() / "mlm" / mlm_key(recipe, corpus[2]), corpus


def mlm_key(recipe: MLMRecipe, corpus_hash: str) -> str:
    """The cache key of a trained MLM (16 hex digits): encoder and revision, corpus, recipe, version."""
    from bench.models.encoders import locate
    from bench.models.masked_lm import MASK_RATE, MAX_PREDICTIONS

    _, revision = locate(recipe.encoder)
    fields = asdict(recipe)
    for name, default in ADDED_LATER.items():
        if fields[name] == default:
            fields.pop(name)  # the key of every recipe from before the field existed
    payload = json.dumps({"recipe": fields, "revision": revision, "corpus": corpus_hash,
                          "masking": [MASK_RATE, MAX_PREDICTIONS], "version": VERSION}, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


class StopWatch:
    """Notices that the process was stopped (SIGSTOP, Ctrl-Z) and continued: the kernel then sends SIGCONT.

    A training step that saw a SIGCONT counts its CPU time divided by the threads it runs on, not its wall time,
    so a stopped run's clock (its minute checkpoints and a time budget) does not run on while it is stopped.
    Time lost to other jobs on shared cores still counts, as wall time. Only the main thread can catch signals:
    elsewhere (and where there is no SIGCONT) every step counts its wall time."""

    def __init__(self) -> None:
        self.continued, self._previous = False, None

    def __enter__(self) -> "StopWatch":
        try:
            self._previous = signal.signal(signal.SIGCONT, self._on_continue)
        except (AttributeError, ValueError):  # no SIGCONT on this platform, or not the main thread
            self._previous = None
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGCONT, self._previous)

    def _on_continue(self, *_) -> None:
        self.continued = True

    def step_seconds(self, wall: float, cpu: float, threads: int) -> float:
        """What a step that took ``wall`` seconds and ``cpu`` CPU seconds on ``threads`` threads counts."""
        stopped, self.continued = self.continued, False
        return cpu / max(threads, 1) if stopped else wall


def available_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def pack(tokenizer, sentences: list[str], seq_len: int, rng: np.random.Generator) -> np.ndarray:
    """Sentences in a seeded order, tokenized, joined by [SEP] and cut into rows ``[CLS] ... [SEP]`` of
    ``seq_len`` tokens: an ``(rows, seq_len)`` array (the tail that does not fill a row is dropped)."""
    encoded = tokenizer(list(sentences), add_special_tokens=False)["input_ids"]
    order = rng.permutation(len(encoded))
    stream = np.concatenate([np.asarray([*encoded[i], tokenizer.sep_token_id], dtype=np.int64) for i in order])
    width = seq_len - 2
    body = stream[: len(stream) // width * width].reshape(-1, width)
    cls = np.full((len(body), 1), tokenizer.cls_token_id, dtype=np.int64)
    sep = np.full((len(body), 1), tokenizer.sep_token_id, dtype=np.int64)
    return np.concatenate([cls, body, sep], axis=1)


def masked_batch(rows: np.ndarray, mlm, rng: np.random.Generator):
    """BERT-masked copies of ``rows`` and, per chosen position, its row, column and original token."""
    from bench.models.masked_lm import apply_mask, bert_mask

    regular, mask_id = mlm.regular, mlm.tokenizer.mask_token_id
    shown, row_index, column, truth = [], [], [], []
    for r, ids in enumerate(rows):
        positions, how = bert_mask(ids, regular, rng)
        shown.append(apply_mask(ids, positions, how, mask_id, regular, rng))
        row_index.append(np.full(len(positions), r))
        column.append(positions)
        truth.append(ids[positions])
    return np.stack(shown), np.concatenate(row_index), np.concatenate(column), np.concatenate(truth)


def masked_logits(model, input_ids, row_index, column, attention_mask=None):
    """Vocabulary logits at positions ``(row_index[i], column[i])`` only: the encoder's hidden states are
    gathered there before the prediction head, so no ``(batch, length, vocab)`` tensor is ever built."""
    from bench.models.masked_lm import prediction_head

    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return prediction_head(model)(hidden[row_index, column])


def train(mlm, sentences: list[str], recipe: MLMRecipe, evaluate: Callable[[Any], float] | None = None,
          checkpoints: tuple[float, ...] = (), progress: bool = True, resume: Path | None = None,
          save_every: float | None = None) -> TrainingLog:
    """Train every layer of ``mlm`` (a ``bench.models.mlm.MaskedLM``) on ``sentences`` under ``recipe``.

    ``evaluate(mlm)`` runs after each of the ``checkpoints`` (minutes of training) that the run reaches and
    at the end; evaluation time does not count against the budget. Progress (steps or minutes of the budget, rate,
    time left) goes to stderr through ``bench.core.progress``; ``progress`` adds lines for a resumed run and each
    checkpoint. Stopped (Ctrl-C), it says which saved state is kept for the next run.

    ``resume``: a folder where the run's state (weights, optimizer, both random generators, the log) is saved
    every ``save_every`` seconds of training (``SAVE_EVERY_SECONDS`` by default); a run given a folder that holds a
    state continues from it. Under a step budget the result is bit-identical to an uninterrupted run
    (tests/unit/test_offline_mlm.py); under a time budget the learning-rate schedule follows the training time, so
    the seconds lost to the interruption are not replayed exactly. The caller keys the folder by everything the run
    depends on and removes it once the model is saved.
    """
    import torch


    rng = numpy_generator(recipe.seed, "offline-mlm", recipe.encoder)
    rows = pack(mlm.tokenizer, sentences, recipe.seq_len, rng)
    model = mlm.model
    model.get_input_embeddings().weight.requires_grad_(recipe.train_embeddings)
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=recipe.lr, weight_decay=recipe.weight_decay)
    budget = recipe.budget_minutes * 60.0
    log, losses, saved = TrainingLog(), [], None  # saved: torch's generator state of a resumed run
    if resume is not None and (restored := _restore(resume, model, optimizer, rng, progress)) is not None:
        log, losses, saved = restored

    def spent() -> float:
        """The share of the budget used: of the steps, or of the minutes if they run out first."""
        return max(log.seconds / budget, log.steps / recipe.steps if recipe.steps else 0.0)

    pending = sorted(m for m in checkpoints if log.seconds < m * 60 and m < recipe.budget_minutes)
    attention = torch.ones((min(recipe.batch_size, len(rows)), recipe.seq_len), dtype=torch.long)
    threads = torch.get_num_threads()
    torch.set_num_threads(available_cores())
    by_steps = bool(recipe.steps)  # the bar counts steps, or minutes of a time budget

    def position() -> float:
        return float(log.steps) if by_steps else log.seconds / 60

    saved_at = log.steps if resume is not None and saved is not None else None  # the step of the state on disk
    interval = SAVE_EVERY_SECONDS if save_every is None else save_every
    try:
        bar = progress_bar(f"training {recipe.encoder} as a masked LM", float(recipe.steps or recipe.budget_minutes),
                           position(), unit="steps" if by_steps else "min")
        with torch.random.fork_rng(), bar as show, StopWatch() as watch:
            torch.manual_seed(recipe.seed)
            if saved is not None:
                torch.set_rng_state(saved)  # dropout continues where the interrupted run stopped
            last_save = time.perf_counter()
            while True:
                progress_share = spent()
                if progress_share >= 1.0:
                    break
                scale = min(1.0, progress_share / recipe.warmup if recipe.warmup else 1.0, 1.0 - progress_share)
                for group in optimizer.param_groups:
                    group["lr"] = recipe.lr * max(scale, 1e-3)
                started, cpu_started = time.perf_counter(), time.process_time()
                chosen = rows[rng.choice(len(rows), size=attention.shape[0], replace=False)]
                shown, row_index, column, truth = masked_batch(chosen, mlm, rng)
                model.train()
                device = model.device  # batches go where the model is (a GPU under --device cuda)
                logits = masked_logits(model, torch.as_tensor(shown, device=device),
                                       torch.as_tensor(row_index, device=device),
                                       torch.as_tensor(column, device=device), attention.to(device))
                loss = torch.nn.functional.cross_entropy(logits, torch.as_tensor(truth, device=device))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, 1.0)
                optimizer.step()
                cpu = time.process_time() - cpu_started
                log.seconds += watch.step_seconds(time.perf_counter() - started, cpu, torch.get_num_threads())
                log.cpu_seconds += cpu
                log.steps += 1
                log.sequences += len(chosen)
                losses.append(float(loss.detach()))
                show(position(), f"training {recipe.encoder} as a masked LM (loss {np.mean(losses[-25:]):.3f})")
                while pending and log.seconds >= pending[0] * 60 and evaluate is not None:
                    pending.pop(0)
                    log.checkpoints.append(_checkpoint(mlm, log, losses, evaluate, progress))
                if resume is not None and time.perf_counter() - last_save >= interval:
                    _save_state(resume, model, optimizer, rng, log, losses)
                    last_save, saved_at = time.perf_counter(), log.steps
    except KeyboardInterrupt:
        if resume is None:
            note(f"stopped at step {log.steps}; nothing of this training is kept.")
        elif saved_at is None:
            note(f"stopped at step {log.steps}; nothing is kept yet (the state is saved every {interval / 60:.0f} min "
                 "of training), so the next run starts over.")
        else:
            note(f"stopped at step {log.steps}; the state saved at step {saved_at} is kept in {resume}, and the same "
                 "command continues from it.")
        raise
    finally:
        torch.set_num_threads(threads)
        model.eval()
    if evaluate is not None:
        log.checkpoints.append(_checkpoint(mlm, log, losses, evaluate, progress))
    return log


def resume_folder(kind: str, key: str) -> Path:
    """Where an interrupted build of ``kind`` (``mlm``, ``pretrained``) with cache key ``key`` keeps its state."""
    return cache_root() / "partial" / f"{kind}-{key}"


def _save_state(folder: Path, model, optimizer, rng: np.random.Generator, log: TrainingLog,
                losses: list[float]) -> None:
    """Everything a training run needs to continue, written atomically to ``folder/state.pt``."""
    import torch


    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "numpy": rng.bit_generator.state,
             "torch": torch.get_rng_state(), "log": asdict(log), "losses": losses}
    with atomic_writer(Path(folder) / STATE_FILE, "wb") as handle:
        torch.save(state, handle)


def _restore(folder: Path, model, optimizer, rng: np.random.Generator, progress: bool):
    """Load a saved state into the model, the optimizer and ``rng`` (in place) and return the run's log, its losses
    and torch's generator state; None when the folder holds no state of this model."""
    import torch

    path = Path(folder) / STATE_FILE
    if not path.is_file():
        return None
    state = torch.load(path, weights_only=False)  # written by _save_state into the user's own cache
    if {k: v.shape for k, v in state["model"].items()} != {k: v.shape for k, v in model.state_dict().items()}:
        import warnings

        warnings.warn(f"{path} holds the state of another model (code changed since it was saved); training starts "
                      "over and replaces it.", stacklevel=2)
        return None
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    rng.bit_generator.state = state["numpy"]
    log = TrainingLog(**{**state["log"], "checkpoints": [Checkpoint(**c) for c in state["log"]["checkpoints"]]})
    if progress:
        note(f"  resumed at step {log.steps} ({log.seconds / 60:.1f} min of training) from {path}")
    return log, list(state["losses"]), state["torch"]


def _checkpoint(mlm, log: TrainingLog, losses: list[float], evaluate, progress: bool) -> Checkpoint:
    since = log.checkpoints[-1].step if log.checkpoints else 0
    mlm.model.eval()
    point = Checkpoint(log.steps, round(log.seconds / 60, 2), round(float(np.mean(losses[since:] or [0.0])), 4),
                       round(evaluate(mlm), 4))
    if progress:
        note(f"  checkpoint: step {point.step}, {point.minutes} min, held-out top-1 {point.top1:.4f}")
    return point


def describe(info: dict) -> str:
    """The ``head`` string of a trained MLM."""
    recipe = info["recipe"]
    budget = " (smoke budget: never used by a real run)" if recipe.get("smoke") else ""
    layers = f"the first {recipe['layers']} layer(s)" if recipe.get("layers") else "all layers"
    return (f"{NAME}{budget}: {layers} of {recipe['encoder']} trained offline as a masked LM on {info['corpus']}, "
            f"{info['steps']} steps, held-out top-1 {info['held_out_top1']:.2f}")


def prepare(recipe: MLMRecipe = MLMRecipe(), checkpoints: tuple[float, ...] = (), progress: bool = True) -> Path:
    """The directory of the trained MLM (``load_mlm``-loadable), trained now if it is not cached.

    A file lock makes a second process wait for the first's result instead of training again.
    """
    from filelock import FileLock

    target, (sentences, description, corpus_hash) = _located(recipe)
    key = target.name
    if verified(target, INFO_FILE, "offline MLM"):
        return target
    locks = cache_root() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(locks / f"mlm-{key}.lock"):
        if not verified(target, INFO_FILE, "offline MLM"):
            _build(recipe, sentences, description, corpus_hash, checkpoints, progress, target)
    return target


def _build(recipe: MLMRecipe, sentences: list[str], corpus_description: str, corpus_hash: str,
           checkpoints: tuple[float, ...], progress: bool, target: Path) -> None:
    import shutil

    from bench.data.public_corpus import HELD_OUT, held_out
    from bench.models import masked_lm

    mlm = masked_lm.load_checkpoint(recipe.encoder, seed=recipe.seed)
    if recipe.layers:
        _keep_layers(mlm.model, recipe.layers)
    texts, held_out_description, held_out_hash = held_out(recipe.exclude_task or None,
                                                          smoke.HELD_OUT if recipe.smoke else HELD_OUT)
    if recipe.sentences:
        sentences = sentences[: recipe.sentences]
        corpus_description = f"the first {len(sentences)} sentences of {corpus_description}"
    before = masked_lm.masked_token_accuracy(mlm, texts, seed=recipe.seed)
    if progress:
        note(f"training the {recipe.encoder} MLM: {len(sentences)} sentences, budget {recipe.budget_minutes} min"
             f"{f' or {recipe.steps} steps' if recipe.steps else ''}, {available_cores()} threads; held-out top-1 "
             f"before {before:.4f}")
    partial = resume_folder("mlm", target.name)  # an interrupted build continues from here
    log = train(mlm, sentences, recipe, lambda m: masked_lm.masked_token_accuracy(m, texts, seed=recipe.seed),
                checkpoints, progress, resume=partial)
    info = {
        "key": target.name, "recipe": asdict(recipe), "version": VERSION, "corpus": corpus_description,
        "corpus_hash": corpus_hash, "held_out": held_out_description, "held_out_hash": held_out_hash,
        "steps": log.steps, "seconds": round(log.seconds, 1), "cpu_seconds": round(log.cpu_seconds, 1),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None, "sequences": log.sequences,
        "sequences_per_s": round(log.sequences / max(log.seconds, 1e-9), 2),
        "held_out_top1_before": round(before, 4), "held_out_top1": log.checkpoints[-1].top1,
        "checkpoints": [asdict(c) for c in log.checkpoints],
        "threads": available_cores(), "cpu": cpu_model(),
    }
    info["head"] = mlm.head = describe(info)
    with atomic_directory(target) as folder:
        mlm.save(folder)
        (folder / INFO_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")
    shutil.rmtree(partial, ignore_errors=True)
    if progress:
        note(f"saved {target}: {info['head']}")


def _keep_layers(model, layers: int) -> None:
    """Keep the first ``layers`` transformer layers of a BERT-style masked LM (in place; saved so)."""
    import torch

    stack = model.base_model.encoder.layer
    require(layers <= len(stack), f"the MLM has {len(stack)} layers; cannot keep {layers}.")
    model.base_model.encoder.layer = torch.nn.ModuleList(list(stack)[:layers])
    model.config.num_hidden_layers = layers


def info(path: Path) -> dict:
    """The ``info.json`` of a trained MLM directory."""
    return json.loads((Path(path) / INFO_FILE).read_text(encoding="utf-8"))


CURVE_MINUTES = (2.0, 5.0, 10.0, 20.0)  # where ``bench mlm prepare --curve`` measures the held-out top-1


def write_curve(details: dict, folder: Path) -> Path:
    """``mlm-curve-<encoder>.json`` in ``folder``: the held-out top-1 along one training run, and the machine."""
    recipe = details["recipe"]
    curve = {
        "what": f"held-out masked top-1 of the {recipe['encoder']} MLM along one training run (every layer trained; "
                "the learning rate decays over the whole budget, so an early point is mid-schedule)",
        "key": details["key"], "recipe": recipe, "corpus": details["corpus"], "held_out": details["held_out"],
        "cpu": details["cpu"], "threads": details["threads"], "seconds": details["seconds"],
        "cpu_seconds": details["cpu_seconds"], "load_average_at_end": details["load_average"],
        "top1_before": details["held_out_top1_before"],
        "sequences_per_s": details["sequences_per_s"], "points": details["checkpoints"],
    }
    path = folder / f"mlm-curve-{recipe['encoder']}.json"
    with atomic_writer(path) as handle:
        handle.write(json.dumps(curve, indent=2) + "\n")
    return path
