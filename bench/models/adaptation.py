"""Privacy-adaptive pretraining (Qu et al. 2021, §3.4): further MLM pretraining on privatized public text.

The server adapts its encoder to the releases it will receive: public text is privatized on the fly
with the same public mechanism and parameters as the client's (``bench.privacy.public``), and the
masked-LM is trained with the user-side component, the token embedding table, frozen (the MLM
decoder is tied to it, so it stays frozen too; its bias and transform train). Three objectives:

- ``vanilla`` (Eq. 5): predict the privatized token at each masked position;
- ``prob`` (Eq. 6): perturb each masked token K times and weight the losses by the empirical
  frequencies of the perturbed tokens (a soft target);
- ``denoising`` (Eq. 7): predict the original token.

For ``dchi-token`` the privatized token of a position is a noisy vector; the vanilla and prob
targets are then its nearest vocabulary token (the text-to-text image of the same noise).
Masking as BERT: 15% of the regular tokens, at most 20 per sequence, 80% [MASK] / 10% a random
(privatized) token / 10% kept; sequences of at most 128 tokens (the paper's values).
Checkpoints are cached under ``$BENCH_CACHE_DIR/adapted/<key>``, the key covering the encoder, the
mechanism and its parameters, the objective, the budget and the hash of the corpus (and the smoke mark of a
``--check`` cell, which adapts on a slice of the corpus: ``bench.core.smoke``), so a sweep never pretrains twice. The CPU defaults (steps, batch size) are far below the paper's; see ``AdaptationConfig``.
Deviation: Qu et al. further pretrain with the Next Sentence Prediction loss beside the MLM variants; this
trains the MLM objective alone (the offline encoders have no NSP head, and the objectives compared are the
MLM's).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock

from bench.core import smoke
from bench.core.cache import cache_root, cached_infos, scratch_instead
from bench.core.files import atomic_directory, verified
from bench.core.params import require
from bench.core.progress import track
from bench.core.releases import ReleaseKind
from bench.core.seeding import numpy_generator
from bench.models.masked_lm import MASK_RATE, MAX_LENGTH, MAX_PREDICTIONS, bert_mask
from bench.privacy.mechanisms import nearest_tokens
from bench.privacy.token_space import WordPieceSpace

OBJECTIVES = ("vanilla", "prob", "denoising")
VERSION = 2  # of the recipe, in the cache key (2: trains on the whole corpus, scores on held-out text)
ADAPTED_MARKER = "adaptation.json"  # written last into a checkpoint's folder: what the record reads of it


@dataclass(frozen=True)
class AdaptationConfig:
    """The budget of one adaptation run (the paper pretrains far longer, on a GPU).

    Qu et al.'s own budget was not reachable offline (``results/reference/qu2021_adaptation.json`` has a
    slot for it); BERT's pretraining recipe, the usual yardstick, is batch 256, lr 1e-4 and 1M steps.
    ``bench run`` sets these with ``adapt_steps``, ``adapt_batch_size``, ``adapt_lr`` and ``adapt_corpus``.
    """

    objective: str  # vanilla, prob or denoising
    steps: int = 300  # optimizer steps (a CPU default, far below any published pretraining budget)
    batch_size: int = 16  # sequences per step
    lr: float = 5e-5  # AdamW learning rate, linear warm-up over the first 10% of the steps
    k: int = 10  # prob MLM: perturbations of each masked token (paper: 10)
    corpus: str = "auto"  # public corpus (bench.data.public_corpus): offline SQuAD contexts + CoNLL-03 sentences
    corpus_size: int = 20000  # public sentences drawn from the corpus
    seed: int = 0  # masking, mechanism noise, batch order, head init

    def __post_init__(self) -> None:
        require(self.objective in OBJECTIVES,
                f"adapt must be one of {', '.join(OBJECTIVES)} (or empty), got '{self.objective}'.")
        require(self.steps >= 1, f"adapt_steps must be >= 1, got {self.steps}.")
        require(self.batch_size >= 1, f"adaptation batch size must be >= 1, got {self.batch_size}.")
        require(self.k >= 1, f"prob MLM k must be >= 1, got {self.k}.")


def adaptation_key(encoder: str, mechanism: dict[str, Any], config: AdaptationConfig, corpus_hash: str) -> str:
    """The cache key of an adapted checkpoint (16 hex digits)."""
    payload = json.dumps(smoke.mark({"encoder": encoder, "mechanism": mechanism, "config": asdict(config),
                                     "corpus": corpus_hash, "masking": [MASK_RATE, MAX_PREDICTIONS, MAX_LENGTH],
                                     "version": VERSION}),
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


class PrivatizedMLMBatches:
    """Masked-LM batches built from public sentences privatized by a public mechanism."""

    def __init__(self, mechanism, space, mlm, sentences_ids: list[np.ndarray], objective: str, k: int,
                 rng: np.random.Generator) -> None:
        self.mechanism, self.space, self.mlm = mechanism, space, mlm
        self.ids, self.objective, self.k, self.rng = sentences_ids, objective, k, rng
        self.vectors = mechanism.release_kind is ReleaseKind.TOKEN_EMBEDDINGS
        self.privatize_seconds = 0.0

    def _private(self, ids: list[np.ndarray]) -> list[np.ndarray]:
        started = time.perf_counter()
        out = self.mechanism.privatize(ids, self.space, self.rng)
        self.privatize_seconds += time.perf_counter() - started
        return out

    def _as_tokens(self, released: list[np.ndarray]) -> list[np.ndarray]:
        """Token ids of a release: vectors are read as their nearest vocabulary token."""
        if not self.vectors:
            return released

        started = time.perf_counter()
        out = nearest_tokens(released, self.space.table, self.space.candidates)
        self.privatize_seconds += time.perf_counter() - started
        return out

    def batch(self, rows: np.ndarray):
        """Model inputs and per-position soft targets ``(positions, vocab)`` for the sentences ``rows``."""
        import torch

        tokenizer, vocab = self.mlm.tokenizer, len(self.space.table)
        originals = [self.ids[r] for r in rows]
        released = self._private(originals)
        released_tokens = self._as_tokens(released)
        masks = [bert_mask(o, self.space.candidates, self.rng) for o in originals]
        inputs, target_rows, chosen_original, chosen_privatized = [], [], [], []
        target_positions, target_cols, target_weights = [], [], []
        table = torch.as_tensor(self.space.table)
        for row, (original, out, tokens, (positions, how)) in enumerate(zip(originals, released, released_tokens,
                                                                           masks)):
            pieces = torch.as_tensor(out, dtype=torch.float32) if self.vectors else torch.as_tensor(out)
            for position, shown in zip(positions, how):
                if shown == 0:
                    pieces[position] = table[tokenizer.mask_token_id] if self.vectors else tokenizer.mask_token_id
                elif shown == 1:
                    other = self._private([self.rng.choice(self.space.candidates, size=1)])[0][0]
                    pieces[position] = torch.as_tensor(other, dtype=pieces.dtype)
            inputs.append(pieces.numpy())
            for position in positions:
                target_rows.append((row, int(position) + 1))  # +1: [CLS] comes first
                chosen_original.append(int(original[position]))
                chosen_privatized.append(int(tokens[position]))
        for (row, position), weights in zip(target_rows, self._targets(chosen_original, chosen_privatized)):
            for token, weight in weights.items():
                target_positions.append((row, position))
                target_cols.append(token)
                target_weights.append(weight)
        batch = self.mlm.encoder.model_inputs(inputs)
        targets = (np.array(target_positions), np.array(target_cols), np.array(target_weights, dtype=np.float32))
        return batch, targets, vocab

    def _targets(self, originals: list[int], privatized: list[int]) -> list[dict[int, float]]:
        """The soft target of each masked position under the objective (prob: one mechanism call for all)."""
        if self.objective == "denoising":
            return [{x: 1.0} for x in originals]
        if self.objective == "vanilla":
            return [{y: 1.0} for y in privatized]
        if not originals:
            return []
        repeated = np.repeat(np.asarray(originals, dtype=np.int64), self.k)
        draws = self._as_tokens(self._private([repeated]))[0].reshape(len(originals), self.k)
        targets = []
        for row in draws:
            values, counts = np.unique(row, return_counts=True)
            targets.append({int(v): c / self.k for v, c in zip(values, counts)})
        return targets


def soft_mlm_loss(logits, target_positions, target_tokens, target_weights):
    """Cross-entropy of the MLM logits against sparse soft targets, averaged over masked positions."""
    import torch

    device = logits.device  # the targets go where the model is (a GPU under --device cuda)
    rows = torch.as_tensor(target_positions, device=device)
    log_probs = torch.log_softmax(logits[rows[:, 0], rows[:, 1]], dim=-1)
    picked = log_probs[torch.arange(len(rows), device=device), torch.as_tensor(target_tokens, device=device)]
    weighted = -(torch.as_tensor(target_weights, device=device) * picked)
    positions = len({(int(a), int(b)) for a, b in np.asarray(target_positions).reshape(-1, 2).tolist()})
    return weighted.sum() / max(positions, 1)


class Pretraining:
    """One privacy-adaptive pretraining run in progress: the MLM, its privatized batches, its optimizer."""

    def __init__(self, mechanism, encoder_name: str, config: AdaptationConfig, sentences: list[str], key: str,
                 device: str = "cpu") -> None:
        import torch

        from bench.models.mlm import load_mlm

        self.config, self.mlm = config, load_mlm(encoder_name, device)
        space = WordPieceSpace(self.mlm.encoder)
        self.ids = [x[: MAX_LENGTH - 2] for x in space.client_ids(sentences) if len(x)]
        mechanism = copy.deepcopy(mechanism)  # the caller's mechanism keeps its state
        mechanism.fit(self.ids, space)  # SanText+: the sensitive set of the public corpus
        mechanism.streaming()
        self.rng = numpy_generator(config.seed, "adaptation", key)
        self.batches = PrivatizedMLMBatches(mechanism, space, self.mlm, self.ids, config.objective, config.k, self.rng)
        model = self.mlm.model
        model.get_input_embeddings().weight.requires_grad_(False)  # the user-side component
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=config.lr,
                                           foreach=True)
        warmup, steps = max(1, config.steps // 10), config.steps
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min((step + 1) / warmup, max(0.0, (steps - step) / (steps - warmup + 1))))

    def step(self) -> float:
        """One optimizer step on a fresh privatized, masked batch; returns the loss."""
        rows = self.rng.choice(len(self.ids), size=min(self.config.batch_size, len(self.ids)), replace=False)
        inputs, (positions, tokens, weights), _ = self.batches.batch(rows)
        self.mlm.model.train()
        loss = soft_mlm_loss(self.mlm.model(**inputs).logits, positions, tokens, weights)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.schedule.step()
        return float(loss.detach())


def adapted_dir(key: str) -> Path:
    """Where the adapted checkpoint of ``key`` is cached."""
    return cache_root() / "adapted" / key


def adaptation_target(mechanism, encoder_name: str, config: AdaptationConfig, task: str | None = None):
    """``(folder, budget, corpus)``: where ``adapt_encoder`` keeps the checkpoint for these arguments (the folder's
    name is its key), the budget as it applies (a ``--check`` cell's slice of the corpus) and the public corpus
    (sentences, description, hash). Nothing is trained."""
    from bench.data.public_corpus import public_corpus

    if smoke.active():  # a --check cell: a slice of the corpus (bench.core.smoke)
        config = replace(config, corpus_size=min(config.corpus_size, smoke.SENTENCES))
    corpus = public_corpus(config.corpus, task, config.corpus_size, config.seed)
    return adapted_dir(adaptation_key(encoder_name, mechanism.identity(), config, corpus[2])), config, corpus


def adaptation_seconds(config: AdaptationConfig) -> float | None:
    """The expected time of a pretraining at ``config``'s budget on this machine: its steps at the median rate
    (sequences per second) of the checkpoints of the same objective already cached here; None without one."""
    import statistics

    rates = [float(found["sequences_per_s"]) for found in cached_infos("adapted", ADAPTED_MARKER)
             if found.get("config", {}).get("objective") == config.objective and found.get("sequences_per_s")]
    return config.steps * config.batch_size / statistics.median(rates) if rates else None


def adapt_encoder(mechanism, encoder_name: str, config: AdaptationConfig, device: str = "cpu",
                  task: str | None = None) -> Path:
    """The encoder adapted to the public ``mechanism``: its directory (``from_pretrained``-loadable),
    pretrained if not cached. The server and an attacker adapting to the same mechanism share it.

    The public corpus leaves out any source that is the evaluation data of ``task`` (the task measured).
    """
    target, config, corpus = adaptation_target(mechanism, encoder_name, config, task)
    key = target.name
    smoke.note(f"{config.objective} adaptation of {encoder_name}, {config.steps} steps on {config.corpus_size} "
               f"sentences (key {key})")
    if verified(target, ADAPTED_MARKER, "adapted checkpoint"):
        return target
    root = scratch_instead(cache_root())  # an unwritable cache: warned once, the checkpoint lives for this run
    target = root / "adapted" / key
    locks = root / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(locks / f"adapted-{key}.lock"):  # a second process waits for the first's checkpoint
        if not verified(target, ADAPTED_MARKER, "adapted checkpoint"):
            _pretrain(mechanism, encoder_name, config, corpus, device, task, target)
    return target


def _pretrain(mechanism, encoder_name: str, config: AdaptationConfig, corpus: tuple[list[str], str, str], device: str,
              task: str | None, target: Path) -> None:
    """Pretrain on ``corpus`` (sentences, description, hash), score the MLM on held-out text before and after,
    and save the checkpoint to ``target`` (whose name is its key)."""
    import torch

    from bench.data.public_corpus import held_out
    from bench.models.masked_lm import masked_token_accuracy
    from bench.models.mlm import held_out_top1

    sentences, corpus_description, corpus_hash = corpus
    key = target.name
    run = Pretraining(mechanism, encoder_name, config, sentences, key, device)
    # never part of a public corpus
    held_out_texts, held_out_description, _ = held_out(task, *((smoke.HELD_OUT,) if smoke.active() else ()))
    before = held_out_top1(run.mlm, held_out_texts, seed=config.seed)  # the same starting MLM for every adaptation
    started = time.perf_counter()
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        for _ in track(range(config.steps), f"{config.objective} MLM adaptation ({mechanism.name})",
                       config.steps, unit="steps"):
            run.step()
    seconds = time.perf_counter() - started
    run.mlm.model.eval()
    after = masked_token_accuracy(run.mlm, held_out_texts, seed=config.seed)
    mlm = run.mlm
    mlm.head = f"{mlm.head.removesuffix(' (untrained)')}, trained by {config.objective} MLM adaptation " \
               f"({config.steps} steps)"
    info = {
        "key": key, "encoder": encoder_name, "mechanism": mechanism.describe(), "config": asdict(config),
        "corpus": corpus_description, "corpus_hash": corpus_hash, "head": mlm.head,
        "mlm_top1_before": before, "mlm_top1_after": after, "held_out": held_out_description,
        "seconds": round(seconds, 1), "sequences_per_s": round(config.steps * config.batch_size / seconds, 2),
        "privatize_share": round(run.batches.privatize_seconds / seconds, 3),
    }
    _save_atomically(mlm, info, target)


def _save_atomically(mlm, info: dict, target: Path) -> None:
    """Write the encoder, tokenizer and MLM weights and ``adaptation.json`` to ``target`` atomically."""
    with atomic_directory(target) as folder:
        mlm.save(folder)
        (folder / ADAPTED_MARKER).write_text(json.dumps(info, indent=2), encoding="utf-8")
