"""Privacy-adaptive pretraining (Qu et al. 2021, §3.4): further MLM pretraining on privatized public text.

The server adapts its encoder to the releases it will receive: public text is privatized on the fly
with the same mechanism and parameter as the client's (the defense's own ``privatize``), and the
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
mechanism and its parameters, the objective, the budget and the hash of the corpus, so a sweep never
pretrains twice. The CPU defaults (steps, batch size) are far below the paper's; see ``AdaptationConfig``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.cache import cache_root
from bench.mlm import MASK_RATE, MAX_LENGTH, MAX_PREDICTIONS, bert_mask
from bench.params import require

OBJECTIVES = ("vanilla", "prob", "denoising")
VERSION = 2  # of the recipe, in the cache key (2: trains on the whole corpus, scores on held-out text)


@dataclass(frozen=True)
class AdaptationConfig:
    """The budget of one adaptation run (the paper pretrains far longer, on a GPU)."""

    objective: str  # vanilla, prob or denoising
    steps: int = 300  # optimizer steps (CPU default; the paper trains for many epochs of Wikipedia+BookCorpus)
    batch_size: int = 16  # sequences per step
    lr: float = 5e-5  # AdamW learning rate, linear warm-up over the first 10% of the steps
    k: int = 10  # prob MLM: perturbations of each masked token (paper: 10)
    corpus: str = "auto"  # public corpus (bench.public_corpus): offline SQuAD contexts + CoNLL-03 sentences
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
    payload = json.dumps({"encoder": encoder, "mechanism": mechanism, "config": asdict(config),
                          "corpus": corpus_hash, "masking": [MASK_RATE, MAX_PREDICTIONS, MAX_LENGTH],
                          "version": VERSION},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


class PrivatizedMLMBatches:
    """Masked-LM batches built from public sentences privatized by a defense's own mechanism."""

    def __init__(self, defense, space, mlm, sentences_ids: list[np.ndarray], objective: str, k: int,
                 rng: np.random.Generator) -> None:
        self.defense, self.space, self.mlm = defense, space, mlm
        self.ids, self.objective, self.k, self.rng = sentences_ids, objective, k, rng
        self.vectors = defense.release_kind.value == "token_embeddings"
        self.privatize_seconds = 0.0

    def _private(self, ids: list[np.ndarray]) -> list[np.ndarray]:
        started = time.perf_counter()
        out = self.defense.privatize(ids, self.space, self.rng)
        self.privatize_seconds += time.perf_counter() - started
        return out

    def _as_tokens(self, released: list[np.ndarray]) -> list[np.ndarray]:
        """Token ids of a release: vectors are read as their nearest vocabulary token."""
        if not self.vectors:
            return released
        from bench.mechanisms import nearest_tokens

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
        inputs, target_rows, target_cols, target_weights = [], [], [], []
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
                weights = self._targets(int(original[position]), int(tokens[position]))
                for token, weight in weights.items():
                    target_rows.append((row, int(position) + 1))  # +1: [CLS] comes first
                    target_cols.append(token)
                    target_weights.append(weight)
        batch = self.mlm.encoder.model_inputs(inputs)
        return batch, (np.array(target_rows), np.array(target_cols), np.array(target_weights, dtype=np.float32)), vocab

    def _targets(self, original: int, privatized: int) -> dict[int, float]:
        """The soft target of one masked position under the objective."""
        if self.objective == "denoising":
            return {original: 1.0}
        if self.objective == "vanilla":
            return {privatized: 1.0}
        draws = self._as_tokens(self._private([np.full(self.k, original, dtype=np.int64)]))[0]
        values, counts = np.unique(draws, return_counts=True)
        return {int(v): c / self.k for v, c in zip(values, counts)}


def soft_mlm_loss(logits, target_positions, target_tokens, target_weights):
    """Cross-entropy of the MLM logits against sparse soft targets, averaged over masked positions."""
    import torch

    rows = torch.as_tensor(target_positions)
    log_probs = torch.log_softmax(logits[rows[:, 0], rows[:, 1]], dim=-1)
    picked = log_probs[torch.arange(len(rows)), torch.as_tensor(target_tokens)]
    weighted = -(torch.as_tensor(target_weights) * picked)
    positions = len({(int(a), int(b)) for a, b in rows.tolist()})
    return weighted.sum() / max(positions, 1)


def adapt_encoder(defense, encoder_name: str, config: AdaptationConfig, device: str = "cpu",
                  log=lambda message: None) -> Path:
    """The adapted encoder's directory (``from_pretrained``-loadable), pretraining it if not cached."""
    import torch

    from bench.mlm import load_mlm, masked_token_accuracy
    from bench.public_corpus import held_out, public_corpus
    from bench.seeding import numpy_generator
    from bench.token_space import WordPieceSpace

    sentences, corpus_description, corpus_hash = public_corpus(config.corpus, None, config.corpus_size, config.seed)
    from bench.params import component_args

    mechanism = {"defense": defense.registry_name,
                 **{k: v for k, v in component_args(defense).items() if not k.startswith("adapt")}}
    key = adaptation_key(encoder_name, mechanism, config, corpus_hash)
    target = cache_root() / "adapted" / key
    if (target / "adaptation.json").is_file():
        return target
    mlm = load_mlm(encoder_name, device)
    space = WordPieceSpace(mlm.encoder)
    held_out_texts, held_out_description, _ = held_out()  # never part of a public corpus
    ids = [x[: MAX_LENGTH - 2] for x in space.client_ids(sentences) if len(x)]
    defense.fit(ids, space)  # SanText+: the sensitive set of the public corpus
    rng = numpy_generator(config.seed, "adaptation", key)
    batches = PrivatizedMLMBatches(defense, space, mlm, ids, config.objective, config.k, rng)
    model = mlm.model
    model.get_input_embeddings().weight.requires_grad_(False)  # the user-side component
    before = masked_token_accuracy(mlm, held_out_texts, seed=config.seed)
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr)
    warmup = max(1, config.steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (config.steps - step) / (config.steps - warmup + 1))))
    model.train()
    started = time.perf_counter()
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        for step in range(config.steps):
            rows = rng.choice(len(ids), size=min(config.batch_size, len(ids)), replace=False)
            inputs, (positions, tokens, weights), _ = batches.batch(rows)
            logits = model(**inputs).logits
            loss = soft_mlm_loss(logits, positions, tokens, weights)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            if step % 50 == 0:
                log(f"adaptation step {step}/{config.steps}: loss {loss.item():.3f}")
    seconds = time.perf_counter() - started
    model.eval()
    after = masked_token_accuracy(mlm, held_out_texts, seed=config.seed)
    mlm.head = f"{mlm.head.removesuffix(' (untrained)')}, trained by {config.objective} MLM adaptation " \
               f"({config.steps} steps)"
    info = {
        "key": key, "encoder": encoder_name, "mechanism": mechanism, "config": asdict(config),
        "corpus": corpus_description, "corpus_hash": corpus_hash, "head": mlm.head,
        "mlm_top1_before": before, "mlm_top1_after": after, "held_out": held_out_description,
        "seconds": round(seconds, 1), "sequences_per_s": round(config.steps * config.batch_size / seconds, 2),
        "privatize_share": round(batches.privatize_seconds / seconds, 3),
    }
    _save_atomically(mlm, info, target)
    return target


def _save_atomically(mlm, info: dict, target: Path) -> None:
    """Write the encoder, tokenizer and MLM weights to a temporary folder, then rename it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        mlm.save(tmp)
        (tmp / "adaptation.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
        if target.exists():  # another process finished first: keep its copy
            shutil.rmtree(tmp)
            return
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
