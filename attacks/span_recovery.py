"""Span recovery: how many of the original sensitive spans an adversary reads back from a text release.

Paper: the privacy figure Li et al. ("Semantics-Preserved Distortion for Personal Privacy Protection in
Information Management") leave implicit for Tables 1-3 and 5-6; the MLM filling follows their §4 generation.
Threat model: the adversary holds the released token sequences (the training text the server received), the
public mechanism (its MLM included), the public encoder's WordPiece vocabulary, and where each sensitive span
lies in the release (``Release.slots``: a [MASK]ed span shows itself; for a substituted one this is a stronger
adversary than one who must find the spans first, e.g. with a tagger). It never sees the original text, and its
MLM never trained on the task's text (``minilm-mlm`` leaves that source out of its corpus).

For each slot it makes two guesses at the original span's WordPieces:

* ``verbatim``: the original span still appears, piece for piece, somewhere in the released sentence (a
  sanitizer left it, or a substitution drew it back);
* ``mlm_top_k``: the original span is among the MLM's ``k`` best fillings of the slot, found by beam search left
  to right over the slot's pieces with the slot masked (the filling has the released slot's length, so a span
  substituted by a phrase of another length is out of reach of this guess).

``recovered`` counts a span found by either. The random reference guesses without the release: the ``k`` most
frequent spans of the slot's kind in the data released unprotected (``Release.span_prior``), the first of them
as its verbatim guess. Metrics are fractions of the attacked spans (micro-averaged over slots).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from bench import Attack, BenchError, Metric, PublicKnowledge, Release, ReleaseKind, Truth, register_attack
from bench.core.params import require, within
from bench.core.progress import track

BEAM_ROWS = 256  # rows per forward pass of the beam search


@dataclass
class SlotGuesses:
    """Per attacked row: its released segments, and per slot the verbatim guess and the ranked fillings."""

    rows: list[Any]
    slots: list[list[tuple[int, int, int, str]]]
    verbatim: list[list[tuple[int, ...] | None]]  # None: look for the span anywhere in the released sentence
    fillings: list[list[list[tuple[int, ...]]]]


@register_attack("span-recovery")
@dataclass
class SpanRecovery(Attack):
    """Read original sensitive spans back from a text release: verbatim, or as an MLM's top-k slot filling."""

    version: ClassVar[str] = "1"
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.REWRITTEN_TEXT, ReleaseKind.TEXT)
    needs_spans: ClassVar[bool] = True  # scored on the sensitive spans a task declares
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("recovered", True, "fraction of the original sensitive spans recovered, verbatim or by the MLM"),
        Metric("verbatim", True, "fraction of the original sensitive spans still present verbatim in the release"),
        Metric("mlm_top_k", True, "fraction of the original sensitive spans among the MLM's top-k slot fillings"),
    )

    k: int = within(8, "[1, 64]")  # fillings per slot (beam width)
    mlm: str = ""  # the MLM that fills slots; empty = the mechanism's MLM when it names one, else minilm-mlm
    rows: int = within(500, "[1, 1e9]")  # attacked release rows (the first ones), to bound the beam search's cost
    allow_untrained: bool = False  # accept an MLM whose head was never trained (plumbing tests only)
    run_notes: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        require(1 <= self.k <= 64, f"span-recovery k must be in 1..64, got {self.k}.")
        require(self.rows >= 1, f"span-recovery rows must be >= 1, got {self.rows}.")
        if self.mlm:
            from bench.models.mlm import check_mlm_name

            check_mlm_name(self.mlm, self.allow_untrained)

    def _mlm_name(self, release: Release) -> str:
        """The MLM named by the attack, else the mechanism's (an adversary may reuse it), else the offline one."""
        params = getattr(release.mechanism, "params", {}) or {}
        return self.mlm or params.get("mlm") or "minilm-mlm"

    def attack(self, release: Release, public: PublicKnowledge) -> SlotGuesses:
        """Beam-search fillings of every slot of the first ``rows`` released rows."""
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
        jobs = [(r, s) for r, row_slots in enumerate(slots) for s in row_slots]
        fillings = _beam_fill(mlm, [_segment(rows[r], s[0]) for r, s in jobs], [s[1:3] for _, s in jobs], self.k)
        per_row: list[list] = [[] for _ in rows]
        for (r, _), found in zip(jobs, fillings):
            per_row[r].append(found)
        self.run_notes = {**{f"span_recovery_{k}": v for k, v in mlm_facts(name, public.task).items()},
                          "span_recovery_slots": len(jobs)}
        return SlotGuesses(rows, slots, [[None] * len(s) for s in slots], per_row)

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
        verbatim = mlm = either = total = 0
        for r, row_slots in enumerate(guesses.slots):
            for s, slot in enumerate(row_slots):
                original = tuple(truth.spans[r][s])
                guess = guesses.verbatim[r][s]
                seen = _contains(_segment(guesses.rows[r], slot[0]), original) if guess is None else guess == original
                filled = original in guesses.fillings[r][s]
                verbatim += seen
                mlm += filled
                either += seen or filled
                total += 1
        if total == 0:
            return {"recovered": 0.0, "verbatim": 0.0, "mlm_top_k": 0.0}
        return {"recovered": either / total, "verbatim": verbatim / total, "mlm_top_k": mlm / total}


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


def _beam_fill(mlm, rows: list[np.ndarray], ranges: list[tuple[int, int]], k: int) -> list[list[tuple[int, ...]]]:
    """The k best left-to-right fillings (by summed log-probability) of each masked range, all rows together."""
    from bench.privacy.ndd import masked_log_probs, prefilled_rows

    tokenizer = mlm.tokenizer
    vocab = int(mlm.model.config.vocab_size)
    banned = np.ones(vocab, dtype=bool)
    banned[mlm.regular] = False
    frames, lengths = [], []
    for row, (a, b) in zip(rows, ranges):
        frame = np.concatenate([[tokenizer.cls_token_id], row, [tokenizer.sep_token_id]]).astype(np.int64)
        frame[a + 1:b + 1] = tokenizer.mask_token_id
        frames.append(frame)
        lengths.append(b - a)
    beams = [np.zeros((1, 0), dtype=np.int64) for _ in rows]  # each job: (beams, filled pieces)
    scores = [np.zeros(1) for _ in rows]
    for step in track(range(max(lengths, default=0)), f"span-recovery: beam search over {len(rows):,} slots",
                      unit="pieces"):
        active = [j for j, n in enumerate(lengths) if n > step]
        items = [(j, b) for j in active for b in range(len(beams[j]))]
        # rows of like length share a forward pass, so little of it is padding (a quarter of PTB's, unsorted);
        # the sort is stable, so a job's beams keep their order and ties break as before
        items.sort(key=lambda item: len(frames[item[0]]))
        out = {j: [] for j in active}
        for lo in range(0, len(items), BEAM_ROWS):
            chunk = items[lo:lo + BEAM_ROWS]
            batch = prefilled_rows([frames[j] for j, _ in chunk], [ranges[j][0] + 1 for j, _ in chunk],
                                   [beams[j][b] for j, b in chunk])
            where = np.array([ranges[j][0] + 1 + step for j, _ in chunk])
            log_probs = masked_log_probs(mlm, batch, where).numpy()
            log_probs[:, banned] = -np.inf
            for (j, b), row in zip(chunk, log_probs):
                best = np.argpartition(-row, k - 1)[:k]
                out[j].append((b, best, scores[j][b] + row[best]))
        for j in active:
            parents = np.concatenate([np.full(len(t), b) for b, t, _ in out[j]])
            tokens = np.concatenate([t for _, t, _ in out[j]])
            totals = np.concatenate([s for _, _, s in out[j]])
            keep = np.argsort(-totals, kind="stable")[:k]
            beams[j] = np.concatenate([beams[j][parents[keep]], tokens[keep, None]], axis=1)
            scores[j] = totals[keep]
    return [[tuple(int(t) for t in beam) for beam in beams[j]] for j in range(len(rows))]
