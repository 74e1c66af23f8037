"""Where a space-joined text's released WordPieces come from: the word of each released piece.

A client releases each text's WordPiece ids without special tokens, cut to ``max_length - 2`` pieces, keeping
the regular pieces and [MASK] (``bench.privacy.mechanisms.client_token_ids``). Tasks that label words (NER tags,
parse trees, answer spans) and the engine (which locates sensitive spans in a release) map words to those
pieces the same way, through ``word_of_pieces``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

from bench.core.errors import BenchError
from bench.core.spans import word_char_starts
from bench.privacy.mechanisms import released_token_ids


@lru_cache(maxsize=4)
def _released_ids(tokenizer) -> np.ndarray:
    return released_token_ids(tokenizer)


def word_of_pieces(texts: Sequence[str], tokenizer, max_length: int) -> list[np.ndarray]:
    """For each text (words joined by single spaces), the word index of each piece a client releases for it.

    Tokenizes exactly as ``Encoder.token_ids`` does for single sentences and keeps the pieces
    ``client_token_ids`` keeps; character offsets give each piece's word.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise BenchError("aligning words with WordPieces needs a fast tokenizer (character offsets).")
    released = _released_ids(tokenizer)
    encoded = tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=max_length - 2,
                        return_offsets_mapping=True)
    result = []
    for text, ids, offsets in zip(texts, encoded["input_ids"], encoded["offset_mapping"]):
        words = text.split(" ")
        starts = word_char_starts(words)
        keep = np.isin(np.asarray(ids, dtype=np.int64), released)
        begins = np.array([start for start, _ in offsets], dtype=np.int64)[keep]
        result.append(np.searchsorted(starts, begins, side="right").astype(np.int64) - 1)
    return result


def piece_range(word_of: np.ndarray, start: int, end: int) -> tuple[int, int]:
    """The released pieces of words ``start`` to ``end`` (exclusive) as a half-open range; empty (p, p) when
    none of them was released (all [UNK], or cut off)."""
    inside = np.flatnonzero((word_of >= start) & (word_of < end))
    if len(inside) == 0:
        at = int(np.searchsorted(word_of, start))
        return at, at
    return int(inside[0]), int(inside[-1]) + 1
