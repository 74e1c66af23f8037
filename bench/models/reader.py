"""Extractive reader: the server's frozen encoder over a released (question, context) pair and a start/end head.

The server assembles each released pair as ``[CLS] question [SEP] context [SEP]`` (``Encoder.model_inputs``; a pair
longer than ``max_length`` is cut as the tokenizer cuts text pairs, the longer segment's end first) and keeps the
frozen encoder's last hidden state at every position. The head projects the states to 128 numbers (one shared linear
layer) and sees, at each context position, the projected state ``h``, the projected question summary ``c`` attended
by it (softmax of the raw states' scaled dot products with the question's states; no parameters), ``h * c``, ``h``
times the projected mean question state and whether the position's released token occurs in the released question
(token ids only; 0 for vector releases); a linear layer and ReLU reduce these to 128 numbers, two residual
convolutions (5 positions wide) read the context, and a linear layer gives a start and an end logit. (A first
version, a BiLSTM over the 1,537 unprojected features, took 1.6 s a training step of 32 pairs on the shared cores,
this one 0.4 s; their quality was not compared.) The encoder's states are cached on disk (float16), keyed by the
encoder and the exact released ids, so the evaluation split every defense releases unchanged is encoded once.
Trained with cross-entropy on the start and end positions (Adam, cosine decay); predictions are the span ``i <= j <
i + 30`` (WordPieces: the server sees pieces, not words) with the largest ``start_i + end_j``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench.core.cache import FeatureCache, texts_key
from bench.core.errors import BenchError
from bench.core.progress import track
from bench.models.encoders import fit_pair
from bench.models.servers import Server

if TYPE_CHECKING:
    from bench.models.encoders import Encoder
    from bench.models.training import TrainingConfig

MAX_ANSWER = 30  # WordPieces an answer may span
WIDTH = 128  # the head's hidden width
KERNEL = 5  # context positions each convolution sees
LAYERS = 2  # residual convolutions over the context


@dataclass
class PairFeatures:
    """The frozen encoder's states of one released pair: context positions, question positions, token matches."""

    context: np.ndarray  # (context pieces kept, dim) float32
    question: np.ndarray  # (question pieces kept, dim)
    match: np.ndarray  # (context pieces kept,) 1.0 where the context token occurs in the question


def pair_features(encoder, released: list, batch_size: int = 32) -> list[PairFeatures]:
    """Per-position states of released ``(question, context)`` pairs (ids or vectors), cached on disk (float16)."""
    budget = encoder.max_length - 3
    kept = [fit_pair(q, c, budget) for q, c in released]
    lengths = np.array([[len(q), len(c)] for q, c in kept], dtype=np.int64).reshape(-1, 2)
    use_cache = getattr(encoder, "cache", False)
    cache, key = FeatureCache(), texts_key({**encoder.settings(), "states": "reader-pairs-1"}, released)
    flat = cache.get(encoder.name, key) if use_cache else None
    if flat is None or len(flat) != lengths.sum():
        flat = _pair_states(encoder, released, lengths, batch_size)
        if use_cache:
            cache.put(encoder.name, key, flat)
    bounds = np.r_[0, np.cumsum(lengths.sum(1))]
    out = []
    for (question, context), (q, c), begin in zip(kept, lengths, bounds):
        ids = np.asarray(question).ndim == 1 and np.asarray(context).ndim == 1
        match = (np.isin(np.asarray(context), np.asarray(question)).astype(np.float32) if ids
                 else np.zeros(c, np.float32))
        rows = flat[begin:begin + q + c].astype(np.float32)
        out.append(PairFeatures(rows[q:], rows[:q], match))
    return out


def _pair_states(encoder, released: list, lengths: np.ndarray, batch_size: int) -> np.ndarray:
    """The states of every pair's kept question positions then kept context positions, stacked (float16);
    batches of similar length."""
    import torch


    order = np.argsort(lengths.sum(1), kind="stable")
    bounds = np.r_[0, np.cumsum(lengths.sum(1))]
    flat = np.zeros((int(bounds[-1]), encoder.dim), dtype=np.float16)
    was_training = encoder.model.training
    encoder.model.eval()
    starts = range(0, len(order), batch_size)
    with torch.inference_mode():
        for start in track(starts, f"encoding {len(released)} question-context pairs", len(starts), unit="batches"):
            rows = order[start:start + batch_size]
            hidden = encoder.model(**encoder.model_inputs([released[i] for i in rows])).last_hidden_state
            hidden = hidden.float().cpu().numpy()
            for row, index in enumerate(rows):
                q, c = lengths[index]
                # [CLS] question [SEP] context [SEP]
                flat[bounds[index]:bounds[index] + q] = hidden[row, 1:1 + q]
                flat[bounds[index] + q:bounds[index + 1]] = hidden[row, 2 + q:2 + q + c]
    encoder.model.train(was_training)
    return flat


def _head(dim: int, dropout: float):
    import torch
    from torch import nn

    class SpanHead(nn.Module):
        """Question-aware features of each context position -> two residual convolutions -> start and end logits."""

        def __init__(self) -> None:
            super().__init__()
            self.project = nn.Linear(dim, WIDTH)  # shared by context states, attended and mean question states
            self.reduce = nn.Sequential(nn.Linear(4 * WIDTH + 1, WIDTH), nn.ReLU(), nn.Dropout(dropout))
            self.convs = nn.ModuleList(nn.Conv1d(WIDTH, WIDTH, KERNEL, padding=KERNEL // 2) for _ in range(LAYERS))
            self.out = nn.Linear(WIDTH, 2)

        def forward(self, context, question, match, context_mask, question_mask):
            scores = context @ question.transpose(1, 2) / math.sqrt(context.shape[-1])
            scores = scores.masked_fill(~question_mask[:, None, :], -1e4)
            attended = self.project(torch.softmax(scores, dim=-1) @ question)
            mean = (question * question_mask[..., None]).sum(1) / question_mask.sum(1, keepdim=True).clamp(min=1)
            h, mean = self.project(context), self.project(mean)[:, None, :]
            x = self.reduce(torch.cat([h, attended, h * attended, h * mean, match[..., None]], -1))
            keep = context_mask[:, None, :].to(x.dtype)
            z = x.transpose(1, 2) * keep
            for conv in self.convs:
                z = z + torch.relu(conv(z)) * keep
            logits = self.out(z.transpose(1, 2)).masked_fill(~context_mask[..., None], -1e4)
            return logits[..., 0], logits[..., 1]

    return SpanHead()


def _batch(features: list[PairFeatures]):
    """Padded tensors of a batch: context, question, match, and the two masks."""
    import torch

    n, dim = len(features), features[0].context.shape[1]
    width_c = max(max(len(f.context) for f in features), 1)
    width_q = max(max(len(f.question) for f in features), 1)
    context, question = torch.zeros(n, width_c, dim), torch.zeros(n, width_q, dim)
    match = torch.zeros(n, width_c)
    context_mask = torch.zeros(n, width_c, dtype=torch.bool)
    question_mask = torch.zeros(n, width_q, dtype=torch.bool)
    for row, f in enumerate(features):
        context[row, :len(f.context)] = torch.from_numpy(f.context)
        question[row, :len(f.question)] = torch.from_numpy(f.question)
        match[row, :len(f.match)] = torch.from_numpy(f.match)
        context_mask[row, :len(f.context)] = True
        question_mask[row, :len(f.question)] = True
    return context, question, match, context_mask, question_mask


def best_spans(start_logits, end_logits, lengths, max_answer: int = MAX_ANSWER) -> np.ndarray:
    """``(n, 2)`` the span ``i <= j < i + max_answer`` within each row's length maximising ``start_i + end_j``;
    (-1, -1) for a row of length 0."""
    import torch

    width = start_logits.shape[1]
    scores = start_logits[:, :, None] + end_logits[:, None, :]
    i, j = torch.arange(width)[:, None], torch.arange(width)[None, :]
    allowed = (j >= i) & (j < i + max_answer)
    scores = scores.masked_fill(~allowed, -1e9)
    flat = scores.reshape(len(scores), -1).argmax(1)
    out = torch.stack([flat // width, flat % width], 1).numpy().astype(np.int64)
    out[np.asarray(lengths) == 0] = -1
    return out


@dataclass
class ReaderServer(Server):
    """Extractive reader on released (question, context) pairs: frozen encoder states and a convolutional
    start/end head.
    Labels are ``(n, 2)`` (first, last) released context pieces of the answer, (-1, -1) for none (skipped)."""

    protocols: ClassVar[tuple[str, ...]] = ("tokens",)

    config: TrainingConfig  # epochs, lr, batch_size, dropout
    seed: int
    encoder: Encoder | None = None
    head: Any = field(default=None, init=False)

    def fit_tokens(self, released, labels):
        """Train the head with cross-entropy on the answer's start and end pieces (examples whose answer the
        pair's cut removed are left out)."""
        import torch

        if not released or not isinstance(released[0], tuple):
            raise BenchError("the reader trains on (question, context) pairs.")
        features = pair_features(self.encoder, released)
        labels = np.asarray(labels, dtype=np.int64).reshape(-1, 2)
        keep = [i for i, (f, (s, e)) in enumerate(zip(features, labels)) if 0 <= s <= e < len(f.context)]
        if not keep:
            raise BenchError("no training example's answer is inside its released context.")
        torch.manual_seed(self.seed)
        head = _head(features[0].context.shape[1], self.config.dropout).train()
        optimizer = torch.optim.Adam(head.parameters(), lr=self.config.lr, foreach=True)
        steps = self.config.epochs * math.ceil(len(keep) / self.config.batch_size)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(steps, 1))
        generator = torch.Generator().manual_seed(self.seed)
        targets = torch.from_numpy(labels)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the head's small steps thrash on two shared cores (6x slower measured)
        try:
            self._train(head, optimizer, schedule, generator, features, keep, targets)
        finally:
            torch.set_num_threads(threads)
        self.head = head.eval()

    def _train(self, head, optimizer, schedule, generator, features, keep, targets) -> None:
        import torch


        for _ in track(range(self.config.epochs), f"training reader ({len(keep)} questions)", self.config.epochs,
                           unit="epochs"):
            order = torch.randperm(len(keep), generator=generator)
            for start in range(0, len(order), self.config.batch_size):
                rows = [keep[i] for i in order[start:start + self.config.batch_size].tolist()]
                start_logits, end_logits = head(*_batch([features[i] for i in rows]))
                y = targets[rows]
                loss = (torch.nn.functional.cross_entropy(start_logits, y[:, 0])
                        + torch.nn.functional.cross_entropy(end_logits, y[:, 1]))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()

    def predict_tokens(self, released):
        """``(n, 2)`` predicted (first, last) context pieces of each pair's answer."""
        import torch

        features = pair_features(self.encoder, released)
        out = np.full((len(features), 2), -1, dtype=np.int64)
        with torch.inference_mode():
            for start in range(0, len(features), 64):
                chunk = features[start:start + 64]
                start_logits, end_logits = self.head(*_batch(chunk))
                out[start:start + 64] = best_spans(start_logits, end_logits, [len(f.context) for f in chunk])
        return out
