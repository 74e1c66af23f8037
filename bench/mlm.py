"""Masked-LM adapter: any encoder as a masked language model, and its measured top-1 accuracy.

Hub checkpoints that ship an MLM head (``bert-base-uncased``, ``bert-base-cased``, ...) load as they
are with ``AutoModelForMaskedLM``. An encoder without one — the offline default ``minilm`` — gets a
fresh BERT-style prediction head (dense, GELU, LayerNorm, decoder) whose decoder weight is tied to
the encoder's input embeddings, initialised from a fixed seed; privacy-adaptive pretraining
(bench.adaptation) trains it. ``head`` says which kind a model has, and ``masked_token_accuracy``
measures it on held-out text, so every record that uses an MLM can say how strong it is.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bench.errors import BenchError

HEAD_FILE = "mlm_head.json"  # in a saved (adapted) checkpoint: which head it carries


@dataclass
class MaskedLM:
    """A masked LM with the encoder adapter that tokenizes and assembles its inputs."""

    name: str
    model: Any  # a transformers *ForMaskedLM module
    encoder: Any  # bench.encoders.Encoder of the same checkpoint (tokenizer, model_inputs, table)
    head: str  # which prediction head, in words

    @property
    def tokenizer(self):
        """The WordPiece tokenizer."""
        return self.encoder.tokenizer

    def save(self, path: Path) -> None:
        """``save_pretrained`` of model and tokenizer, plus the head description."""
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        (Path(path) / HEAD_FILE).write_text(json.dumps({"head": self.head}), encoding="utf-8")


def load_mlm(name: str = "minilm", device: str = "cpu") -> MaskedLM:
    """The masked LM of encoder ``name`` (a fresh copy: callers may train it)."""
    import torch
    from transformers import AutoModelForMaskedLM, BertConfig, BertForMaskedLM

    from bench.encoders import Encoder, _locate
    from bench.seeding import derive_seed

    encoder = Encoder(name, device=device, cache=False)
    path, _ = _locate(name)
    saved = Path(path) / HEAD_FILE
    if saved.is_file():  # an adapted checkpoint written by bench.adaptation
        model = AutoModelForMaskedLM.from_pretrained(path)
        head = json.loads(saved.read_text(encoding="utf-8"))["head"]
    elif name != "minilm" and _has_mlm_head(path):
        model = AutoModelForMaskedLM.from_pretrained(path)
        head = f"the checkpoint's pretrained MLM head ({name})"
    else:
        config = BertConfig.from_pretrained(path)
        config.tie_word_embeddings = True
        with torch.random.fork_rng():
            torch.manual_seed(derive_seed(0, "mlm-head", name))
            model = BertForMaskedLM(config)
        missing, _ = model.bert.load_state_dict(encoder.model.state_dict(), strict=False)
        if any(not key.startswith("pooler") for key in missing):
            raise BenchError(f"encoder '{name}' is not a BERT encoder: no masked-LM head can be attached.")
        model.tie_weights()
        head = f"fresh BERT-style head tied to {name}'s input embeddings (untrained)"
    return MaskedLM(name, model.to(device).eval(), encoder, head)


def _has_mlm_head(path: str) -> bool:
    """Whether the checkpoint's config names a masked-LM architecture."""
    from transformers import AutoConfig

    try:
        architectures = AutoConfig.from_pretrained(path).architectures or []
    except OSError as exc:
        raise BenchError(f"encoder '{path}' could not be loaded ({exc.__class__.__name__}); use minilm offline "
                         "or run where the Hugging Face hub is reachable.") from exc
    return any("MaskedLM" in a or "ForPreTraining" in a for a in architectures)


@functools.lru_cache(maxsize=8)
def _regular(tokenizer) -> np.ndarray:
    from bench.mechanisms import regular_token_ids

    return regular_token_ids(tokenizer.get_vocab())


def predict_masked(mlm: MaskedLM, rows: list[np.ndarray], positions: np.ndarray, batch_size: int = 64) -> np.ndarray:
    """Top-1 regular token at ``positions[i]`` of id sequence ``rows[i]`` (the position already masked)."""
    import torch

    regular = torch.as_tensor(_regular(mlm.tokenizer))
    out = np.empty(len(rows), dtype=np.int64)
    with torch.inference_mode():
        for start in range(0, len(rows), batch_size):
            batch = mlm.encoder.model_inputs(rows[start : start + batch_size])
            logits = mlm.model(**batch).logits
            where = torch.as_tensor(positions[start : start + batch_size]) + 1  # [CLS] comes first
            picked = logits[torch.arange(len(where)), where][:, regular]
            out[start : start + len(where)] = regular[picked.argmax(dim=1)].numpy()
    return out


def masked_token_accuracy(mlm: MaskedLM, texts: Sequence[str], rate: float = 0.15, seed: int = 0,
                          max_predictions: int = 20) -> float:
    """Top-1 accuracy of the MLM at masked positions of ``texts`` (15% of the regular tokens, at most 20
    per sentence, each replaced by [MASK], one position per model row)."""
    from bench.seeding import numpy_generator

    rng = numpy_generator(seed, "mlm-accuracy")
    regular = _regular(mlm.tokenizer)
    rows, positions, truth = [], [], []
    for ids in mlm.encoder.token_ids(list(texts)):
        candidates = np.flatnonzero(np.isin(ids, regular))
        if len(candidates) == 0:
            continue
        count = min(max_predictions, max(1, int(round(rate * len(candidates)))))
        for position in rng.choice(candidates, size=count, replace=False):
            masked = ids.copy()
            masked[position] = mlm.tokenizer.mask_token_id
            rows.append(masked)
            positions.append(position)
            truth.append(ids[position])
    if not rows:
        return 0.0
    return float(np.mean(predict_masked(mlm, rows, np.asarray(positions)) == np.asarray(truth)))
