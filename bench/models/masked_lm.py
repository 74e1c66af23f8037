"""A masked LM: any encoder as a masked language model, BERT's masking, and its measured top-1 accuracy.

Hub checkpoints that ship an MLM head (``bert-base-uncased``, ``bert-base-cased``, ...) load as they
are with ``AutoModelForMaskedLM.from_pretrained``. An encoder without one — the offline default
``minilm`` (all-MiniLM-L6-v2, a BertModel) — gets a fresh BERT-style prediction head (dense, GELU,
LayerNorm, decoder) whose decoder weight is tied to the encoder's input embeddings, initialised from a
fixed seed; privacy-adaptive pretraining (bench.models.adaptation) can train it. A directory saved by
``MaskedLM.save`` loads back with the head description it was saved with. ``head`` says in words which
head a model has, and ``masked_token_accuracy`` measures it on held-out text with BERT's masking, so
every record and printout that uses an MLM can say how strong it is.
"""

from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bench.core.errors import BenchError
from bench.core.progress import track
from bench.core.seeding import derive_seed, numpy_generator
from bench.models.encoders import Encoder, autocast, locate, quiet_loading
from bench.privacy.mechanisms import regular_token_ids

HEAD_FILE = "mlm_head.json"  # in a saved (adapted) checkpoint: which head it carries
MASK_RATE, MAX_PREDICTIONS, MAX_LENGTH = 0.15, 20, 128  # BERT's masking (Devlin et al. 2019), as Qu et al.
PRETRAINED_HEAD = "checkpoint's pretrained MLM head"


@dataclass
class MaskedLM:
    """A masked LM with the encoder adapter that tokenizes and assembles its inputs.

    ``encoder.model`` is the MLM's own encoder body, so the encoder adapter, the MLM and the decoder of a
    tied head all share one input embedding table.
    """

    name: str
    model: Any  # a transformers *ForMaskedLM module
    encoder: Encoder  # of the same checkpoint (tokenizer, model_inputs, token_ids)
    head: str  # which prediction head, in words

    @property
    def tokenizer(self):
        """The WordPiece tokenizer."""
        return self.encoder.tokenizer

    @property
    def input_embeddings(self):
        """The input embedding table, ``(vocab, dim)`` (a fresh head's decoder weight is this very tensor)."""
        return self.model.get_input_embeddings().weight

    @property
    def regular(self) -> np.ndarray:
        """Ids of the regular tokens: the only ones ever masked or predicted."""
        return _regular(self.tokenizer)

    def save(self, path: Path) -> None:
        """``save_pretrained`` of model and tokenizer, plus the head description (``load_mlm(path)`` reads it)."""
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        (Path(path) / HEAD_FILE).write_text(json.dumps({"head": self.head}), encoding="utf-8")


def load_checkpoint(name: str = "minilm", device: str = "cpu", seed: int = 0) -> MaskedLM:
    """The masked LM of a hub id, of ``minilm`` (a fresh, untrained head), or of a directory saved by
    ``MaskedLM.save``; ``bench.models.mlm.load_mlm`` also resolves the names of MLMs trained offline.

    Each call returns a fresh copy (callers may train it). ``seed`` fixes a fresh head's initialisation.
    """
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM, BertForMaskedLM

    if name.startswith("mock") or name == "bilstm":
        raise BenchError(f"encoder '{name}' has no WordPiece transformer to use as a masked LM; use minilm or a "
                         "hub id such as bert-base-uncased.")
    path, _ = locate(name)
    saved = Path(path) / HEAD_FILE
    with quiet_loading() if saved.is_file() else contextlib.nullcontext():
        encoder = Encoder(name, device=device, cache=False)
    config = AutoConfig.from_pretrained(path)  # Encoder loaded it already: no new failure modes here
    if saved.is_file():  # a checkpoint written by MaskedLM.save (e.g. privacy-adapted)
        model = AutoModelForMaskedLM.from_pretrained(path)
        head = json.loads(saved.read_text(encoding="utf-8"))["head"]
    elif name != "minilm" and has_mlm_head(config):
        model = AutoModelForMaskedLM.from_pretrained(path)  # the hub checkpoint as it is
        head = f"{PRETRAINED_HEAD} ({name})"
    else:
        config.tie_word_embeddings = True
        with torch.random.fork_rng():  # the head's init depends on the seed only, never on the caller's RNG
            torch.manual_seed(derive_seed(seed, "mlm-head", name))
            try:
                model = BertForMaskedLM(config) if config.model_type == "bert" else \
                    AutoModelForMaskedLM.from_config(config)
            except ValueError as exc:
                raise BenchError(f"encoder '{name}' ({config.model_type}) has no masked-LM architecture in "
                                 "transformers; use minilm or a hub id with an MLM head.") from exc
        missing, _ = model.base_model.load_state_dict(encoder.model.state_dict(), strict=False)
        if missing:
            raise BenchError(f"encoder '{name}': its weights do not fit a masked-LM body (missing {missing[:3]}).")
        model.tie_weights()
        kind = "BERT-style" if config.model_type == "bert" else f"{config.model_type}"
        head = f"fresh {kind} head tied to {name}'s input embeddings (untrained)"
    model = model.to(device).eval()
    encoder.model = model.base_model  # one encoder body and one embedding table for adapter and MLM
    return MaskedLM(name, model, encoder, head)


def has_mlm_head(config) -> bool:
    """Whether a checkpoint's config names an architecture that carries a masked-LM head."""
    return any("MaskedLM" in a or "ForPreTraining" in a for a in (config.architectures or []))


@functools.lru_cache(maxsize=8)
def _regular(tokenizer) -> np.ndarray:
    return regular_token_ids(tokenizer.get_vocab())


def bert_mask(ids: np.ndarray, regular: np.ndarray, rng: np.random.Generator, rate: float = MASK_RATE,
              max_predictions: int = MAX_PREDICTIONS) -> tuple[np.ndarray, np.ndarray]:
    """BERT's choice of positions to predict and how each is shown.

    ``rate`` of the regular tokens of ``ids`` (rounded, at least 1, at most ``max_predictions``); special
    tokens and [UNK] are never chosen. Returns the sorted positions and, per position, 0 = replaced by
    [MASK], 1 = replaced by a random regular token, 2 = kept (probabilities 0.8 / 0.1 / 0.1).
    """
    candidates = np.flatnonzero(np.isin(ids, regular))
    if len(candidates) == 0:
        return candidates, candidates
    count = min(max_predictions, max(1, int(round(rate * len(candidates)))))
    positions = np.sort(rng.choice(candidates, size=count, replace=False))
    return positions, rng.choice(3, size=count, p=[0.8, 0.1, 0.1])


def apply_mask(ids: np.ndarray, positions: np.ndarray, how: np.ndarray, mask_id: int, regular: np.ndarray,
               rng: np.random.Generator) -> np.ndarray:
    """A copy of ``ids`` with the chosen positions shown as ``bert_mask`` decided."""
    shown = np.array(ids, dtype=np.int64, copy=True)
    shown[positions[how == 0]] = mask_id
    shown[positions[how == 1]] = rng.choice(regular, size=int(np.sum(how == 1)))
    return shown


def prediction_head(model):
    """The module that maps hidden states to vocabulary logits, when the architecture names it."""
    for attribute in ("cls", "lm_head"):  # BERT family, RoBERTa family
        if hasattr(model, attribute):
            return getattr(model, attribute)
    return None


def top1_at(mlm: MaskedLM, rows: list[np.ndarray], types: list[np.ndarray], where: list[np.ndarray],
            allowed: np.ndarray | None = None, batch_size: int = 64, description: str = "") -> list[np.ndarray]:
    """The MLM's most probable token among ``allowed`` (default: the regular tokens) at positions ``where[i]``
    of the complete input sequence ``rows[i]`` (special tokens included) with token types ``types[i]``.

    Rows are batched by length; the vocabulary projection runs at the asked positions only.
    """
    import torch


    allowed = torch.as_tensor(mlm.regular if allowed is None else allowed)
    order = np.argsort([len(r) for r in rows], kind="stable")
    out: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(rows)
    head = prediction_head(mlm.model)
    device = mlm.model.device
    pad = mlm.tokenizer.pad_token_id
    starts = range(0, len(rows), batch_size)
    with torch.inference_mode():
        for start in track(starts, description or f"masked LM on {len(rows)} rows", len(starts), unit="batches"):
            chunk = order[start : start + batch_size]
            width = max(len(rows[i]) for i in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            token_types = torch.zeros((len(chunk), width), dtype=torch.long)
            attention = torch.zeros((len(chunk), width), dtype=torch.long)
            for j, i in enumerate(chunk):
                ids[j, : len(rows[i])] = torch.as_tensor(rows[i])
                token_types[j, : len(rows[i])] = torch.as_tensor(types[i])
                attention[j, : len(rows[i])] = 1
            batch = {"input_ids": ids.to(device), "attention_mask": attention.to(device)}
            if getattr(mlm.model.config, "type_vocab_size", 0) > 1:
                batch["token_type_ids"] = token_types.to(device)
            row_index = torch.as_tensor(np.repeat(np.arange(len(chunk)), [len(where[i]) for i in chunk]))
            column = torch.as_tensor(np.concatenate([np.asarray(where[i], dtype=np.int64) for i in chunk]))
            with autocast(device):
                if head is not None:
                    hidden = mlm.model.base_model(**batch).last_hidden_state
                    logits = head(hidden[row_index, column])
                else:
                    logits = mlm.model(**batch).logits[row_index, column]
            best = allowed[logits[:, allowed.to(device)].argmax(dim=1).cpu()].numpy()
            bounds = np.cumsum([0] + [len(where[i]) for i in chunk])
            for j, i in enumerate(chunk):
                out[i] = best[bounds[j] : bounds[j + 1]]
    return out


def masked_token_accuracy(mlm: MaskedLM, texts: Sequence[str], rate: float = MASK_RATE, seed: int = 0,
                          max_predictions: int = MAX_PREDICTIONS, max_length: int = MAX_LENGTH,
                          batch_size: int = 32) -> float:
    """Top-1 accuracy of the MLM at BERT-masked positions of ``texts`` (meant for held-out public text).

    Each text is one sequence of at most ``max_length`` tokens; ``rate`` of its regular tokens (at most
    ``max_predictions``) are chosen and shown 80% as [MASK], 10% as a random regular token, 10% unchanged,
    all at once; the prediction at a chosen position (regular tokens only) must equal the original token.
    """
    rng = numpy_generator(seed, "mlm-accuracy")
    tokenizer, regular = mlm.tokenizer, mlm.regular
    encoded = tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=max_length - 2)
    rows, types, where, truth = [], [], [], []
    for ids in encoded["input_ids"]:
        ids = np.asarray(ids, dtype=np.int64)
        positions, how = bert_mask(ids, regular, rng, rate, max_predictions)
        if len(positions) == 0:
            continue
        shown = apply_mask(ids, positions, how, tokenizer.mask_token_id, regular, rng)
        rows.append(np.concatenate([[tokenizer.cls_token_id], shown, [tokenizer.sep_token_id]]))
        types.append(np.zeros(len(rows[-1]), dtype=np.int64))
        where.append(positions + 1)  # [CLS] comes first
        truth.append(ids[positions])
    if not rows:
        return 0.0
    found = top1_at(mlm, rows, types, where, batch_size=batch_size, description="masked-token accuracy")
    return float(np.mean(np.concatenate(found) == np.concatenate(truth)))
