"""Token spaces for token-level mechanisms: the vocabulary, its embedding table, how a client
splits text into it, and what the released tokens look like.

- ``WordPieceSpace`` (default): the encoder's regular WordPiece tokens and input embedding table;
  releases token ids, which the server feeds to the encoder directly.
- ``WordVectorSpace``: the words of a word-vector file in GloVe text format (``word v1 ... vn`` per
  line; a word2vec ``count dim`` first line is skipped), for users who have one (Feyisetan et al. and
  Yue et al. use GloVe). Text is split into words and punctuation; a word is looked up as written,
  then lower-cased; a word the file lacks is replaced, before any mechanism runs, by a uniformly drawn
  vocabulary word (the rule of the SanText reference code). Releases text (words joined by spaces),
  which the server tokenizes like any text.

The space is public: the adversary rebuilds it from the release's ``SpaceRef`` (bench.privacy.public).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

from bench.core.errors import BenchError
from bench.core.public import SpaceRef
from bench.privacy.mechanisms import client_token_ids, embedding_table, regular_token_ids

WORD = re.compile(r"\w+(?:'\w+)?|[^\w\s]")
MAX_WORDS = 200_000  # GloVe files list frequent words first; 840B has 2.2M rows (2.6 GB as float32)


class WordPieceSpace:
    """The encoder's regular WordPiece vocabulary and input embedding table."""

    format = "wordpiece"

    def __init__(self, encoder) -> None:
        if getattr(encoder, "tokenizer", None) is None:
            raise BenchError(f"token-level mechanisms need a WordPiece encoder (minilm or a hub id), "
                             f"not '{encoder.name}'.")
        self.encoder = encoder
        self.table = embedding_table(encoder)
        self.candidates = regular_token_ids(encoder.tokenizer.get_vocab())

    def client_ids(self, texts, rng: np.random.Generator | None = None) -> list[np.ndarray]:
        """Each text's regular WordPiece ids."""
        return client_token_ids(self.encoder, texts)

    def render(self, ids: list[np.ndarray]) -> list[np.ndarray]:
        """Released as ids: the server assembles them into encoder input."""
        return ids

    def released_ids(self, texts) -> list[np.ndarray]:
        """The ids of released text (a WordPiece release is ids already; text is tokenized as the client's is)."""
        return self.client_ids(texts)



class WordVectorSpace:
    """The words of a GloVe-format vector file (the first ``MAX_WORDS`` rows)."""

    format = "words"

    def __init__(self, path: str) -> None:
        self.path = path
        self.words, self.table = _read_vectors(path)
        self.index = {word: i for i, word in enumerate(self.words)}
        self.candidates = np.arange(len(self.words), dtype=np.int64)

    def client_ids(self, texts, rng: np.random.Generator | None = None) -> list[np.ndarray]:
        """Word ids of each text; a word missing from the file is -1, or a uniform random word with ``rng``."""
        result = []
        for text in texts:
            ids = np.array([self.index.get(w, self.index.get(w.lower(), -1)) for w in WORD.findall(text)],
                           dtype=np.int64)
            if rng is not None and (missing := ids < 0).any():
                ids[missing] = rng.integers(0, len(self.words), size=int(missing.sum()))
            result.append(ids)
        return result

    def render(self, ids: list[np.ndarray]) -> list[str]:
        """Released as text: the words joined by spaces."""
        return [" ".join(self.words[i] for i in sentence) for sentence in ids]

    def released_ids(self, texts: list[str]) -> list[np.ndarray]:
        """The word ids of released text, split where ``render`` joined it (on spaces): a released word such as
        ``'s`` or ``u.s.`` stays one position, which splitting it as client text would not keep."""
        return [np.array([self.index.get(w, -1) for w in text.split()], dtype=np.int64) for text in texts]



def token_space(encoder, vectors: str = ""):
    """The WordPiece space of ``encoder``, or the word space of the vector file ``vectors``."""
    return WordVectorSpace(vectors) if vectors else WordPieceSpace(encoder)


def space_of(ref: SpaceRef, encoder):
    """The space a release names, rebuilt from public facts (the encoder's table, or the vector file)."""
    return token_space(encoder, ref.vectors if ref.format == "words" else "")


@functools.lru_cache(maxsize=2)
def _read_vectors(path: str) -> tuple[list[str], np.ndarray]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise BenchError(f"word-vector file '{path}' does not exist (expected GloVe text format: word v1 ... vn).")
    words: list[str] = []
    rows: list[np.ndarray] = []
    with open(file, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.rstrip("\n").rstrip().split(" ")
            if number == 1 and len(parts) == 2:
                continue  # word2vec header: count dim
            if len(parts) < 2:
                continue
            if rows and len(parts) - 1 != len(rows[0]):
                raise BenchError(f"{path}:{number} has {len(parts) - 1} values; earlier rows have {len(rows[0])}.")
            try:
                rows.append(np.asarray(parts[1:], dtype=np.float32))
            except ValueError:
                raise BenchError(f"{path}:{number} is not 'word v1 ... vn' with numeric values.") from None
            words.append(parts[0])
            if len(words) >= MAX_WORDS:
                break
    if not words:
        raise BenchError(f"word-vector file '{path}' holds no vectors.")
    return words, np.stack(rows)
