"""Sentence boundaries of a segment's words, for metrics defined over one sentence (NDD's ``scope=sentence``).

spaCy's rule-based ``sentencizer`` (a blank English pipeline: no model, deterministic) splits the space-joined
words after sentence-final punctuation; a sentence that starts inside a whitespace word ("home.Then") is
joined to the one before, so that every word lies in one sentence.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from bench.core.spans import word_char_starts


@lru_cache(maxsize=1)
def _sentencizer():
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


@lru_cache(maxsize=4096)
def sentence_starts(words: tuple[str, ...]) -> np.ndarray:
    """The index of the first word of every sentence of ``words`` (always starting with 0), ascending."""
    text = " ".join(words)
    at_word = {int(c): i for i, c in enumerate(word_char_starts(words))}
    # a boundary inside a word (as in "home.Then") is not one: the word stays whole in the earlier sentence
    firsts = {0} | {at_word[s.start_char] for s in _sentencizer()(text).sents if s.start_char in at_word}
    return np.array(sorted(firsts), dtype=np.int64)


def sentence_around(words: tuple[str, ...], start: int, end: int) -> tuple[int, int]:
    """Words ``(first, end exclusive)`` of the sentences that words ``start`` to ``end`` (exclusive) lie in: one
    sentence, or the run of sentences a span crosses."""
    starts = sentence_starts(tuple(words))
    first = int(starts[np.searchsorted(starts, start, side="right") - 1])
    following = starts[starts >= end]
    return first, int(following[0]) if len(following) else len(words)
