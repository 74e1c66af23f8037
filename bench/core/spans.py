"""Sensitive spans of a text and the edits that rewrite them (NDD distortion, span masking).

A task that declares sensitive spans (``SpanTask.span_kinds``) gives each example's spans as word ranges of
the example's text split on single spaces (``Span``); a pair's span names its segment. A span defense
rewrites some of them (``Edit``: the span and the words that replace it, with the label fragment those
words carry when they came from another example), and the task relabels the rewritten example
(``SpanTask.rewrite_label``). ``apply_edits`` is the one place words are replaced, so every task and defense
agrees on where the rewritten spans land.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from bench.core.errors import BenchError


class Span(NamedTuple):
    """Words ``start`` to ``end`` (exclusive) of segment ``segment`` of an example, of kind ``kind``."""

    start: int
    end: int
    kind: str
    segment: int = 0

    def words(self, text) -> list[str]:
        """The span's words in ``text`` (a sentence, or a pair of sentences)."""
        return segment_words(text, self.segment)[self.start:self.end]


class Edit(NamedTuple):
    """Replace ``span`` by ``words``; ``fragment`` is the label of those words where they came from (a
    substituted phrase's tags or subtree, ``SpanTask.span_fragment``), None for generated or masked words."""

    span: Span
    words: tuple[str, ...]
    fragment: Any = None


def segment_words(text, segment: int = 0) -> list[str]:
    """The words of one segment of ``text`` (a single sentence has only segment 0)."""
    if isinstance(text, tuple):
        return text[segment].split(" ")
    if segment != 0:
        raise BenchError(f"a single sentence has no segment {segment}.")
    return text.split(" ")


def word_char_starts(words: Sequence[str]) -> np.ndarray:
    """The character offset of each word in the words joined by single spaces."""
    return np.cumsum([0] + [len(w) + 1 for w in words[:-1]]).astype(np.int64)


def check_edits(edits: Sequence[Edit], text) -> list[Edit]:
    """``edits`` sorted by position; raises when two overlap, one leaves its segment or replaces by nothing."""
    ordered = sorted(edits, key=lambda e: (e.span.segment, e.span.start))
    for previous, edit in zip(ordered, ordered[1:]):
        if previous.span.segment == edit.span.segment and edit.span.start < previous.span.end:
            raise BenchError(f"edits overlap: words {previous.span.start}-{previous.span.end} and "
                             f"{edit.span.start}-{edit.span.end}.")
    for edit in ordered:
        size = len(segment_words(text, edit.span.segment))
        if not 0 <= edit.span.start < edit.span.end <= size:
            raise BenchError(f"edit of words {edit.span.start}-{edit.span.end} is outside a segment of {size} words.")
        if not edit.words or any(not w or " " in w for w in edit.words):
            raise BenchError("an edit must replace a span by one or more non-empty words without spaces.")
    return ordered


def apply_edits(text, edits: Sequence[Edit]):
    """The rewritten text and, for each edit in position order, the span its words occupy in it."""
    ordered = check_edits(edits, text)
    segments = list(text) if isinstance(text, tuple) else [text]
    placed: list[Span] = []
    for index in range(len(segments)):
        words = segments[index].split(" ")
        out: list[str] = []
        cursor = 0
        for edit in (e for e in ordered if e.span.segment == index):
            out.extend(words[cursor:edit.span.start])
            placed.append(Span(len(out), len(out) + len(edit.words), edit.span.kind, index))
            out.extend(edit.words)
            cursor = edit.span.end
        out.extend(words[cursor:])
        segments[index] = " ".join(out)
    return (tuple(segments) if isinstance(text, tuple) else segments[0]), placed


def non_overlapping(spans: Sequence[Span]) -> list[Span]:
    """The spans no earlier-chosen span overlaps, shortest first (inner phrases win over the phrases holding
    them), returned in position order."""
    chosen: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.end - s.start, s.segment, s.start)):
        if all(c.segment != span.segment or span.end <= c.start or c.end <= span.start for c in chosen):
            chosen.append(span)
    return sorted(chosen, key=lambda s: (s.segment, s.start))
