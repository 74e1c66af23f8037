"""Public mechanism math shared by defenses and attacks (the adversary knows these mechanisms).

d_chi-privacy noise (Feyisetan et al. 2020): N = r·u with u uniform on the unit sphere of R^n and
r ~ Gamma(shape n, scale 1/eta), so the density of N is proportional to exp(-eta·||N||).
Exact nearest-neighbour search over an embedding table (faiss, exact L2): an approximate index
would change the mechanism's output distribution.
"""

from __future__ import annotations

import re

import numpy as np

from bench.params import require

SPECIAL_TOKEN = re.compile(r"^\[(PAD|CLS|SEP|MASK|UNK|unused\d+)\]$")


def dchi_noise(count: int, dim: int, eta: float, rng: np.random.Generator) -> np.ndarray:
    """``count`` d_chi noise vectors in R^dim, float32 ``(count, dim)``; mean norm is dim/eta."""
    require(eta > 0, f"eta must be > 0, got {eta}.")
    direction = rng.standard_normal((count, dim))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    radius = rng.gamma(shape=dim, scale=1.0 / eta, size=count)
    return (direction * radius[:, None]).astype(np.float32)


def regular_token_ids(vocab: dict[str, int]) -> np.ndarray:
    """Ids of the WordPiece tokens that may be inputs or outputs (no [PAD], [CLS], [unused*], ...)."""
    return np.array(sorted(i for token, i in vocab.items() if not SPECIAL_TOKEN.match(token)), dtype=np.int64)


def client_token_ids(encoder, texts) -> list[np.ndarray]:
    """What a client perturbs: each text's regular WordPiece ids (special tokens are never inputs)."""
    regular = regular_token_ids(encoder.tokenizer.get_vocab())
    return [ids[np.isin(ids, regular)] for ids in encoder.token_ids(list(texts))]


def nearest_rows(table: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of the row of ``table`` nearest (exact Euclidean) to each query, ``(len(queries),)``."""
    import faiss

    table = np.ascontiguousarray(table, dtype=np.float32)
    index = faiss.IndexFlatL2(table.shape[1])
    index.add(table)
    _, found = index.search(np.ascontiguousarray(queries, dtype=np.float32), 1)
    return found[:, 0]


def _split(flat: np.ndarray, lengths: list[int]) -> list[np.ndarray]:
    return np.split(flat, np.cumsum(lengths)[:-1]) if lengths else []


def dchi_token_vectors(
    ids: list[np.ndarray], table: np.ndarray, eta: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """M_rep: each token's input embedding plus its own d_chi noise, per sentence ``(len, dim)``."""
    flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    noisy = table[flat] + dchi_noise(len(flat), table.shape[1], eta, rng)
    return _split(noisy, [len(x) for x in ids])


def nearest_tokens(vectors: list[np.ndarray], table: np.ndarray, candidates: np.ndarray) -> list[np.ndarray]:
    """Per sentence, the ``candidates`` id whose embedding is nearest (exactly) to each vector."""
    lengths = [len(x) for x in vectors]
    if not sum(lengths):
        return [np.zeros(0, dtype=np.int64) for _ in lengths]
    chosen = candidates[nearest_rows(table[candidates], np.concatenate(vectors))]
    return _split(chosen, lengths)


def dchi_token_text(
    ids: list[np.ndarray], table: np.ndarray, candidates: np.ndarray, eta: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """M_txt: the token nearest (exactly) to each noisy embedding, among ``candidates`` ids."""
    return nearest_tokens(dchi_token_vectors(ids, table, eta, rng), table, candidates)


def embedding_table(encoder) -> np.ndarray:
    """The encoder's public input embedding table as float32 NumPy ``(vocab, dim)``."""
    return encoder.input_embeddings().detach().float().cpu().numpy()
