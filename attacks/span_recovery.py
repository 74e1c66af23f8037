"""Span recovery: how many of the original sensitive spans an adversary reads back from a text release.

Paper: the privacy figure Li et al. ("Semantics-Preserved Distortion for Personal Privacy Protection in
Information Management") leave implicit for Tables 1-3 and 5-6; the MLM filling follows their §4 generation.
Threat model: the adversary holds the released token sequences (the training text the server received), the
public mechanism, the public encoder's WordPiece vocabulary, where each sensitive span lies in the release
(``Release.slots``: a [MASK]ed span shows itself; for a substituted one this is a stronger adversary than one who
must find the spans first, e.g. with a tagger), and the data released unprotected (the evaluation split of a task
scored on original text): the frequency prior of its spans (``Release.span_prior``) and those spans in context
(``Release.span_public``). It never sees the original text it scores. Its MLM is the trained offline one
(``minilm-mlm``, whose corpus leaves the task's text out) unless named otherwise.

For each slot it makes two guesses at the original span's WordPieces:

* ``verbatim``: the original span still appears, piece for piece, somewhere in the released sentence (a
  sanitizer left it, or a substitution drew it back);
* ``top_k``: the original span is among the ``k`` best candidates of the slot. The candidates are the ``prior``
  most frequent public spans of the slot's kind, the MLM's ``k`` best fillings of the slot at every length of 1 to
  ``pieces`` pieces (whatever the released slot's length, ``k`` at each length), and every piece sequence released in a slot of that kind
  anywhere in the release. Each is scored by ``log prior + w * log MLM``: the prior is the reference's frequency
  prior (add-half smoothed, so a span it never saw keeps a small mass); the MLM likelihood is the product of the
  MLM's probabilities of the candidate's pieces with the slot replaced by as many [MASK]s (one forward pass per
  length, the positions filled independently). A slot released as [MASK]s only is one [MASK] per word (the mask
  mechanism, and NDD's fallback), so only candidates of that many words stay. The weight ``w`` is chosen on the
  public spans in context, each left out of the prior it is scored with, among ``WEIGHTS`` (0, the prior alone,
  included): the weight that recovers most of them, unless it beats the prior alone by no more than the square
  root of the two counts (one standard deviation of their difference), when ``w`` is 0. Without public spans
  ``w`` is 1.

``recovered`` counts a span found by either. The random reference guesses without the release: the ``k`` most
frequent spans of the slot's kind in the data released unprotected (``Release.span_prior``), the first of them
as its verbatim guess. Metrics are fractions of the attacked spans (micro-averaged over slots).

Deviations: the MLM scores a candidate's pieces independently given the masked slot (not left to right); a candidate
longer than ``pieces`` pieces is ranked only when it is one of the prior's (its length is then scored too); the
word count of a candidate that is not a public span is its count of pieces that do not continue a word (``##``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from bench import Attack, BenchError, Metric, PublicKnowledge, Release, ReleaseKind, Truth, register_attack
from bench.core.params import require, within
from bench.core.progress import track

BEAM_ROWS = 256  # rows per forward pass
WEIGHTS = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)  # the MLM weights the calibration chooses among
SMOOTHING = 0.5  # added to every count of the prior (a span it never saw keeps a small mass)
MAX_PIECES = 24  # no candidate longer than this is scored


@dataclass
class SlotGuesses:
    """Per attacked row: its released segments, and per slot the verbatim guess and the ranked candidates."""

    rows: list[Any]
    slots: list[list[tuple[int, int, int, str]]]
    verbatim: list[list[tuple[int, ...] | None]]  # None: look for the span anywhere in the released sentence
    fillings: list[list[list[tuple[int, ...]]]]


@dataclass
class _Prior:
    """The frequency prior of one kind: counts, total, distinct entries and the most frequent ones."""

    counts: dict[tuple[int, ...], int]
    total: int
    top: list[tuple[int, ...]]

    def log(self, pieces: tuple[int, ...], leave_out: tuple[int, ...] | None = None) -> float:
        """Smoothed log-probability of ``pieces``; ``leave_out``'s one occurrence removed (calibration)."""
        count, total = self.counts.get(pieces, 0), self.total
        if leave_out is not None:
            total -= 1
            count -= pieces == leave_out
        return float(np.log((count + SMOOTHING) / (total + SMOOTHING * (len(self.counts) + 1))))


@register_attack("span-recovery")
@dataclass
class SpanRecovery(Attack):
    """Read original sensitive spans back from a text release: verbatim, or among the best-ranked candidates by
    frequency prior and MLM."""

    version: ClassVar[str] = "2"
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.REWRITTEN_TEXT, ReleaseKind.TEXT)
    needs_spans: ClassVar[bool] = True  # scored on the sensitive spans a task declares
    reads_encoder_body: ClassVar[bool] = False  # the encoder's tokenizer; its MLM is its own
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("recovered", True, "fraction of the original sensitive spans recovered, verbatim or in the top k"),
        Metric("verbatim", True, "fraction of the original sensitive spans still present verbatim in the release"),
        Metric("top_k", True, "fraction of the original sensitive spans among the k best candidates (prior and MLM)"),
    )

    k: int = within(8, "[1, 64]")  # guesses per slot (the reference's too)
    pieces: int = within(6, "[1, 24]")  # the MLM fills 1..pieces pieces in every slot
    prior: int = within(64, "[0, 100000]")  # most frequent public spans of the kind ranked as candidates
    weight: float = within(-1.0, "[-1, 100]")  # the MLM's weight beside the prior; -1 = chosen on public spans
    calibration: int = within(600, "[0, 1e9]")  # public spans the weight is chosen on (the first ones)
    mlm: str = ""  # the MLM that scores slots; empty = the mechanism's MLM when it names one, else minilm-mlm
    rows: int = within(500, "[1, 1e9]")  # attacked release rows (the first ones), to bound the cost
    allow_untrained: bool = False  # accept an MLM whose head was never trained (plumbing tests only)
    run_notes: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        require(1 <= self.k <= 64, f"span-recovery k must be in 1..64, got {self.k}.")
        require(1 <= self.pieces <= MAX_PIECES, f"span-recovery pieces must be in 1..{MAX_PIECES}, got {self.pieces}.")
        require(self.rows >= 1, f"span-recovery rows must be >= 1, got {self.rows}.")
        require(self.weight == -1.0 or self.weight >= 0, f"span-recovery weight must be -1 or >= 0, got {self.weight}.")
        if self.mlm:
            from bench.models.mlm import check_mlm_name

            check_mlm_name(self.mlm, self.allow_untrained)

    def offline_mlms(self, defense_mlms: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The MLM that ``_mlm_name`` picks (the defense's first, as its mechanism names it)."""
        return (self.mlm or next(iter(defense_mlms), "minilm-mlm"),)

    def _mlm_name(self, release: Release) -> str:
        """The MLM named by the attack, else the mechanism's (an adversary may reuse it), else the offline one."""
        params = getattr(release.mechanism, "params", {}) or {}
        return self.mlm or params.get("mlm") or "minilm-mlm"

    def attack(self, release: Release, public: PublicKnowledge) -> SlotGuesses:
        """Rank every slot's candidates of the first ``rows`` released rows by prior and MLM."""
        from bench.models.mlm import check_mlm_name, mlm_facts, shared_mlm

        slots = _slots(release)
        name = self._mlm_name(release)
        mechanism_params = getattr(release.mechanism, "params", {}) or {}
        check_mlm_name(name, self.allow_untrained or bool(mechanism_params.get("allow_untrained")))
        mlm = shared_mlm(name, public.task, getattr(public.encoder, "device", "cpu"))  # the cell's device
        encoder_vocab = getattr(getattr(public.encoder, "tokenizer", None), "get_vocab", lambda: None)()
        if encoder_vocab != mlm.tokenizer.get_vocab():
            raise BenchError(f"span-recovery's MLM '{name}' must share the encoder's WordPiece vocabulary; name one "
                             "with mlm= (minilm-mlm for minilm).")
        rows = list(release.data[:self.rows])
        slots = slots[:len(rows)]
        priors = {kind: _Prior(dict(entries), sum(c for _, c in entries), [p for p, _ in entries[:self.prior]])
                  for kind, entries in (release.span_prior or {}).items()}
        words_of = _public_words(release.span_public)
        mask_id = int(mlm.tokenizer.mask_token_id)
        continues = _continuations(mlm.tokenizer)
        jobs = [(r, s) for r, row_slots in enumerate(slots) for s in row_slots]
        segments = [_segment(rows[r], s[0]) for r, s in jobs]
        released = [tuple(int(t) for t in seg[s[1]:s[2]]) for seg, (_, s) in zip(segments, jobs)]
        masked = [bool(p) and all(t == mask_id for t in p) for p in released]
        pool: dict[str, set] = {}  # every piece sequence released in a slot of each kind, anywhere in the release
        for (_, s), pieces, is_mask in zip(jobs, released, masked):
            if pieces and not is_mask and mask_id not in pieces and len(pieces) <= MAX_PIECES:
                pool.setdefault(s[3], set()).add(pieces)
        pool_lists = {kind: sorted(entries) for kind, entries in pool.items()}

        weight, calibration = self.weight, {}
        if weight < 0:
            weight, calibration = self._calibrate(mlm, release.span_public, priors, words_of, continues,
                                                  any(masked))
        candidates = [self._candidates(priors.get(s[3]), pool_lists.get(s[3], [])) for _, s in jobs]
        counts = [len(released[j]) if masked[j] else None for j in range(len(jobs))]
        ranked = self._rank(mlm, segments, [s[1:3] for _, s in jobs], candidates, [s[3] for _, s in jobs],
                            priors, words_of, continues, counts, weight, [None] * len(jobs))
        per_row: list[list] = [[] for _ in rows]
        for (r, _), found in zip(jobs, ranked):
            per_row[r].append(found)
        self.run_notes = {**{f"span_recovery_{k}": v for k, v in mlm_facts(name, public.task).items()},
                          "span_recovery_slots": len(jobs), "span_recovery_weight": weight,
                          "span_recovery_weight_chosen_on": calibration.get("spans", 0),
                          "span_recovery_calibration_top_k": calibration.get("top_k", {}),
                          "span_recovery_release_candidates": sum(map(len, pool_lists.values()))}
        return SlotGuesses(rows, slots, [[None] * len(s) for s in slots], per_row)

    def _candidates(self, prior: _Prior | None, pool: list) -> list[tuple[int, ...]]:
        """The prior's most frequent spans of the kind and the release's slot contents of the kind."""
        return list(dict.fromkeys([*(prior.top if prior else []), *pool]))

    def _calibrate(self, mlm, public: dict | None, priors, words_of, continues, masked: bool):
        """The MLM weight that ranks most public spans (each left out of the prior) in their top k."""
        if not public or not any(public.get("slots") or []):
            return 1.0, {}
        jobs = [(r, s, w) for r, (row_slots, row_words) in enumerate(zip(public["slots"], public["words"]))
                for s, w in zip(row_slots, row_words) if s[2] - s[1] <= MAX_PIECES][:self.calibration]
        if not jobs:
            return 1.0, {}
        segments = [_segment(public["rows"][r], s[0]) for r, s, _ in jobs]
        truth = [tuple(int(t) for t in seg[s[1]:s[2]]) for seg, (_, s, _) in zip(segments, jobs)]
        candidates = [list(priors[s[3]].top if s[3] in priors else []) for _, s, _ in jobs]
        counts = [w if masked else None for _, _, w in jobs]
        scored = self._rank(mlm, segments, [s[1:3] for _, s, _ in jobs], candidates, [s[3] for _, s, _ in jobs],
                            priors, words_of, continues, counts, None, truth)
        found = {}
        for weight in WEIGHTS:
            found[weight] = sum(t in _top(options, prior_part, mlm_part, allowed, weight, self.k)
                                for t, (options, prior_part, mlm_part, allowed) in zip(truth, scored))
        best = max(WEIGHTS, key=lambda w: (found[w], -w))
        if found[best] - found[0.0] <= np.sqrt(found[best] + found[0.0]):  # not clearly better: the prior alone
            best = 0.0
        return best, {"spans": len(jobs), "top_k": {str(w): round(n / len(jobs), 4) for w, n in found.items()}}

    def _rank(self, mlm, segments, ranges, candidates, kinds, priors, words_of, continues, counts, weight,
              leave_out):
        """Each slot's top k (``weight`` given), or, for calibration (``weight`` None), its scored candidates."""
        lengths = [sorted({*range(1, self.pieces + 1), *(len(c) for c in options if len(c) <= MAX_PIECES)})
                   for options in candidates]
        scored = _mlm_scores(mlm, segments, ranges, lengths, candidates, self.k)
        out = []
        for j, (fills, scores) in enumerate(scored):
            options = list(dict.fromkeys([*candidates[j], *fills]))
            prior = priors.get(kinds[j])
            prior_part = np.array([prior.log(c, leave_out[j]) if prior else 0.0 for c in options])
            mlm_part = np.array([scores.get(c, -np.inf) for c in options])
            allowed = np.isfinite(mlm_part)
            if counts[j] is not None:
                allowed &= np.array([_words(c, words_of, continues) == counts[j] for c in options], dtype=bool)
            if weight is None:
                out.append((options, prior_part, mlm_part, allowed))
            else:
                out.append(_top(options, prior_part, mlm_part, allowed, weight, self.k))
        return out

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> SlotGuesses:
        """The k most frequent spans of each slot's kind in data released unprotected (no release used)."""
        slots = _slots(release)[:self.rows]
        prior = release.span_prior or {}
        top = {kind: [pieces for pieces, _ in entries[:self.k]] for kind, entries in prior.items()}
        fillings = [[top.get(s[3], []) for s in row] for row in slots]
        verbatim = [[(f[0] if f else ()) for f in row] for row in fillings]
        return SlotGuesses([None] * len(slots), slots, verbatim, fillings)

    def score(self, guesses: SlotGuesses, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Fractions of the attacked slots whose original span each guess recovers."""
        if truth.spans is None:
            raise BenchError("span-recovery needs the original spans behind the release's slots.")
        verbatim = ranked = either = total = 0
        for r, row_slots in enumerate(guesses.slots):
            for s, slot in enumerate(row_slots):
                original = tuple(truth.spans[r][s])
                guess = guesses.verbatim[r][s]
                seen = _contains(_segment(guesses.rows[r], slot[0]), original) if guess is None else guess == original
                filled = original in guesses.fillings[r][s]
                verbatim += seen
                ranked += filled
                either += seen or filled
                total += 1
        if total == 0:
            return {"recovered": 0.0, "verbatim": 0.0, "top_k": 0.0}
        return {"recovered": either / total, "verbatim": verbatim / total, "top_k": ranked / total}


def _top(options, prior_part, mlm_part, allowed, weight: float, k: int) -> list[tuple[int, ...]]:
    """The k best allowed options by ``prior + weight * mlm`` (ties: the MLM, then the order given)."""
    if not len(options):
        return []
    total = np.where(allowed, prior_part + weight * np.where(allowed, mlm_part, 0.0), -np.inf)
    order = np.lexsort((np.arange(len(options)), -np.where(allowed, mlm_part, -np.inf), -total))
    return [options[i] for i in order[:k] if allowed[i]]


def _slots(release: Release) -> list:
    if release.slots is None:
        raise BenchError("span-recovery needs a WordPiece text release of a task that declares sensitive spans "
                         "(conll2003, ptb, squad); this release has no span slots.")
    return release.slots


def _segment(row, segment: int) -> np.ndarray:
    return np.asarray(row[segment] if isinstance(row, tuple) else row, dtype=np.int64)


def _contains(sequence: np.ndarray, part: tuple[int, ...]) -> bool:
    """Whether ``part`` occurs contiguously in ``sequence``."""
    n = len(part)
    if n == 0 or n > len(sequence):
        return False
    windows = np.lib.stride_tricks.sliding_window_view(sequence, n)
    return bool((windows == np.asarray(part)).all(axis=1).any())


def _public_words(public: dict | None) -> dict[tuple[int, ...], int]:
    """The word count of each public span's pieces (the most common one when a sequence has several)."""
    from collections import Counter

    seen: dict[tuple[int, ...], Counter] = {}
    if public:
        for row, row_slots, row_words in zip(public["rows"], public["slots"], public["words"]):
            for (segment, a, b, _), words in zip(row_slots, row_words):
                pieces = tuple(int(t) for t in _segment(row, segment)[a:b])
                seen.setdefault(pieces, Counter())[words] += 1
    return {pieces: counter.most_common(1)[0][0] for pieces, counter in seen.items()}


def _continuations(tokenizer) -> np.ndarray:
    vocab = tokenizer.get_vocab()
    flags = np.zeros(max(vocab.values()) + 1, dtype=bool)
    for token, index in vocab.items():
        flags[index] = token.startswith("##")
    return flags


def _words(pieces: tuple[int, ...], words_of: dict, continues: np.ndarray) -> int:
    """The word count of a candidate: a public span's own, else its pieces that do not continue a word."""
    if pieces in words_of:
        return words_of[pieces]
    return int(sum(not continues[p] for p in pieces if p < len(continues)))


def _mlm_scores(mlm, segments, ranges, lengths, candidates, k: int):
    """Per slot: the MLM's k best fillings at each of its lengths, and the MLM log-likelihood of each filling and
    candidate (its pieces' summed log-probabilities, the slot replaced by that many [MASK]s, positions independent)."""
    tokenizer = mlm.tokenizer
    vocab = int(mlm.model.config.vocab_size)
    banned = np.ones(vocab, dtype=bool)
    banned[mlm.regular] = False
    limit = int(getattr(mlm.model.config, "max_position_embeddings", 512))
    by_length = [{} for _ in segments]
    for j, options in enumerate(candidates):
        for c in options:
            by_length[j].setdefault(len(c), []).append(c)
    items = []  # (job, length, frame, first masked column)
    for j, (row, (a, b), wanted) in enumerate(zip(segments, ranges, lengths)):
        for n in wanted:
            frame = np.concatenate([[tokenizer.cls_token_id], row[:a], np.full(n, tokenizer.mask_token_id),
                                    row[b:], [tokenizer.sep_token_id]]).astype(np.int64)
            first = a + 1
            if len(frame) > limit:  # keep the slot and what is nearest it
                start = max(0, min(first - limit // 2, len(frame) - limit))
                frame, first = frame[start:start + limit], first - start
            items.append((j, n, frame, first))
    items.sort(key=lambda item: len(item[2]))  # rows of like length share a forward pass
    scores: list[dict[tuple[int, ...], float]] = [{} for _ in segments]
    fills: list[list[tuple[float, tuple[int, ...]]]] = [[] for _ in segments]
    for lo in track(range(0, len(items), BEAM_ROWS), f"span-recovery: scoring {len(segments):,} slots",
                    unit="passes"):
        chunk = items[lo:lo + BEAM_ROWS]
        batch = np.full((len(chunk), max(len(f) for _, _, f, _ in chunk)), -1, dtype=np.int64)
        row_index, columns = [], []
        for i, (_, n, frame, first) in enumerate(chunk):
            batch[i, :len(frame)] = frame
            row_index += [i] * n
            columns += list(range(first, first + n))
        log_probs = _log_probs_at(mlm, batch, np.asarray(row_index), np.asarray(columns))
        log_probs[:, banned] = -np.inf
        at = 0
        for j, n, _, _ in chunk:
            table = log_probs[at:at + n]
            at += n
            for c in by_length[j].get(n, []):
                scores[j][c] = float(table[np.arange(n), list(c)].sum())
            for score, pieces in _best_fills(table, k):
                scores[j][pieces] = score
                fills[j].append((score, pieces))
    return [([pieces for _, pieces in fills[j]], scores[j]) for j in range(len(segments))]


def _best_fills(table: np.ndarray, k: int) -> list[tuple[float, tuple[int, ...]]]:
    """The k best piece sequences of independent positions (a beam over the rows of ``table``)."""
    beams: list[tuple[float, tuple[int, ...]]] = [(0.0, ())]
    for row in table:
        best = np.argpartition(-row, k - 1)[:k]
        grown = [(score + float(row[t]), pieces + (int(t),)) for score, pieces in beams for t in best]
        beams = sorted(grown, key=lambda b: -b[0])[:k]
    return beams


def _log_probs_at(mlm, rows: np.ndarray, row_index: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """float32 log-softmax over the vocabulary at ``(row_index[i], columns[i])`` (rows padded with -1)."""
    import torch

    from bench.models.encoders import autocast
    from bench.models.masked_lm import prediction_head

    device = mlm.model.device
    ids = torch.as_tensor(rows, device=device)
    attention = (ids != -1).long()
    ids = torch.where(attention.bool(), ids.clamp_min(0), torch.full_like(ids, mlm.tokenizer.pad_token_id))
    batch = {"input_ids": ids, "attention_mask": attention}
    if getattr(mlm.model.config, "type_vocab_size", 0) > 1:
        batch["token_type_ids"] = torch.zeros_like(ids)
    index = torch.as_tensor(row_index, device=device)
    column = torch.as_tensor(columns, device=device)
    head = prediction_head(mlm.model)
    with torch.inference_mode(), autocast(device):
        if head is not None:
            logits = head(mlm.model.base_model(**batch).last_hidden_state[index, column])
        else:
            logits = mlm.model(**batch).logits[index, column]
        return torch.log_softmax(logits.float(), dim=-1).cpu().numpy()
