"""Certified nearest-neighbour search (bench.privacy.search) against float64 brute force."""

from __future__ import annotations

import numpy as np
import pytest

from bench.privacy import search as search_module
from bench.privacy.search import BACKENDS, CertifiedSearch

ROWS, DIM, POINTS, BATCH = 600, 24, 100_000, 10_000


def brute_force(table: np.ndarray, queries: np.ndarray, chunk: int = 500) -> np.ndarray:
    """argmin of ((x - v)**2).sum() in float64, the first row on an exact tie."""
    table64, queries64 = table.astype(np.float64), queries.astype(np.float64)
    return np.concatenate([((queries64[s : s + chunk, None, :] - table64[None]) ** 2).sum(axis=-1).argmin(axis=1)
                           for s in range(0, len(queries), chunk)])


@pytest.fixture(scope="module")
def table() -> np.ndarray:
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((ROWS, DIM)) * rng.uniform(0.2, 1.5, size=(ROWS, 1))  # norms spread out
    rows[7] = rows[3]  # an exact duplicate: the smaller position must win
    return rows.astype(np.float32)


def noisy_points(table: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Half noisy copies of table rows (noise as large as the rows), half constructed near-ties.

    A near-tie is the midpoint of two rows plus an offset perpendicular to their difference (so equidistant
    in exact arithmetic) shifted by 1e-9 .. 1e-3 along the difference, or not at all.
    """
    half = count // 2
    noisy = table[rng.integers(0, len(table), half)] + rng.standard_normal((half, table.shape[1])) * 0.8
    a = table[rng.integers(0, len(table), count - half)].astype(np.float64)
    b = table[rng.integers(0, len(table), count - half)].astype(np.float64)
    b[np.all(a == b, axis=1)] += 0.1
    direction = (a - b) / np.linalg.norm(a - b, axis=1, keepdims=True)
    offset = rng.standard_normal(a.shape) * 0.05
    offset -= (offset * direction).sum(axis=1, keepdims=True) * direction
    shift = rng.choice([0.0, 1e-9, -1e-9, 1e-7, -1e-7, 1e-5, -1e-5, 1e-3], size=(len(a), 1))
    ties = (a + b) / 2 + offset + shift * direction
    return np.concatenate([noisy, ties, table[[3, 7]] + 1e-3]).astype(np.float32)


@pytest.fixture(scope="module")
def cases(table) -> list[tuple[np.ndarray, np.ndarray]]:
    """Batches of points with their float64 brute-force answers, shared by every backend's test."""
    rng = np.random.default_rng(1)
    batches = [noisy_points(table, BATCH, rng) for _ in range(POINTS // BATCH)]
    return [(points, brute_force(table, points)) for points in batches]


@pytest.mark.parametrize("backend", [*BACKENDS, "faiss"])
def test_certified_search_equals_float64_brute_force_on_100000_points(table, cases, backend):
    search = CertifiedSearch(table, backend=backend)
    checked = 0
    for points, expected in cases:
        found = search.nearest(points)
        mismatch = np.flatnonzero(found != expected)
        assert not len(mismatch), f"{backend}: {len(mismatch)} answers differ, first at {points[mismatch[0]]}"
        checked += len(points)
    assert checked >= POINTS
    stats = search.stats
    assert stats.queries == checked and sum(stats.by_stage.values()) == checked
    assert stats.by_stage.get(backend, 0) > checked // 2  # the backend itself certified most answers


@pytest.mark.parametrize("table_first", [True, False])
def test_bfloat16_answers_exactly_in_both_product_layouts(table, cases, table_first, monkeypatch):
    """The bf16 scores are ``table @ queries.T`` or ``queries @ table.T``, whichever this CPU multiplies faster:
    both are scanned exactly, padding included (607 rows do not divide into the groups)."""
    monkeypatch.setitem(search_module._TABLE_FIRST, DIM, table_first)
    search = CertifiedSearch(table, backend="bfloat16")
    points, expected = cases[0]
    assert np.array_equal(search.nearest(points), expected)
    assert search.stats.by_stage["bfloat16"] > len(points) // 2
    rng = np.random.default_rng(3)
    base = np.concatenate([table, rng.standard_normal((7, DIM)).astype(np.float32)])
    points = noisy_points(base, 2000, rng)
    assert np.array_equal(CertifiedSearch(base, backend="bfloat16").nearest(points), brute_force(base, points))


def test_every_fallback_stage_answers_exactly(table):
    """A short list of 2 sends crowded queries on to float32 and then to float64 brute force."""
    rng = np.random.default_rng(2)
    search = CertifiedSearch(table, backend="int8", short_list=2)
    points = noisy_points(table, 4000, rng)
    assert np.array_equal(search.nearest(points), brute_force(table, points))
    assert {"int8", "float32", "float64"} <= set(search.stats.by_stage)


@pytest.mark.parametrize("rows", [1, 2, 9, 601, 607])
@pytest.mark.parametrize("backend", ["bfloat16", "float32"])
def test_groups_that_do_not_divide_the_table_pad_nothing_into_the_answers(table, rows, backend):
    """Tables whose size is not a multiple of the groups: bf16 scores are padded to equal groups (-2^100 past
    the table), which must never be answered or change an answer."""
    rng = np.random.default_rng(rows)
    base = np.concatenate([table, rng.standard_normal((max(0, rows - len(table)), DIM)).astype(np.float32)])[:rows]
    search = CertifiedSearch(base, backend=backend)
    assert search.padded_width >= rows and search.padded_width % len(search.groups) == 0
    points = (noisy_points(base, 3000, rng) if rows > 8  # (it reads rows 3 and 7)
              else base[rng.integers(0, rows, 200)] + rng.standard_normal((200, DIM)).astype(np.float32))
    found = search.nearest(points)
    assert found.max() < rows
    assert np.array_equal(found, brute_force(base, points))


def test_int8_products_are_exact(table):
    """The int8 bound assumes fbgemm's output is exactly <x̃, ṽ> (power-of-two scales, no saturation)."""
    backend = BACKENDS["int8"](table)
    x = np.random.default_rng(3).standard_normal((300, DIM)).astype(np.float32)
    rounded, product = backend.products(x)
    assert product is not None
    import torch

    weights = torch.from_numpy(table)
    rows = backend.packed.unpack()[0].dequantize().double().numpy()
    assert np.array_equal(product.double().numpy(), rounded @ rows.T)
    assert np.abs(rows - weights.double().numpy()).max() > 0  # the table really was rounded


def test_empty_and_single_queries(table):
    search = CertifiedSearch(table)
    assert search.nearest(np.zeros((0, DIM), dtype=np.float32)).shape == (0,)
    assert search.nearest(table[[5]]).tolist() == [5]
