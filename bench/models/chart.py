"""A span-based chart parser over released tokens (Stern et al. 2017; Kitaev and Klein 2018), small and CPU-fast.

The server's frozen encoder gives each released token a vector (``Encoder.token_states``). A one-layer BiLSTM
(trained) runs over them between a learned start and end vector; fencepost k (between tokens k-1 and k) has the
forward state after token k-1 and the backward state before token k, and span (i, j) is represented by the
differences of its fenceposts' states, [f_j - f_i ; b_i - b_j], and their concatenation. An MLP (one hidden
layer, LayerNorm, ReLU) scores every label of every span; label 0 is "none" (not a constituent). Training is
cross-entropy over ALL spans of each sentence (every span's gold label, "none" for non-constituents), Adam with
cosine decay.

Decoding: a span's score is max(0, best label logit - "none" logit) with that label (or none when the margin is
negative); CKY (numpy, vectorized over split points and start positions) finds the binary tree over the tokens
with the largest sum of span scores; its spans that carry a label are the parse. The span over all tokens
always gets its best real label (a sentence is a constituent). Labels are strings the task chooses (a unary
chain's joint label such as ``S+VP``); the label set is the training labels'.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

from bench.core.errors import BenchError
from bench.core.seeding import derive_seed
from bench.models.servers import Server

if TYPE_CHECKING:
    from bench.models.encoders import Encoder
    from bench.models.training import TrainingConfig

NONE = "<none>"  # label id 0: the span is not a constituent
LabelledSpan = tuple[int, int, str]  # (start token, end token exclusive, label)


def cky(margins: np.ndarray) -> list[tuple[int, int]]:
    """The spans of the best binary tree over ``n`` tokens, given span scores ``margins[i, j]`` (0 <= i < j <= n;
    other entries ignored): the tree maximising the sum of its spans' scores (every tree has 2n - 1 spans)."""
    n = margins.shape[0] - 1
    if n < 1:
        return []
    best = np.zeros((n + 1, n + 1))
    split = np.zeros((n + 1, n + 1), dtype=np.int64)
    idx = np.arange(n)
    best[idx, idx + 1] = margins[idx, idx + 1]
    for length in range(2, n + 1):
        starts = np.arange(n - length + 1)
        mids = starts[:, None] + np.arange(1, length)[None, :]  # (starts, length - 1)
        totals = best[starts[:, None], mids] + best[mids, starts[:, None] + length]
        choice = totals.argmax(axis=1)
        best[starts, starts + length] = totals[np.arange(len(starts)), choice] + margins[starts, starts + length]
        split[starts, starts + length] = mids[np.arange(len(starts)), choice]
    spans, stack = [], [(0, n)]
    while stack:
        i, j = stack.pop()
        spans.append((i, j))
        if j - i > 1:
            k = int(split[i, j])
            stack += [(k, j), (i, k)]
    return spans


def _model(dim: int, num_labels: int, lstm: int, hidden: int, dropout: float):
    import torch
    from torch import nn

    class SpanScorer(nn.Module):
        """Per-token vectors -> label logits of every span (i, j), 0 <= i < j <= n, of each padded sentence."""

        def __init__(self) -> None:
            super().__init__()
            self.sentinels = nn.Parameter(torch.zeros(2, dim))  # start, end
            self.dropout = nn.Dropout(dropout)
            self.rnn = nn.LSTM(dim, lstm, batch_first=True, bidirectional=True)
            # the span MLP's first layer is linear in its endpoints' fencepost features (the differences
            # [f_j - f_i ; b_i - b_j] and the concatenation [f_i ; b_i ; f_j ; b_j] are special cases), so it is
            # computed once per fencepost, as a start and an end projection, and each span adds the two
            self.start = nn.Linear(2 * lstm, hidden, bias=False)
            self.end = nn.Linear(2 * lstm, hidden)
            self.out = nn.Sequential(nn.LayerNorm(hidden), nn.ReLU(), nn.Linear(hidden, num_labels))

        def forward(self, x, lengths):
            """``x`` (B, m, dim) zero-padded, ``lengths`` (B,) tokens -> (B, P, labels) over ``span_pairs(m)``."""
            batch, m, _ = x.shape
            seq = torch.zeros(batch, m + 2, dim, dtype=x.dtype)
            seq[:, 1 : m + 1] = x
            seq[:, 0] = self.sentinels[0]
            seq[torch.arange(batch), lengths + 1] = self.sentinels[1]
            packed = nn.utils.rnn.pack_padded_sequence(self.dropout(seq), (lengths + 2).cpu(), batch_first=True,
                                                       enforce_sorted=False)
            states, _ = self.rnn(packed)
            states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=m + 2)
            fences = torch.cat([states[:, : m + 1, :lstm], states[:, 1 : m + 2, lstm:]], dim=-1)  # k = 0..m
            i, j = span_pairs(m)
            return self.out(self.start(fences)[:, i] + self.end(fences)[:, j])

    return SpanScorer()


@contextmanager
def _torch_threads(threads: int):
    """torch's intra-op threads set to ``threads`` while the block runs (0: unchanged)."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def span_pairs(m: int):
    """Index tensors (i, j) of every span 0 <= i < j <= m, in row order."""
    import torch

    pairs = torch.triu_indices(m + 1, m + 1, offset=1)
    return pairs[0], pairs[1]


@dataclass
class ChartParserServer(Server):
    """Constituency parser over released tokens: the server's frozen encoder, a BiLSTM span scorer trained on
    every span of each sentence, CKY decoding. Labels are each sentence's gold labelled spans in released-token
    positions (``(start, end exclusive, label)``; the task aligns them); predictions are the same."""

    protocols: ClassVar[tuple[str, ...]] = ("tokens",)

    config: TrainingConfig  # epochs, lr, batch_size = sentences a batch, dropout
    seed: int
    lstm: int = 128  # hidden size of each direction of the span BiLSTM
    hidden: int = 128  # width of the span-label MLP's hidden layer
    # torch threads while the span scorer trains and predicts: its steps are small, and with two threads on 2
    # shared cores the default ptb cell had not finished after 17 minutes (6 with one); 0 leaves torch's setting
    threads: int = 1
    encoder: Encoder | None = None
    labels: tuple[str, ...] = field(default=(), init=False)
    model: Any = field(default=None, init=False)

    def _states(self, released) -> list[np.ndarray]:
        return self.encoder.token_states(released)

    def _batch(self, states: Sequence[np.ndarray]):
        import torch

        lengths = np.array([len(s) for s in states])
        m = max(1, int(lengths.max()))
        x = np.zeros((len(states), m, self.encoder.dim), dtype=np.float32)
        for row, s in enumerate(states):
            x[row, : len(s)] = s
        return torch.from_numpy(x), torch.from_numpy(lengths), m

    def _targets(self, spans: Sequence[Sequence[LabelledSpan]], lengths: np.ndarray, m: int):
        """(B, P) gold label ids over ``span_pairs(m)``: 0 ("none") inside a sentence, -100 past its end."""
        import torch

        i, j = (t.numpy() for t in span_pairs(m))
        index = {label: k for k, label in enumerate(self.labels)}
        targets = np.where(j[None, :] <= lengths[:, None], 0, -100).astype(np.int64)
        position = {(a, b): p for p, (a, b) in enumerate(zip(i.tolist(), j.tolist()))}
        for row, sentence in enumerate(spans):
            for start, end, label in sentence:
                if end <= lengths[row]:
                    targets[row, position[(start, end)]] = index[label]
        return torch.from_numpy(targets)

    def fit_tokens(self, released, labels):
        """Train the span scorer on released sentences and their gold labelled spans (token positions)."""
        import torch


        states = self._states(released)
        if len(states) != len(labels):
            raise BenchError(f"{len(states)} released sentences but {len(labels)} span lists.")
        self.labels = (NONE,) + tuple(sorted({label for spans in labels for _, _, label in spans}))
        nonempty = [k for k, s in enumerate(states) if len(s)]
        with torch.random.fork_rng():
            torch.manual_seed(derive_seed(self.seed, "chart-init"))
            model = _model(self.encoder.dim, len(self.labels), self.lstm, self.hidden, self.config.dropout)
        optimizer = torch.optim.Adam(model.parameters(), lr=self.config.lr, foreach=True)
        # batches of sentences of similar length (less padding); batch order reshuffled every epoch
        by_length = sorted(nonempty, key=lambda k: len(states[k]))
        batches = [by_length[s : s + self.config.batch_size] for s in range(0, len(by_length),
                                                                             self.config.batch_size)]
        steps = max(1, self.config.epochs * len(batches))
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 * (1 + np.cos(np.pi * step / steps)))
        order_rng = np.random.default_rng(derive_seed(self.seed, "chart-order"))
        with torch.random.fork_rng(), _torch_threads(self.threads):
            torch.manual_seed(derive_seed(self.seed, "chart-dropout"))
            model.train()
            for _ in range(self.config.epochs):
                for b in order_rng.permutation(len(batches)):
                    chunk = batches[b]
                    x, lengths, m = self._batch([states[k] for k in chunk])
                    targets = self._targets([labels[k] for k in chunk], lengths.numpy(), m)
                    logits = model(x, lengths)
                    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                             targets.reshape(-1), ignore_index=-100)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    schedule.step()
        self.model = model.eval()

    def predict_tokens(self, released) -> list[list[LabelledSpan]]:
        """The labelled spans of each released sentence's best tree (token positions)."""
        import torch

        if self.model is None:
            raise BenchError("the chart parser predicts only after fit_tokens.")
        states = self._states(released)
        out: list[list[LabelledSpan]] = [[] for _ in states]
        order = sorted((k for k, s in enumerate(states) if len(s)), key=lambda k: len(states[k]))
        with torch.inference_mode(), _torch_threads(self.threads):
            for s in range(0, len(order), 32):
                chunk = order[s : s + 32]
                x, lengths, m = self._batch([states[k] for k in chunk])
                logits = self.model(x, lengths).numpy()
                i, j = (t.numpy() for t in span_pairs(m))
                for row, k in enumerate(chunk):
                    out[k] = self._decode(logits[row], i, j, int(lengths[row]))
        return out

    def _decode(self, logits: np.ndarray, i: np.ndarray, j: np.ndarray, n: int) -> list[LabelledSpan]:
        inside = j <= n
        logits, i, j = logits[inside], i[inside], j[inside]
        best = logits[:, 1:].argmax(axis=1) + 1
        margin = logits[np.arange(len(best)), best] - logits[:, 0]
        margins = np.zeros((n + 1, n + 1))
        labels = np.zeros((n + 1, n + 1), dtype=np.int64)
        margins[i, j] = np.maximum(margin, 0.0)
        labels[i, j] = np.where(margin > 0, best, 0)
        labels[0, n] = best[(i == 0) & (j == n)][0]  # the sentence is a constituent
        return [(a, b, self.labels[labels[a, b]]) for a, b in sorted(cky(margins), key=lambda s: (s[0], -s[1]))
                if labels[a, b]]
