"""The span step of the tokens, pretraining and api paths: which sensitive spans a span defense rewrites, the
rewrite itself, and where the sensitive spans of a token release lie (for the span-recovery attack).

Selection (``select_spans``): the task's spans of the defense's kinds in each example, overlapping ones
resolved by ``bench.core.spans.non_overlapping`` (inner phrases first), then, for a fraction below 1, that
share of them over the whole split (rounded to the nearest count, chosen uniformly at random from the cell's
seed). Pool (``substitution_pool``): what a substitutive defense draws from: by default phrases of public text of
each kind (the task's public phrases, and the spans of examples of its sources that no split of the cell holds);
on request the client's own spans (``span_pool``: every sensitive span of its split, distinct by its words, first
occurrence kept with its label fragment).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.core import smoke
from bench.core.errors import BenchError
from bench.core.examples import TaskData, Text
from bench.core.files import atomic_writer
from bench.core.spans import Span, apply_edits, non_overlapping
from bench.data.alignment import piece_range, word_of_pieces
from bench.models.encoders import cell_precision


@dataclass
class SpanBatch:
    """What a span defense's ``rewrite`` sees: the client's own examples and spans, never anyone else's."""

    texts: list[Text]
    labels: list[Any]
    chosen: list[list[Span]]  # the spans to rewrite in each example, in position order, not overlapping
    pool: dict[str, list[tuple[tuple[str, ...], Any]]] = field(default_factory=dict)  # kind -> (words, fragment)
    task: str = ""  # the task's registry name (an MLM the defense uses must not have trained on its text)


@dataclass
class RewrittenSplit:
    """A split after its span defense: texts and labels as released, the spans chosen and where their new words
    landed (``placed[i][j]`` holds the words of ``chosen[i][j]``)."""

    texts: list[Text]
    labels: list[Any]
    chosen: list[list[Span]]
    placed: list[list[Span]]
    rewritten: int  # spans rewritten
    candidates: int  # spans the task declared in the split (before selection)


def task_spans(task, data, split: str) -> list[list[Span]]:
    """Every sensitive span of every example of ``split``."""
    examples = getattr(data, split)
    return [list(task.sensitive_spans(data, split, i)) for i in range(len(examples))]


def non_overlapping_spans(task, data, split: str) -> list[list[Span]]:
    """Every sensitive span of ``split``, overlaps resolved as for rewriting: the spans an attack is scored on
    when no span defense chose them."""
    return [non_overlapping(example) for example in task_spans(task, data, split)]


def select_spans(task, spans: list[list[Span]], kinds: tuple[str, ...], fraction: float,
                 rng: np.random.Generator) -> list[list[Span]]:
    """The spans to rewrite in each example (see the module docstring)."""
    declared = tuple(type(task).span_kinds)
    unknown = [k for k in kinds if k not in declared]
    if unknown:
        raise BenchError(f"task '{task.registry_name}' has no span kind '{unknown[0]}'; it declares "
                         f"{', '.join(declared)}.")
    if not 0.0 < fraction <= 1.0:
        raise BenchError(f"the fraction of spans to rewrite must lie in (0, 1], got {fraction}.")
    wanted = set(kinds or declared)
    chosen = [non_overlapping([s for s in example if s.kind in wanted]) for example in spans]
    if fraction < 1.0:
        flat = [(i, j) for i, example in enumerate(chosen) for j in range(len(example))]
        keep = set(map(tuple, np.asarray(flat)[rng.permutation(len(flat))[:round(fraction * len(flat))]].tolist()))
        chosen = [[s for j, s in enumerate(example) if (i, j) in keep] for i, example in enumerate(chosen)]
    return chosen


def span_pool(task, texts: list[Text], labels: list[Any], spans: list[list[Span]]) -> dict[str, list]:
    """The client's own sensitive spans by kind: distinct word tuples with the label fragment they carry."""
    pool: dict[str, dict[tuple[str, ...], Any]] = {}
    for text, label, example in zip(texts, labels, spans):
        for span in example:
            words = tuple(span.words(text))
            pool.setdefault(span.kind, {}).setdefault(words, task.span_fragment(label, text, span))
    return {kind: list(entries.items()) for kind, entries in pool.items()}


def substitution_pool(task, data, texts: list[Text], labels: list[Any], spans: list[list[Span]],
                      source: str | None = "public") -> dict[str, list]:
    """What a substitutive defense draws from, by kind (``source``: the defense's ``substitution_source()``).

    ``public``: phrases of public text only: the task's public phrases of a kind (``SpanTask.substitution_pool``)
    and the spans of its public examples (``Task.public_examples``: examples of its sources that no split of the
    cell holds), distinct by their words. ``own``: the client's own spans (``span_pool``), a kind's public
    phrases instead where the task offers them. None (a defense that substitutes nothing): no pool.
    """
    if source is None:
        return {}
    offered = getattr(task, "substitution_pool", dict)()
    if source == "own":
        return {**span_pool(task, texts, labels, spans), **offered}
    if source != "public":
        raise BenchError(f"a substitution pool is public or own, got '{source}'.")
    found = getattr(task, "public_examples", lambda _: None)(data)
    public: dict[str, list] = {}
    if found is not None and len(found.texts):
        holder = TaskData(found, found, "public")
        public = span_pool(task, list(found.texts), list(found.labels),
                           [list(task.sensitive_spans(holder, "train", i)) for i in range(len(found.texts))])
    pool = {**public, **offered}
    if not pool:
        raise BenchError(f"task '{task.registry_name}' offers no public text to substitute its spans from; name "
                         "pool=own to draw from the client's own spans (they then stay in the release, moved).")
    return pool


def rewrite_split(defense, task, data, split: str, rng: np.random.Generator) -> RewrittenSplit:
    """Run ``defense`` (a ``SpanDefense``) on ``split``: choose spans, rewrite them, relabel the examples."""
    examples = getattr(data, split)
    texts, labels = list(examples.texts), list(examples.labels)
    spans = task_spans(task, data, split)
    if not any(spans):
        raise BenchError(f"task '{task.registry_name}' gives no sensitive span in its {split} split, so "
                         f"'{type(defense).registry_name}' has nothing to rewrite.")
    kinds, fraction = defense.selection()
    chosen = select_spans(task, spans, kinds, fraction, rng)
    source = getattr(defense, "substitution_source", lambda: None)()
    batch = SpanBatch(texts, labels, chosen, substitution_pool(task, data, texts, labels, spans, source),
                      task.registry_name)
    edits = cached_rewrite(defense, batch, rng)
    if len(edits) != len(texts):
        raise BenchError(f"defense '{type(defense).registry_name}' returned edits for {len(edits)} of "
                         f"{len(texts)} examples.")
    out_texts, out_labels, placed = [], [], []
    for text, label, example, wanted in zip(texts, labels, edits, chosen):
        if sorted(e.span for e in example) != sorted(wanted):
            raise BenchError(f"defense '{type(defense).registry_name}' must rewrite exactly the chosen spans.")
        new_text, where = apply_edits(text, example)
        out_texts.append(new_text)
        out_labels.append(task.rewrite_label(label, text, sorted(example, key=lambda e: (e.span.segment,
                                                                                         e.span.start))))
        placed.append(where)
    ordered = [sorted(example, key=lambda s: (s.segment, s.start)) for example in chosen]
    return RewrittenSplit(out_texts, out_labels, ordered, placed, sum(map(len, chosen)), sum(map(len, spans)))


def cached_rewrite(defense, batch: SpanBatch, rng: np.random.Generator) -> list[list]:
    """``defense.rewrite(batch, rng)``, cached on disk under ``$BENCH_CACHE_DIR/rewrites``.

    Two cells that differ only in their attack (or their server) rewrite the same split identically; NDD's
    rewrite of a split can take an hour, so the second reads the first's. The key covers the defense's identity
    (name, version, parameters, the MLM's weights), the cell's precision, the batch (texts, labels, chosen spans,
    substitution pool, task), the random generator's state and, for a ``--check`` cell, the smoke mark; a hit
    restores the generator's state after the rewrite and the defense's run facts (``stats``), so the rest of the
    cell and its record are what a fresh rewrite gives, with ``rewrite_from_cache`` in the defense's facts.
    """
    import dataclasses
    import pickle

    from bench.core.cache import cache_root, identity_key, warn_unwritable

    if not hasattr(defense, "rewrite_identity"):  # not a SpanDefense (a duck-typed test double): nothing to key on
        return defense.rewrite(batch, rng)
    identity = (defense.rewrite_identity(batch.task), cell_precision(), batch.texts, batch.labels, batch.chosen,
                batch.pool, batch.task, rng.bit_generator.state)
    if smoke.active():  # a --check cell's rewrite is kept apart from a real run's (bench.core.smoke)
        identity += ("smoke",)
    path = cache_root() / "rewrites" / f"{identity_key(identity)}.pkl"
    run_facts = [f.name for f in dataclasses.fields(defense) if not f.init] if dataclasses.is_dataclass(defense) else []
    try:
        with open(path, "rb") as handle:
            edits, facts, state = pickle.load(handle)
        rng.bit_generator.state = state
        for name, value in facts.items():
            setattr(defense, name, value)
        if isinstance(getattr(defense, "stats", None), dict):
            defense.stats = {**defense.stats, "rewrite_from_cache": True}
        return edits
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError):
        pass  # absent or unreadable: rewrite and (re)write it
    edits = defense.rewrite(batch, rng)
    facts = {name: getattr(defense, name) for name in run_facts}
    try:
        with atomic_writer(path, "wb") as handle:
            pickle.dump((edits, facts, rng.bit_generator.state), handle, protocol=4)
    except OSError as exc:
        warn_unwritable(path.parent, exc)
    return edits


# -- where sensitive spans lie in a token release -----------------------------------------------------------


def _segments(texts: list[Text]) -> list[list[str]]:
    """Per segment index, the segment of every text (one list for single sentences, two for pairs)."""
    if texts and isinstance(texts[0], tuple):
        return [[t[s] for t in texts] for s in range(len(texts[0]))]
    return [list(texts)]


def _piece_ranges(texts: list[Text], spans: list[list[Span]], tokenizer, max_length: int):
    word_of = [word_of_pieces(segment, tokenizer, max_length) for segment in _segments(texts)]
    return [[piece_range(word_of[s.segment][i], s.start, s.end) for s in example]
            for i, example in enumerate(spans)]


def _segment_ids(row, segment: int) -> np.ndarray:
    return np.asarray(row[segment] if isinstance(row, tuple) else row)


def locate_slots(released_ids: list, original_ids: list, original_texts: list[Text], original_spans: list[list[Span]],
                 released_texts: list[Text], released_spans: list[list[Span]], tokenizer, max_length: int):
    """Slots of a release (``Release.slots``) and the original pieces behind each (``Truth.spans``).

    ``released_spans[i][j]`` is where span ``original_spans[i][j]`` lies in the released text (the same span
    for a length-preserving mechanism). A span with no released piece on either side (all [UNK], or cut off)
    is left out.
    """
    before = _piece_ranges(original_texts, original_spans, tokenizer, max_length)
    after = _piece_ranges(released_texts, released_spans, tokenizer, max_length)
    slots, truth = [], []
    for row, orig_row, spans, old, new in zip(released_ids, original_ids, released_spans, before, after):
        row_slots, row_truth = [], []
        for span, (a, b), (c, d) in zip(spans, old, new):
            original = _segment_ids(orig_row, span.segment)[a:b]
            if b > a and d > c and d <= len(_segment_ids(row, span.segment)) and len(original) == b - a:
                row_slots.append((span.segment, c, d, span.kind))
                row_truth.append(tuple(int(t) for t in original))
        slots.append(row_slots)
        truth.append(row_truth)
    return slots, truth


def span_prior(ids: list, texts: list[Text], spans: list[list[Span]], tokenizer, max_length: int) -> dict:
    """``{kind: [(piece ids, count), ...]}``, most frequent first, of the spans of data released unprotected."""
    counts: dict[str, Counter] = {}
    for row, example, ranges in zip(ids, spans, _piece_ranges(texts, spans, tokenizer, max_length)):
        for span, (a, b) in zip(example, ranges):
            if b > a:
                pieces = tuple(int(t) for t in _segment_ids(row, span.segment)[a:b])
                counts.setdefault(span.kind, Counter())[pieces] += 1
    return {kind: counter.most_common() for kind, counter in counts.items()}


def public_span_rows(ids: list, texts: list[Text], spans: list[list[Span]], tokenizer, max_length: int) -> dict:
    """The rows of data released unprotected with where their spans lie (``Release.span_public``): ``rows`` (piece
    ids, as released), ``slots`` (``(segment, first piece, end piece, kind)`` per span) and ``words`` (each span's
    word count). The spans an attack may calibrate on: their text is public, as the frequency prior's is."""
    rows, slots, words = [], [], []
    for row, example, ranges in zip(ids, spans, _piece_ranges(texts, spans, tokenizer, max_length)):
        kept = [(span, a, b) for span, (a, b) in zip(example, ranges) if b > a]
        rows.append(row)
        slots.append([(span.segment, a, b, span.kind) for span, a, b in kept])
        words.append([span.end - span.start for span, _, _ in kept])
    return {"rows": rows, "slots": slots, "words": words}

