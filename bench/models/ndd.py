"""Neighboring Distribution Divergence (NDD): how much replacing one span disturbs an MLM's view of the rest.

Paper: Li et al., "Semantics-Preserved Distortion for Personal Privacy Protection in Information
Management", §3.2 (Eq. 6-12), which takes the metric from Peng et al.; §4 (Eq. 13-15) uses it to pick,
among k candidate fillers of a sensitive span, the one with the smallest NDD. Written from the paper's
text only.

What is computed, exactly (our reading of Eq. 6-12, in our words and indices):

* The sentence is ``original_ids``: the MLM tokenizer's ids of the sentence *without* special tokens,
  n tokens, 0-based. Every model input is ``[CLS] tokens [SEP]``. A "position" is one token of that
  tokenization (a WordPiece, not a whitespace word): the paper speaks of words, a masked LM sees tokens.
* The edit replaces the half-open span ``[start, end)`` (the paper's x_i..x_j with i = start,
  j = end - 1; never empty) by a candidate ``v`` of any length m >= 0, giving the edited sentence
  ``tokens[:start] + v + tokens[end:]`` (Eq. 6).
* Positions that count: every unchanged token, i.e. each original position k with k < start or
  k >= end (Eq. 10 and the sum of Eq. 12). The span's own positions and the candidate's tokens never
  count; special tokens never count. If the span is the whole sentence, nothing counts and NDD = 0.
* Alignment: an unchanged token keeps its index left of the span; right of it, original position k is
  edited position ``k + m - (end - start)`` (the token shifts by the length difference).
* Distributions (Eq. 7-9): d_k = softmax over the MLM's whole output vocabulary (the paper's c-word
  dictionary) of the logits at position k of the original with only position k replaced by [MASK];
  d'_k the same at the aligned position of the edited sentence with only that position masked.
* Divergence (Eq. 11), in the direction printed: l_k = KL(d'_k || d_k) = sum_w d'_k(w) log(d'_k(w) / d_k(w)),
  the edited sentence's distribution first. Computed in float64 from the float32 logits.
* Weights (Eq. 12): a_k = mu ** min(|k - i|, |k - j|) on original indices, so the tokens next to the
  span get mu ** 1, the next ones mu ** 2, ...; 0 < mu <= 1 (the paper requires mu <= 1; mu = 1 weighs
  all unchanged tokens equally). NDD = sum_k a_k l_k, no normalisation.

Cost. The original's n masked copies are run once per sentence (``OriginalDistributions``; reusable for
every span and candidate of that sentence); each candidate adds (n - span length) masked copies, all
candidates' copies stacked into batches of ``batch_size`` rows, the vocabulary projection applied at the
masked position only. Identical candidates are run once, and a candidate equal to the span's own tokens
scores exactly 0 without a forward pass (then d' = d at every position). ``tol = 0`` (default) is exact.
With ``tol > 0`` positions whose weight mu ** d is below ``tol`` are neither run nor summed: the result is
then a lower bound of the exact NDD (every KL is >= 0), short by sum_skipped a_k l_k, which has no a-priori
bound because KL between two softmaxes over V is not bounded; use it only where that is acceptable.
``ndd_scores_loop`` is the plain reference (one forward per position of the original, then one per
position per candidate, full logits, no batching, no deduplication). ``ndd_select`` finds only what NDD
selection needs (the argmin, its score, and candidate 0's score) and drops a candidate once its sum over the
positions nearest the span, a lower bound of its NDD, exceeds a complete score: the same choice with fewer
masked copies, exact for any ``tol``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from bench.core.errors import BenchError
from bench.models.encoders import autocast
from bench.models.masked_lm import MaskedLM, prediction_head

BATCH_SIZE = 64  # masked copies per forward pass


def _as_ids(ids, what: str) -> np.ndarray:
    array = np.asarray(ids)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise BenchError(f"{what} must be a one-dimensional sequence of token ids, got shape {array.shape} "
                         f"of {array.dtype}.")
    return array.astype(np.int64)


def _check_ids(mlm, ids: np.ndarray, what: str) -> None:
    vocab = int(mlm.model.config.vocab_size)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        raise BenchError(f"{what} holds ids outside the MLM's vocabulary of {vocab} tokens.")
    limit = int(getattr(mlm.model.config, "max_position_embeddings", 512))
    if len(ids) + 2 > limit:
        raise BenchError(f"{what} has {len(ids)} tokens; with [CLS] and [SEP] the MLM takes at most "
                         f"{limit - 2}.")


def _frame(mlm, ids: np.ndarray) -> np.ndarray:
    tokenizer = mlm.tokenizer
    return np.concatenate([[tokenizer.cls_token_id], ids, [tokenizer.sep_token_id]]).astype(np.int64)


def _log_probs_at(mlm, rows: np.ndarray, where: np.ndarray):
    """float64 log-softmax over the vocabulary at ``where[r]`` of each equal-or-padded row (one forward)."""
    import torch


    device = mlm.model.device
    ids = torch.as_tensor(rows, device=device)
    attention = (ids != -1).long()  # rows are given padded with -1
    ids = ids.clamp_min(0)
    if not bool(attention.all()):
        ids = torch.where(attention.bool(), ids, torch.full_like(ids, mlm.tokenizer.pad_token_id))
    batch = {"input_ids": ids, "attention_mask": attention}
    if getattr(mlm.model.config, "type_vocab_size", 0) > 1:
        batch["token_type_ids"] = torch.zeros_like(ids)
    index = torch.arange(len(rows), device=device)
    column = torch.as_tensor(where, device=device)
    head = prediction_head(mlm.model)
    with autocast(device):
        if head is not None:
            logits = head(mlm.model.base_model(**batch).last_hidden_state[index, column])
        else:
            logits = mlm.model(**batch).logits[index, column]
    return torch.log_softmax(logits.double(), dim=-1)


def _masked_rows(frame: np.ndarray, positions: np.ndarray, mask_id: int) -> np.ndarray:
    """One copy of ``frame`` per position (frame index), that position replaced by [MASK]."""
    rows = np.tile(frame, (len(positions), 1))
    rows[np.arange(len(positions)), positions] = mask_id
    return rows


@dataclass
class OriginalDistributions:
    """The MLM's masked distribution at every position of one original sentence, computed once.

    ``log_probs[k]`` is log d_k (float64, whole vocabulary) for sentence position k (no special tokens);
    reuse one object for every span and candidate set of the same sentence.
    """

    mlm: MaskedLM
    ids: Any  # token ids of the sentence, no special tokens
    batch_size: int = BATCH_SIZE  # masked copies per forward pass
    log_probs: Any = field(init=False, repr=False)  # torch float64 (n, vocab)

    def __post_init__(self):
        import torch

        self.ids = _as_ids(self.ids, "the original sentence")
        if len(self.ids) == 0:
            raise BenchError("the original sentence is empty; NDD needs at least one token.")
        _check_ids(self.mlm, self.ids, "the original sentence")
        if self.batch_size < 1:
            raise BenchError(f"batch_size must be at least 1, got {self.batch_size}.")
        n = len(self.ids)
        rows = _masked_rows(_frame(self.mlm, self.ids), np.arange(n) + 1, self.mlm.tokenizer.mask_token_id)
        parts = []
        with torch.inference_mode():
            for start in range(0, n, self.batch_size):
                parts.append(_log_probs_at(self.mlm, rows[start: start + self.batch_size],
                                           np.arange(start, min(n, start + self.batch_size)) + 1))
        self.log_probs = torch.cat(parts)


def _check(mlm, original_ids, span, candidates_ids, mu: float, tol: float):
    ids = _as_ids(original_ids, "the original sentence")
    if len(ids) == 0:
        raise BenchError("the original sentence is empty; NDD needs at least one token.")
    try:
        start, end = (int(v) for v in span)
    except (TypeError, ValueError) as exc:
        raise BenchError(f"span must be a pair (start, end) of token indices, got {span!r}.") from exc
    if not 0 <= start < end <= len(ids):
        raise BenchError(f"span [{start}, {end}) is not a non-empty span of the {len(ids)}-token sentence "
                         f"(need 0 <= start < end <= {len(ids)}).")
    if isinstance(candidates_ids, np.ndarray) and candidates_ids.ndim == 1:
        raise BenchError("candidates_ids must be a list of candidate id sequences, got one flat array.")
    candidates = [_as_ids(c, f"candidate {number}") for number, c in enumerate(candidates_ids)]
    if len(candidates) < 1:
        raise BenchError("NDD needs at least one candidate replacement (k >= 1), got none.")
    if not 0.0 < float(mu) <= 1.0:
        raise BenchError(f"mu must lie in (0, 1], got {mu}.")
    if not 0.0 <= float(tol) < 1.0:
        raise BenchError(f"tol must lie in [0, 1), got {tol}.")
    _check_ids(mlm, ids, "the original sentence")
    for number, candidate in enumerate(candidates):
        _check_ids(mlm, np.concatenate([ids[:start], candidate, ids[end:]]), f"edited sentence {number}")
    return ids, start, end, candidates


def unchanged_positions(n: int, start: int, end: int, mu: float, tol: float = 0.0):
    """Original positions that count, their distance min(|k - i|, |k - j|) and weight mu ** distance
    (positions with weight < ``tol`` left out)."""
    positions = np.concatenate([np.arange(start), np.arange(end, n)]).astype(np.int64)
    distance = np.where(positions < start, start - positions, positions - (end - 1))
    weight = float(mu) ** distance.astype(np.float64)
    keep = weight >= tol
    return positions[keep], distance[keep], weight[keep]


def ndd_scores(mlm, original_ids, span, candidates_ids: Sequence, mu: float, *, tol: float = 0.0,
               original: OriginalDistributions | None = None, batch_size: int = BATCH_SIZE) -> np.ndarray:
    """NDD(X, X̌_c) for each candidate c replacing ``span = (start, end)`` of ``original_ids`` (batched).

    ``original`` is the sentence's ``OriginalDistributions`` when the caller keeps one (it must hold the
    same ids); otherwise it is computed here. Returns float64 scores, one per candidate, in input order.
    """
    edit = _Edit.of(mlm, original_ids, span, candidates_ids, mu, tol, original, batch_size)
    scores = np.zeros(len(edit.firsts), dtype=np.float64)
    if edit.scored and len(edit.positions):
        # every masked copy of every candidate, the candidates by length (less padding per batch)
        order = sorted(range(len(edit.scored)), key=lambda c: len(edit.firsts[edit.scored[c]]))
        owner = np.repeat(order, len(edit.positions))
        kl = edit.kls(owner, np.tile(np.arange(len(edit.positions)), len(order)))
        np.add.at(scores, np.asarray(edit.scored)[owner], np.tile(edit.weight, len(order)) * kl)
    return scores[edit.slot]


@dataclass
class NDDChoice:
    """What NDD selection keeps of a span's candidates, and what it cost."""

    index: int  # the candidate with the smallest NDD (the first such in input order), as argmin of ndd_scores
    score: float  # its NDD
    first: float  # the NDD of candidate 0 (what selection without NDD keeps)
    copies: int  # masked copies run through the MLM
    copies_exhaustive: int  # what scoring every distinct candidate would run (ndd_scores)


def ndd_select(mlm, original_ids, span, candidates_ids: Sequence, mu: float, *, tol: float = 0.0,
               original: OriginalDistributions | None = None, batch_size: int = BATCH_SIZE,
               first_round: int = 2) -> NDDChoice:
    """The candidate of smallest NDD, its score and candidate 0's score, without scoring every candidate whole.

    Every KL is >= 0, so a candidate's sum over some positions is a lower bound of its NDD. Positions are taken
    nearest the span first (the largest weights), ``first_round`` of them and then twice as many each round;
    candidate 0 is scored whole in the first round (its score is recorded), and after each round the candidate
    with the smallest partial sum is scored whole in the next, and every candidate whose partial sum exceeds the
    smallest complete score (by more than float64 summation noise) cannot be the argmin and is dropped. The
    result is ``argmin(ndd_scores(...))``, its minimum and ``scores[0]``, up to the order of a float64 sum
    (positions by distance rather than by index)."""
    edit = _Edit.of(mlm, original_ids, span, candidates_ids, mu, tol, original, batch_size)
    if first_round < 1:
        raise BenchError(f"first_round must be at least 1, got {first_round}.")
    total = np.zeros(len(edit.firsts), dtype=np.float64)  # same-as-span and position-free edits stay exactly 0
    n = len(edit.positions)
    exhaustive = len(edit.scored) * n
    alive = list(edit.scored)
    done = np.zeros(len(edit.firsts), dtype=np.int64)  # positions summed so far, per distinct candidate
    nearest = np.argsort(edit.distance, kind="stable")  # position indices, nearest the span first
    head = int(edit.slot[0])
    exact_zero = [0.0] if len(edit.scored) < len(edit.firsts) else []  # an edit identical to the span scores 0
    bound, size, copies, leader = 0, first_round, 0, None
    while alive and bound < n:
        bound = min(n, bound + size)
        size *= 2
        owner, source = [], []
        for u in sorted(alive, key=lambda u: len(edit.firsts[u])):
            upto = n if u in (head, leader) else bound
            owner.append(np.full(upto - done[u], u))
            source.append(nearest[done[u]: upto])
            done[u] = upto
        owner, source = np.concatenate(owner), np.concatenate(source)
        if len(owner):
            kl = edit.kls(np.searchsorted(edit.scored, owner), source)
            np.add.at(total, owner, edit.weight[source] * kl)
            copies += len(owner)
        complete = [total[u] for u in alive if done[u] == n]
        best = min(complete + exact_zero, default=None)
        if best is None:
            continue
        margin = 1e-9 * abs(best) + 1e-12  # the summation noise of a partial sum is far below this
        alive = [u for u in alive if done[u] < n and total[u] <= best + margin]
        # the most promising candidate is scored whole next round: a small complete score drops the rest early
        leader = min(alive, key=lambda u: total[u], default=None)
    # every candidate not dropped is complete; dropped ones cannot hold the minimum
    dropped = np.ones(len(edit.firsts), dtype=bool)
    dropped[[u for u in range(len(edit.firsts)) if u not in edit.scored or done[u] == n or n == 0]] = False
    scores = np.where(dropped, np.inf, total)[edit.slot]
    index = int(np.argmin(scores))
    return NDDChoice(index, float(scores[index]), float(total[head]), copies, exhaustive)


@dataclass
class _Edit:
    """One span of one sentence and its distinct candidates, ready for masked copies (shared by the scorers)."""

    mlm: MaskedLM
    ids: np.ndarray
    start: int
    end: int
    firsts: list  # the distinct candidates, in order of first appearance
    slot: np.ndarray  # each input candidate's index into firsts
    scored: list  # indices into firsts of the candidates that edit something (the span's own tokens score 0)
    positions: np.ndarray  # unchanged original positions that count
    distance: np.ndarray
    weight: np.ndarray
    original: OriginalDistributions
    batch_size: int

    @classmethod
    def of(cls, mlm, original_ids, span, candidates_ids, mu, tol, original, batch_size) -> "_Edit":
        """Check the input and set the edit up (``original`` computed here unless given)."""
        ids, start, end, candidates = _check(mlm, original_ids, span, candidates_ids, mu, tol)
        if batch_size < 1:
            raise BenchError(f"batch_size must be at least 1, got {batch_size}.")
        if original is None:
            original = OriginalDistributions(mlm, ids, batch_size)
        elif not np.array_equal(original.ids, ids):
            raise BenchError("the OriginalDistributions given were computed for a different sentence.")
        positions, distance, weight = unchanged_positions(len(ids), start, end, mu, tol)
        # identical candidates are scored once; the span's own tokens edit nothing (d' = d, NDD = 0 by Eq. 11)
        unique: dict[bytes, int] = {}
        slot = np.array([unique.setdefault(c.tobytes(), len(unique)) for c in candidates])
        firsts = [candidates[int(np.flatnonzero(slot == u)[0])] for u in range(len(unique))]
        same = ids[start:end].tobytes()
        scored = [u for u, c in enumerate(firsts) if c.tobytes() != same]
        return cls(mlm, ids, start, end, firsts, slot, scored, positions, distance, weight, original, batch_size)

    def kls(self, owner: np.ndarray, source: np.ndarray) -> np.ndarray:
        """KL(d'_k || d_k) of each masked copy: candidate ``scored[owner[r]]``, unchanged position
        ``positions[source[r]]``; copies run ``batch_size`` at a time in the given order."""
        import torch

        mask_id = self.mlm.tokenizer.mask_token_id
        frames, shifts = {}, {}
        for c in np.unique(owner):
            candidate = self.firsts[self.scored[c]]
            frames[c] = _frame(self.mlm, np.concatenate([self.ids[: self.start], candidate, self.ids[self.end:]]))
            shifts[c] = len(candidate) - (self.end - self.start)
        original_position = self.positions[source]
        where = np.array([k if k < self.start else k + shifts[c] for c, k in zip(owner, original_position)],
                         dtype=np.int64) + 1  # +1: [CLS]
        out = np.empty(len(owner), dtype=np.float64)
        with torch.inference_mode():
            for lo in range(0, len(owner), self.batch_size):
                hi = min(len(owner), lo + self.batch_size)
                rows = np.full((hi - lo, max(len(frames[c]) for c in owner[lo:hi])), -1, dtype=np.int64)
                for r, c in enumerate(owner[lo:hi]):
                    rows[r, : len(frames[c])] = frames[c]
                rows[np.arange(hi - lo), where[lo:hi]] = mask_id
                log_q = _log_probs_at(self.mlm, rows, where[lo:hi])
                log_p = self.original.log_probs[torch.as_tensor(original_position[lo:hi])]
                out[lo:hi] = (log_q.exp() * (log_q - log_p)).sum(dim=1).cpu().numpy()
        return out


def ndd_scores_loop(mlm, original_ids, span, candidates_ids: Sequence, mu: float) -> np.ndarray:
    """Plain reference of ``ndd_scores`` (exact, tol = 0): one forward per original position, then one per
    unchanged position per candidate, each on a single sentence with the model's full logits."""
    import torch

    ids, start, end, candidates = _check(mlm, original_ids, span, candidates_ids, mu, 0.0)
    tokenizer = mlm.tokenizer
    i, j = start, end - 1

    def masked_distribution(tokens: list[int], k: int):
        shown = [tokenizer.cls_token_id] + list(tokens) + [tokenizer.sep_token_id]
        shown[k + 1] = tokenizer.mask_token_id
        logits = mlm.model(input_ids=torch.tensor([shown], device=mlm.model.device)).logits[0, k + 1]
        return torch.log_softmax(logits.double(), dim=-1)

    sentence = [int(t) for t in ids]
    kept = [k for k in range(len(sentence)) if k < i or k > j]
    scores = []
    with torch.inference_mode():
        log_d = {k: masked_distribution(sentence, k) for k in kept}
        for candidate in candidates:
            edited = sentence[:i] + [int(t) for t in candidate] + sentence[j + 1:]
            total = 0.0
            for k in kept:
                aligned = k if k < i else k + len(candidate) - (j - i + 1)
                log_d_edited = masked_distribution(edited, aligned)
                kl = float((log_d_edited.exp() * (log_d_edited - log_d[k])).sum())
                total += mu ** min(abs(k - i), abs(k - j)) * kl
            scores.append(total)
    return np.asarray(scores, dtype=np.float64)


def masked_log_probs(mlm, rows: np.ndarray, where: np.ndarray):
    """float64 log-softmax over the MLM's vocabulary at column ``where[r]`` of each row (rows padded with -1),
    in one forward pass without gradients: what generative filling samples from."""
    import torch

    with torch.inference_mode():
        return _log_probs_at(mlm, rows, where)


def prefilled_rows(frames: list[np.ndarray], starts: list[int], prefixes: list[np.ndarray]) -> np.ndarray:
    """Frames padded with -1 to one width (``masked_log_probs``'s input), each with ``prefixes[r]`` written from
    column ``starts[r]`` over its masked slot: the rows of one left-to-right filling step."""
    batch = np.full((len(frames), max(len(f) for f in frames)), -1, dtype=np.int64)
    for r, (frame, start, prefix) in enumerate(zip(frames, starts, prefixes)):
        batch[r, :len(frame)] = frame
        batch[r, start:start + len(prefix)] = prefix
    return batch
