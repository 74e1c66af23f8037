"""Exact nearest-neighbour search with faiss (public mechanism math shared by defenses and attacks)."""

from __future__ import annotations

import numpy as np

from bench.core.errors import BenchError


def _unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def cosine_search(index_vectors: np.ndarray, queries: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` cosine neighbours of each query: (similarities, indices), each ``(n, k)``."""
    import faiss

    for what, rows in (("searched vectors", index_vectors), ("queries", queries)):
        if not np.isfinite(np.asarray(rows, dtype=np.float32)).all():
            raise BenchError(f"a nearest-neighbour search got {what} with NaN or infinite values (an attack or "
                             "mechanism outside what it handles numerically); try parameter values nearer the "
                             "defaults.")
    base = _unit_rows(index_vectors)
    index = faiss.IndexFlatIP(base.shape[1])
    index.add(base)
    similarities, indices = index.search(_unit_rows(queries), k)
    return similarities, indices
