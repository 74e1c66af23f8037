"""NDD semantics-preserved distortion: each sensitive span rewritten by the candidate that disturbs its sentence least.

The disturbance is measured as a masked LM sees it (Neighboring Distribution Divergence).

Paper: Jiajia Li et al. "Semantics-Preserved Distortion for Personal Privacy Protection in Information
Management", §4 (Eq. 13-15), with the metric of §3.2 (``bench.models.ndd``, after Peng et al.).
Threat model: the client rewrites the sensitive spans of its own text before release (the server trains on the
rewritten text); an adversary sees the released text and knows the mechanism, the MLM included.

The MLM is the client's: ``minilm-mlm`` (offline) is trained on public text without the task's own text
(``minilm-mlm@N``: the same recipe trained N steps, a weaker or stronger MLM for Table 6's PLM axis).

For each chosen span (``bench.engine.spans``) the client draws ``k`` candidates:

* ``generative``: the span's WordPieces under the MLM's tokenizer are replaced by [MASK] (Eq. 13) and each
  candidate fills them left to right, one piece per position, sampling each piece from the MLM's softmax over
  its regular tokens given the pieces filled so far (a first piece is never a ``##`` continuation). A generated
  span so has as many pieces as the original; its words are the decoded pieces.
* ``substitutive``: ``k`` distinct phrases of the span's kind drawn uniformly from a pool of phrases of that kind
  (``SpanBatch.pool``), never the span's own words. ``pool=public`` (the default): phrases of public text, disjoint
  from every private split (``bench.engine.spans.substitution_pool``: the task's public phrases of the kind, e.g.
  public names for the clinical tasks, or the spans of the task's public examples, e.g. the CoNLL-03 training
  sentences the cell does not use). ``pool=own``: every sensitive span of the client's own training split, distinct
  by its words, so the release still holds the client's real spans, moved to other sentences (what span-recovery
  measures). A substituted phrase brings its label fragment (a subtree, its tags).
  Deviation: the paper does not say where substitutes come from; a pool of the client's own spans leaks them.

``select=ndd`` keeps the candidate of smallest NDD(X, X̌) (Eq. 15), each span scored alone against the original
sentence (the paper's single replacement: the other spans are unchanged in X and X̌). Only the argmin is needed,
so a candidate is dropped as soon as its NDD over the positions nearest the span (a lower bound: every KL is >= 0)
exceeds a complete score (``bench.models.ndd.ndd_select``; the first candidate is always scored whole, for the
record's ``ndd_first_candidate_mean``); the record counts the masked copies run against scoring every candidate
whole (``ndd_masked_copies_run`` / ``_exhaustive``). ``select=random`` keeps the
first candidate drawn (the paper's "w/o NDD"). A candidate whose words equal the original span's (a generated
span can reproduce it, and would win with NDD = 0) is never kept; a span left with no candidate (no other
phrase of its kind, or every sample equal to it) is masked, and the record counts it. The paper gives no μ;
0.9 weighs the tokens next to the span most and still counts the whole sentence. ``window`` (0 by default: the
whole segment, as the paper's sentences) limits the metric to the words within ``window`` words of the span, the
MLM seeing that stretch alone: a deviation for paragraph-long segments (SQuAD windows), stated in the record.
``scope=sentence`` instead limits it to the sentence that holds the span (``bench.data.sentences``: spaCy's
rule-based sentencizer; a span that crosses sentences keeps all it touches), the MLM seeing that sentence alone:
Eq. 6-12 define NDD over one sentence, so this is the paper's metric where an example is several sentences (a
blog post, a review); ``segment`` (the default) scores over the whole segment, as every record before it.

``mlm_precision`` is the precision of the client's MLM passes (generation and NDD): the cell's (``cell``, the
default) or ``bf16`` / ``fp32`` whatever the cell runs, so a client can score in bf16 (1.7x faster on CoNLL-03
sentences, 2.6x on SQuAD windows, on a CPU with AVX-512 BF16) while the server and the attack stay at the cell's
precision. bf16 no longer computes NDD exactly: it kept the float32 choice in 197 of 200 CoNLL-03 sentences and
120 of 122 SQuAD entities (docs/ray.md, ``scripts/ndd_precision_agreement.py``); the record names the precision
the rewrite ran at (``ndd_mlm_precision``).

An interrupted rewrite resumes where it stopped: every candidate is drawn before any is scored, and each span's
choice is checkpointed as it is made (``bench.core.journal``, keyed by the defense, the MLM's weights, the split
and the drawn candidates), so a rerun draws the same candidates again (generation is repeated; it is the cheaper
part) and scores only the spans left, choosing exactly what one uninterrupted run chooses. The record counts the
spans taken from the checkpoint (``ndd_spans_from_checkpoint``). Progress (a bar on a terminal, a line every ten
minutes in a log) counts each span as the square of the pieces it is scored over, which is what its scoring costs,
so the time left it shows holds when a split's few longest sentences carry much of the work.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bench import Edit, SpanDefense, added_later, register_defense
from bench.core.journal import Journal
from bench.core.params import require, within
from bench.core.progress import progress_bar
from bench.core.spans import segment_words
from bench.data.sentences import sentence_around
from bench.models.encoders import PRECISIONS

MODES = ("generative", "substitutive")
SELECTIONS = ("ndd", "random")
SCOPES = ("segment", "sentence")
POOLS = ("public", "own")
MASK = "[MASK]"
SAMPLE_ROWS = 256  # rows per forward pass when sampling generated pieces


@register_defense("ndd")
@dataclass
class NDDDistortion(SpanDefense):
    """Generative or substitutive rewriting of sensitive spans, the candidate chosen by NDD (or at random)."""

    version: ClassVar[str] = "2"  # 2: substitutes come from public text by default (pool); generative unchanged

    mode: str = "generative"  # generative (the MLM fills the masked span) or substitutive (a phrase of its kind)
    select: str = "ndd"  # ndd (smallest NDD of k candidates) or random (the first drawn: "w/o NDD")
    k: int = within(8, "[1, 64]")  # candidates per span (the paper's 8)
    mu: float = within(0.9, "(0, 1]")  # NDD distance decay, weight mu ** distance to the span, in (0, 1]
    mlm: str = "minilm-mlm"  # the masked LM for generation and NDD (minilm-mlm@N; hub ids such as bert-base-cased)
    kinds: str = "all"  # span kinds to rewrite, joined by "+" (e.g. PER+ORG, NP); all = every kind the task declares
    fraction: float = within(1.0, "(0, 1]")  # share of the chosen spans rewritten, drawn at random over the split
    tol: float = within(0.0, "[0, 1)")  # NDD positions of weight below tol are skipped (a lower bound; 0 = exact)
    window: int = within(0, "[0, 1e6]", later=True)  # NDD only over words this near the span (0 = the whole segment)
    scope: str = added_later("segment")  # segment (NDD over the whole segment) or sentence (the span's sentence)
    mlm_precision: str = added_later("cell")  # the client's MLM passes: cell (the cell's precision), fp32 or bf16
    pool: str = added_later("public")  # substitutes from public text (public) or the client's own spans (own)
    allow_untrained: bool = False  # accept an MLM whose head was never trained (plumbing tests only)
    stats: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    task: str = field(default="", init=False, repr=False, compare=False)  # the task of the last rewrite

    def __post_init__(self) -> None:
        require(self.mode in MODES, f"ndd mode must be one of {', '.join(MODES)}, got '{self.mode}'.")
        require(self.select in SELECTIONS, f"ndd select must be one of {', '.join(SELECTIONS)}, got '{self.select}'.")
        require(1 <= self.k <= 64, f"ndd k must be in 1..64, got {self.k}.")
        require(0.0 < self.mu <= 1.0, f"ndd mu must lie in (0, 1], got {self.mu}.")
        require(0.0 < self.fraction <= 1.0, f"ndd fraction must lie in (0, 1], got {self.fraction}.")
        require(0.0 <= self.tol < 1.0, f"ndd tol must lie in [0, 1), got {self.tol}.")
        require(self.window >= 0, f"ndd window must be >= 0 words (0 = the whole segment), got {self.window}.")
        require(self.scope in SCOPES, f"ndd scope must be one of {', '.join(SCOPES)}, got '{self.scope}'.")
        require(not (self.window and self.scope == "sentence"),
                "ndd takes either a window or scope=sentence, not both.")
        require(self.pool in POOLS, f"ndd pool must be one of {', '.join(POOLS)}, got '{self.pool}'.")
        require(self.mlm_precision in ("cell", *PRECISIONS),
                f"ndd mlm_precision must be cell, {' or '.join(PRECISIONS)}, got '{self.mlm_precision}'.")
        from bench.models.mlm import check_mlm_name

        check_mlm_name(self.mlm, self.allow_untrained)

    @classmethod
    def version_for(cls, args, task_cls=None):
        """2 for substitution (its pool is public text by default since then); generation, and substitution on a
        task whose own public phrases cover every span kind (the clinical tasks' names), are unchanged (1)."""
        if args.get("mode", "generative") != "substitutive":
            return "1"
        offers = getattr(task_cls, "substitution_pool", None) if task_cls is not None else None
        if offers is not None and set(task_cls.span_kinds) <= set(offers(task_cls())):
            return "1"
        return cls.version

    def substitution_source(self) -> str | None:
        """Where substitutes come from: public (text disjoint from every private split) or own (the client's);
        None when generating (no pool)."""
        return self.pool if self.mode == "substitutive" else None

    def rewrite(self, batch, rng):
        """Draw k candidates per chosen span, keep one (by NDD or the first), and return the edits; the MLM runs at
        ``mlm_precision`` (the cell's by default)."""
        from bench.models.encoders import cell_device, on_device

        with on_device(cell_device(), self._precision()):
            return self._rewrite(batch, rng)

    def _precision(self) -> str:
        """The precision of the MLM's forward passes in this rewrite."""
        from bench.models.encoders import cell_precision

        return cell_precision() if self.mlm_precision == "cell" else self.mlm_precision

    def _rewrite(self, batch, rng):
        from bench.models.encoders import cell_device
        from bench.models.mlm import shared_mlm

        started = time.perf_counter()
        mlm = shared_mlm(self.mlm, batch.task or None, cell_device()) if self.uses_mlm() else None
        self.task = batch.task
        jobs = [(i, span) for i, spans in enumerate(batch.chosen) for span in spans]
        pieces = _Pieces(mlm.tokenizer) if mlm is not None else None
        if self.mode == "generative":
            candidates = _generate(mlm, batch.texts, jobs, pieces, self.k, rng)
        else:
            candidates = [_substitutes(batch.pool.get(span.kind, []), tuple(span.words(batch.texts[i])), self.k, rng)
                          for i, span in jobs]
        edits: list[list[Edit]] = [[] for _ in batch.texts]
        chosen_ndd, first_ndd, masked, originals, copies = [], [], 0, {}, [0, 0]
        journal = self._journal(batch, jobs, candidates) if self.select == "ndd" else None
        # NDD's cost per span grows with the square of the pieces it is scored over (n masked copies of n pieces),
        # so progress is counted in that work: a split's longest sentences can hold half of it in a few spans
        work = np.array([len(self._scored(pieces, batch.texts[i], span)[0]) ** 2 for i, span in jobs]
                        if journal is not None else np.ones(len(jobs)), dtype=np.float64)
        done = float(sum(work[n] for n in journal.done)) if journal is not None else 0.0
        finished = False
        try:
            with progress_bar("NDD: choosing candidates", float(work.sum()) or 1.0, done, unit=None) as update:
                for number, ((i, span), options) in enumerate(zip(jobs, candidates)):
                    if journal is None or number not in journal.done:
                        update(done, f"NDD: choosing candidates (span {number + 1:,} of {len(jobs):,})")
                        done += work[number]
                    own = tuple(w.lower() for w in span.words(batch.texts[i]))
                    options = [c for c in options if tuple(w.lower() for w in c[0]) != own]
                    if not options:
                        masked += 1
                        edits[i].append(Edit(span, (MASK,) * (span.end - span.start)))
                        continue
                    keep = 0
                    if journal is not None and len(options) > 1:
                        if number not in journal.done:
                            choice = self._choose(mlm, pieces, batch.texts[i], span, options, originals)
                            if choice is not None:
                                copies[0] += choice.copies
                                copies[1] += choice.copies_exhaustive
                            journal.record(number, None if choice is None else
                                           [choice.index, choice.score, choice.first])
                        if journal.done[number] is not None:
                            keep, chosen, first = journal.done[number]
                            chosen_ndd.append(chosen)
                            first_ndd.append(first)
                    words, fragment = options[keep]
                    edits[i].append(Edit(span, tuple(words), fragment))
            finished = True
        finally:
            if journal is not None:
                journal.close(finished)
        self.stats = {"ndd_spans": len(jobs), "ndd_masked_for_want_of_candidates": masked,
                      "ndd_rewrite_seconds": round(time.perf_counter() - started, 1)}
        if self.uses_mlm():
            self.stats["ndd_mlm_precision"] = self._precision()
        if journal is not None and journal.resumed:
            self.stats["ndd_spans_from_checkpoint"] = journal.resumed
        if chosen_ndd:
            self.stats.update({"ndd_chosen_mean": float(np.mean(chosen_ndd)),
                               "ndd_first_candidate_mean": float(np.mean(first_ndd)),
                               "ndd_scored_spans": len(chosen_ndd)})
        if copies[1]:  # spans scored in this run (not read back from the checkpoint)
            self.stats.update({"ndd_masked_copies_run": copies[0], "ndd_masked_copies_exhaustive": copies[1]})
        return edits

    def _journal(self, batch, jobs, candidates):
        """The checkpoint of this rewrite's span choices, keyed by everything they depend on (the candidates are
        drawn before any scoring, so the choices do not depend on where an interrupted run stopped)."""
        from bench.models.encoders import cell_precision

        drawn = [[tuple(words) for words, _ in options] for options in candidates]
        return Journal("rewrites", (self.rewrite_identity(batch.task), cell_precision(), batch.task, batch.texts,
                                    jobs, drawn))

    def _choose(self, mlm, pieces, text, span, options, originals):
        """The option of smallest NDD replacing ``span`` (``bench.models.ndd.ndd_select``: the argmin of every
        option's NDD, without scoring the options that cannot hold it whole), or None when the sentence is too
        long for the MLM."""
        from bench.models.ndd import OriginalDistributions, ndd_select

        ids, word_of, scored = self._scored(pieces, text, span)
        inside = np.flatnonzero((word_of >= span.start) & (word_of < span.end))
        limit = int(getattr(mlm.model.config, "max_position_embeddings", 512)) - 2
        if len(inside) == 0 or len(ids) > limit:
            return None
        key = (text, span.segment, scored)
        if key not in originals:
            originals.clear()  # one sentence at a time: jobs come in example order
            originals[key] = OriginalDistributions(mlm, ids)
        candidate_ids = [pieces.encode(words) for words, _ in options]
        return ndd_select(mlm, ids, (int(inside[0]), int(inside[-1]) + 1), candidate_ids, self.mu, tol=self.tol,
                          original=originals[key])

    def _scored(self, pieces, text, span):
        """The pieces NDD scores ``span`` over, the word of each, and those words (first, end exclusive; None = the
        whole segment): the segment, the span's window or its sentence."""
        ids, word_of = pieces.of(text, span.segment)
        scored = None
        if self.scope == "sentence":
            scored = sentence_around(tuple(segment_words(text, span.segment)), span.start, span.end)
        elif self.window:
            scored = (span.start - self.window, span.end + self.window)
        if scored is not None:
            near = (word_of >= scored[0]) & (word_of < scored[1])
            ids, word_of = ids[near], word_of[near]
        return ids, word_of, scored

    def rewrite_identity(self, task: str) -> dict:
        """The defense's parameters and, when the rewrite runs the MLM, a digest of the MLM's weights."""
        from bench.models.encoders import cell_device
        from bench.models.mlm import mlm_identity

        identity = super().rewrite_identity(task)
        return {**identity, "mlm_weights": mlm_identity(self.mlm, task or None, cell_device())} if self.uses_mlm() \
            else identity

    def uses_mlm(self) -> bool:
        """Whether the rewrite runs the MLM (substitution drawn at random never does)."""
        return self.mode == "generative" or self.select == "ndd"

    def offline_mlms(self) -> tuple[str, ...]:
        """The MLM, where the rewrite runs it."""
        return (self.mlm,) if self.uses_mlm() else ()

    def describe(self, dim: int) -> dict:
        """The MLM (name, head, held-out top-1) when the rewrite used one, and what the rewrite did (counts, mean
        NDDs, time)."""
        from bench.models.mlm import mlm_facts

        return {**(mlm_facts(self.mlm, self.task or None) if self.uses_mlm() else {"mlm": None}), **self.stats}


class _Pieces:
    """The MLM tokenizer's pieces of a segment's words and the word each piece belongs to."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self._segments: dict = {}

    def of(self, text, segment: int):
        """The segment's piece ids (no special tokens) and each piece's word index, tokenized once per segment."""
        if (text, segment) not in self._segments:
            self._segments[(text, segment)] = self._tokenize(text, segment)
        return self._segments[(text, segment)]

    def _tokenize(self, text, segment: int):
        encoded = self.tokenizer(segment_words(text, segment), is_split_into_words=True, add_special_tokens=False)
        word_of = np.array([-1 if w is None else w for w in encoded.word_ids()], dtype=np.int64)
        return np.asarray(encoded["input_ids"], dtype=np.int64), word_of

    def encode(self, words) -> np.ndarray:
        return np.asarray(self.tokenizer(list(words), is_split_into_words=True, add_special_tokens=False)["input_ids"],
                          dtype=np.int64)


def _substitutes(pool: list, own: tuple[str, ...], k: int, rng: np.random.Generator) -> list:
    """Up to k distinct phrases of the pool (words, fragment), never the span's own words."""
    others = [entry for entry in pool if entry[0] != own]
    if not others:
        return []
    picked = rng.choice(len(others), size=min(k, len(others)), replace=False)
    return [others[int(p)] for p in picked]


def _generate(mlm, texts, jobs, pieces, k: int, rng: np.random.Generator) -> list:
    """k sampled fillings per job (example, span), as (words, None); all jobs sampled together, step by step."""
    from bench.models.ndd import prefilled_rows

    tokenizer = mlm.tokenizer
    frames, starts, lengths = [], [], []
    for i, span in jobs:
        ids, word_of = pieces.of(texts[i], span.segment)
        inside = np.flatnonzero((word_of >= span.start) & (word_of < span.end))
        frame = np.concatenate([[tokenizer.cls_token_id], ids, [tokenizer.sep_token_id]]).astype(np.int64)
        if len(inside):
            frame[inside + 1] = tokenizer.mask_token_id
        frames.append(frame)
        starts.append(int(inside[0]) + 1 if len(inside) else 0)
        lengths.append(len(inside))
    vocab = int(mlm.model.config.vocab_size)
    allowed = np.zeros(vocab, dtype=bool)
    allowed[mlm.regular] = True
    continuation = np.array([t.startswith("##") for t in tokenizer.convert_ids_to_tokens(list(range(vocab)))])
    filled = [np.zeros((k, n), dtype=np.int64) for n in lengths]
    for step in range(max(lengths, default=0)):
        active = [j for j, n in enumerate(lengths) if n > step]
        rows = [(j, c) for j in active for c in range(k)]
        mask = allowed & ~continuation if step == 0 else allowed
        for lo in range(0, len(rows), SAMPLE_ROWS):
            chunk = rows[lo:lo + SAMPLE_ROWS]
            batch = prefilled_rows([frames[j] for j, _ in chunk], [starts[j] for j, _ in chunk],
                                   [filled[j][c, :step] for j, c in chunk])
            where = np.array([starts[j] + step for j, _ in chunk])
            drawn = _sample(_log_probs(mlm, batch, where), mask, rng)
            for (j, c), token in zip(chunk, drawn):
                filled[j][c, step] = token
    out = []
    for (i, span), fills in zip(jobs, filled):
        if fills.shape[1] == 0:
            out.append([])
            continue
        options = []
        for row in fills:
            words = tuple(tokenizer.decode(row.tolist()).split())
            if words:
                options.append((words, None))
        out.append(options)
    return out


def _log_probs(mlm, rows, where):
    """float64 log-probabilities at ``where`` of each row, as numpy."""
    from bench.models.ndd import masked_log_probs

    return masked_log_probs(mlm, rows, where).numpy()


def _sample(log_probs: np.ndarray, allowed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One token per row from softmax restricted to ``allowed`` (inverse CDF with the client's generator)."""
    logits = np.where(allowed[None, :], log_probs, -np.inf)
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    cumulative = np.cumsum(probs, axis=1)
    draws = rng.random(len(probs)) * cumulative[:, -1]
    picked = np.array([np.searchsorted(c, d, side="right") for c, d in zip(cumulative, draws)], dtype=np.int64)
    return np.minimum(picked, len(allowed) - 1)
