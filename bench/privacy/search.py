"""Exact nearest-neighbour search, certified: low-precision candidate scores, an error bound, a float64 re-rank.

By default the first stage is faiss's exact float32 search (IndexFlatL2, top 2), certified by the gap
between its two answers (below); a low-precision backend replaces it where this CPU multiplies in it
``LOW_PRECISION_GAIN`` times faster than in float32.

Every nearest-token user (dchi-text, the inversion attack, deniability, adaptation) goes through
``CertifiedSearch.nearest``. Its answers equal float64 brute force (argmin of ``((x - v)**2).sum()``, the
smallest candidate position on an exact tie); only its speed depends on the backend.

For a query x and a candidate v, the score s(v) = <x, v> - |v|²/2 is largest at the nearest v. A backend
computes ŝ(v) = <x̃, ṽ> - |v|²/2 from rounded operands x̃ = x - e_x and ṽ = v - e_v (both known exactly), so

    |s(v) - ŝ(v)| ≤ |<e_x, v>| + |<x̃, e_v>| + |round-off of the product| + μ
                  ≤ |e_x|·|v| + |x̃|·|e_v| + c·|x̃|·|ṽ| + μ                            (Cauchy–Schwarz)

with c the backend's relative output error and μ the float32 rounding of the subtraction of |v|²/2:

- ``int8`` (fbgemm through ``torch.ops.quantized.linear_dynamic``): x̃ on a power-of-two grid of 128 levels
  per query block, ṽ on a power-of-two grid per row with |q| ≤ 127. Products and sums are integers below
  2^24 (384·127·127 < 2^24 for n ≤ 1,040), no int16 pair saturates (2·127·127 < 2^15), and the power-of-two
  scales make the float32 output exact: c = 0. One probe row per block is compared with the float64 product;
  a mismatch disables the backend for the process and the block is searched by the next one.
- ``bfloat16`` (torch matmul): both operands rounded to bf16 (relative error ≤ 2^-8 each, exactly known),
  products exact in float32, accumulation in float32 (γ_n = n·2^-24 / (1 - n·2^-24)), output rounded to
  bf16 (2^-8): c = 2^-8 + γ_(n+1)·(1 + 2^-8). The product carries -|v|²/2 too, as an (n+1)-th column
  against a query column of 1: ŝ leaves the product whole, and B gains |h - h̃| + c·h̃ for that column's bf16
  value h̃ of h = |v|²/2 (its rounding, and its share of the accumulation and output rounding).
- ``float32``: e_x = e_v = 0 and c = γ_n.

A candidate can be the nearest only if ŝ(v) + B(v) ≥ L = max_u (ŝ(u) - B(u)). The vocabulary is sorted
by norm into groups of equal runs of columns, and B is taken at each group's largest |v|, |e_v|, |ṽ| and
column term (a few reductions instead of an elementwise bound). The bf16 scores are padded to whole groups
(the padding scores -2^100 and is never read), so their group maxima are one bf16 reduction; only the best
group of each query is read again in float32 (its argmax and runner-up), and a crowded query's short list
is looked for only in the groups whose maximum reaches their limit. Queries whose short list has at most
``SHORT_LIST`` candidates are re-ranked in float64; the others go to the next backend (float32, whose bound
is ~1e-5 relative), and any left after that to float64 brute force.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

QUERY_BLOCK = 256  # queries per product (its scores, 30 MB at |V| = 29,523, stay in cache)
SHORT_LIST = 256  # most candidates re-ranked in float64 per query before it falls back to the next backend
GROUPS = 16  # norm groups of the vocabulary for the per-group error bound
PAIR_CHUNK = 4096  # (query, candidate) pairs re-ranked in float64 at a time
INT8_LEVELS = 127  # activation grid 0..127 (fbgemm's reduce_range: no int16 saturation on AVX2)
LOW_PRECISION_GAIN = 2.0  # auto uses bf16 / int8 only when its product is this many times faster than float32
BACKEND_ENV = "BENCH_SEARCH_BACKEND"  # int8, bfloat16, float32 or auto (the default)
U32 = 2.0**-24
U_BF16 = 2.0**-8
SAFETY = 1.0 + 1e-6  # the bound's float64 evaluation, inflated

_DISABLED: set[str] = set()  # backends whose probe failed in this process
_CHOSEN: dict[int, str] = {}  # dim -> backend picked by measurement
_TABLE_FIRST: dict[int, bool] = {}  # dim -> bf16 layout picked by measurement (table_first)


def gamma(n: int, unit: float = U32) -> float:
    """Higham's γ_n = n·u / (1 - n·u): relative error bound of a float sum of n products."""
    return n * unit / (1.0 - n * unit)


@dataclass
class SearchStats:
    """How the queries of the calls so far were answered."""

    queries: int = 0
    by_stage: dict[str, int] = field(default_factory=dict)  # certified answers per backend ("float64": brute force)
    pairs: int = 0  # (query, candidate) pairs re-ranked in float64
    seconds: float = 0.0  # wall time in ``nearest``

    def add(self, stage: str, count: int) -> None:
        """Count ``count`` queries answered at ``stage``."""
        self.by_stage[stage] = self.by_stage.get(stage, 0) + count


class _Backend:
    """A way to compute approximate scores, with what its bound needs."""

    name = ""
    c_out = 0.0

    def __init__(self, base: np.ndarray) -> None:
        self.dim = base.shape[1]

    def table_error_norms(self) -> np.ndarray:
        """|e_v| per row (float64)."""
        return np.zeros(len(self.rounded_norms))

    def products(self, x):
        """(x̃ as float64 NumPy, ŝ + |v|²/2 as a float32 torch matrix, or None if the backend refused)."""
        raise NotImplementedError

    def scores(self, x, half_sq32: np.ndarray, width: int):
        """(x̃ as float64 NumPy, ŝ = <x̃, ṽ> - |v|²/2, or None if the backend refused): float32 NumPy here, or
        a torch tensor of ``width`` columns, the last ones past the table (see ``_group_maxima``)."""
        rounded, product = self.products(x)
        if product is None:
            return rounded, None
        scores = product.numpy()
        scores -= half_sq32
        return rounded, scores

    def half_error(self) -> np.ndarray:
        """Per row, what ``scores`` adds to the bound for its handling of |v|²/2 (float64; beyond μ)."""
        return np.zeros(len(self.rounded_norms))


class _Float32(_Backend):
    name = "float32"

    def __init__(self, base) -> None:
        import torch

        super().__init__(base)
        self.table = torch.from_numpy(np.ascontiguousarray(base, dtype=np.float32))
        self.rounded_norms = np.linalg.norm(base.astype(np.float64), axis=1)
        self.c_out = gamma(self.dim)

    def products(self, x):
        import torch

        return x.astype(np.float64), torch.from_numpy(x) @ self.table.T


class _BFloat16(_Backend):
    name = "bfloat16"

    def __init__(self, base) -> None:
        import torch

        super().__init__(base)
        self.table = torch.from_numpy(np.ascontiguousarray(base, dtype=np.float32)).bfloat16()
        rounded = self.table.double().numpy()
        self.rounded_norms = np.linalg.norm(rounded, axis=1)
        self.errors = np.linalg.norm(base.astype(np.float64) - rounded, axis=1)
        self.c_out = U_BF16 + gamma(self.dim + 1) * (1 + U_BF16)  # n + 1 products with the |v|²/2 column
        half = 0.5 * np.einsum("ij,ij->i", base, base, dtype=np.float64)
        half_bf16 = torch.from_numpy(half).float().bfloat16()
        self.with_half = torch.cat([self.table, -half_bf16[:, None]], dim=1).contiguous()
        rounded_half = half_bf16.double().numpy()
        # |h - h̃| for the rounded column, and the output rounding (c_out) of its share of the sum
        self.half_errors = np.abs(half - rounded_half) + self.c_out * rounded_half

    def table_error_norms(self):
        return self.errors

    def products(self, x):
        import torch

        rounded = torch.from_numpy(x).bfloat16()
        if table_first(self.dim):
            return rounded.double().numpy(), (self.table @ rounded.T).T.float()
        return rounded.double().numpy(), (rounded @ self.table.T).float()

    def scores(self, x, half_sq32, width):
        # -|v|²/2 rides in the product as one more column (the query's is 1), so the scores come out of the
        # product as they are, in bf16 (read by the search through _group_maxima and _rows_slice); its bf16
        # rounding and its share of the output rounding are in half_error. Rows added past the table (up to
        # ``width``, padded once) score -2^100 and are never read as candidates
        import torch

        if width > len(self.with_half):
            filler = torch.zeros(width - len(self.with_half), self.with_half.shape[1], dtype=torch.bfloat16)
            filler[:, -1] = -(2.0**100)
            self.with_half = torch.cat([self.with_half, filler]).contiguous()
        rounded = torch.from_numpy(x).bfloat16()
        queries = torch.cat([rounded, torch.ones(len(x), 1, dtype=torch.bfloat16)], dim=1)
        if table_first(self.dim):  # (width, queries), viewed as (queries, width)
            return rounded.double().numpy(), (self.with_half @ queries.T).T
        return rounded.double().numpy(), queries @ self.with_half.T

    def half_error(self):
        return self.half_errors


class _Int8(_Backend):
    name = "int8"

    def __init__(self, base) -> None:
        import torch

        super().__init__(base)
        if self.dim * 127 * 127 >= 2**24:
            raise ValueError("int8 products would not be exact in float32 at this dimension")
        table = torch.from_numpy(np.ascontiguousarray(base, dtype=np.float32))
        peak = table.abs().amax(dim=1).double().clamp_min(1e-30)
        scales = torch.exp2(torch.ceil(torch.log2(peak / 127)))  # power of two: |q| ≤ 127
        with warnings.catch_warnings():  # quantized tensors are deprecated in torch, still the way to fbgemm
            warnings.simplefilter("ignore", UserWarning)
            weights = torch.quantize_per_channel(table, scales, torch.zeros(len(table), dtype=torch.long), 0,
                                                 torch.qint8)
        rounded = weights.dequantize().double().numpy()
        self.probe_columns = np.unique(np.linspace(0, len(base) - 1, min(len(base), 2048)).astype(np.int64))
        self.probe_table = rounded[self.probe_columns]  # exact multiples of powers of two
        self.rounded_norms = np.linalg.norm(rounded, axis=1)
        self.errors = np.linalg.norm(base.astype(np.float64) - rounded, axis=1)
        self.packed = torch.ops.quantized.linear_prepack(weights, None)

    def table_error_norms(self):
        return self.errors

    def products(self, x):
        import torch

        low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
        zero = 64
        step = 2.0 ** math.ceil(math.log2(max(-low / zero, high / (INT8_LEVELS - zero), 1e-30)))
        levels = np.clip(np.rint(x.astype(np.float64) / step) + zero, 0, INT8_LEVELS)
        rounded = ((levels - zero) * step).astype(np.float32)  # exact: small integers times a power of two
        ends = np.zeros((2, x.shape[1]), dtype=np.float32)  # the grid's ends, so the kernel picks this grid
        ends[0, 0], ends[1, 0] = -zero * step, (INT8_LEVELS - zero) * step
        scores = torch.ops.quantized.linear_dynamic(torch.from_numpy(np.concatenate([rounded, ends])),
                                                    self.packed, True)[: len(x)]
        rounded64 = rounded.astype(np.float64)
        probe = int(np.argmax(np.abs(rounded64).sum(axis=1)))
        expected = self.probe_table @ rounded64[probe]  # exact in float64: one scale, integer sums < 2^24
        if not np.array_equal(scores[probe, self.probe_columns].double().numpy(), expected):
            _DISABLED.add(self.name)
            return rounded64, None
        return rounded64, scores


BACKENDS = {"int8": _Int8, "bfloat16": _BFloat16, "float32": _Float32}


def low_precision_rates(dim: int, rows: int = 2048, queries: int = 256, repeats: int = 3) -> dict[str, float]:
    """GFLOP/s of each backend's product at a (queries × dim) @ (dim × rows) shape, best of ``repeats``
    (0 if unusable here)."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal((rows, dim)).astype(np.float32)
    x = rng.standard_normal((queries, dim)).astype(np.float32)
    rates = {}
    for name, cls in BACKENDS.items():
        try:
            backend = cls(base)
            backend.products(x)
            best = math.inf
            for _ in range(repeats):
                start = time.perf_counter()
                _, scores = backend.products(x)
                best = min(best, time.perf_counter() - start)
            rates[name] = 0.0 if scores is None else 2.0 * rows * dim * queries / best / 1e9
        except (RuntimeError, ValueError, TypeError, AttributeError):
            rates[name] = 0.0
    return rates


def table_first(dim: int, rows: int = 8192, repeats: int = 3) -> bool:
    """Whether bf16 scores are faster as ``table @ queries.T`` than as ``queries @ table.T`` on this CPU.

    Timed once per process and dimension at the search's block shape; only the speed depends on it (oneDNN
    on AMX packs the two layouts differently, about 2x apart).
    """
    if dim not in _TABLE_FIRST:
        import torch

        generator = torch.Generator().manual_seed(0)
        table = torch.randn(rows, dim + 1, generator=generator).bfloat16()
        queries = torch.randn(QUERY_BLOCK, dim + 1, generator=generator).bfloat16()
        seconds = {}
        for first, call in ((True, lambda: table @ queries.T), (False, lambda: queries @ table.T)):
            call()
            seconds[first] = min(_seconds(call) for _ in range(repeats))
        _TABLE_FIRST[dim] = seconds[True] < seconds[False]
    return _TABLE_FIRST[dim]


def _seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def choose_backend(dim: int) -> str:
    """The backend to use at this dimension (answers never depend on it, only speed).

    ``$BENCH_SEARCH_BACKEND`` names one; otherwise the products are timed once per process and a
    low-precision backend is used only if it multiplies at least ``LOW_PRECISION_GAIN`` times faster than
    float32 (its short lists and fallbacks cost the rest).
    """
    if dim not in _CHOSEN:
        named = os.environ.get(BACKEND_ENV, "auto")
        if named in BACKENDS:
            _CHOSEN[dim] = named
        else:
            rates = low_precision_rates(dim)
            fast = [name for name in ("bfloat16", "int8") if rates[name] >= LOW_PRECISION_GAIN * rates["float32"]]
            _CHOSEN[dim] = max(fast, key=rates.get) if fast else "float32"
    return _CHOSEN[dim]


class CertifiedSearch:
    """Exact nearest rows of ``base`` (float32 ``(m, n)``) for float32 queries."""

    def __init__(self, base: np.ndarray, backend: str = "auto", short_list: int = SHORT_LIST) -> None:
        base = np.ascontiguousarray(base, dtype=np.float32)
        self.order = np.argsort(np.linalg.norm(base.astype(np.float64), axis=1), kind="stable")
        self.base = base[self.order]  # sorted by norm, so groups of columns share a bound
        norms = np.linalg.norm(self.base.astype(np.float64), axis=1)
        self.norms = norms
        self.half_sq = 0.5 * np.einsum("ij,ij->i", self.base, self.base, dtype=np.float64)
        self.half_sq32 = self.half_sq.astype(np.float32)
        # equal groups of consecutive columns (the last one shorter), so that padded scores can be viewed as
        # (queries, groups, size) and reduced per group in one call
        self.group_size = max(1, math.ceil(len(base) / GROUPS))
        self.groups = [np.arange(first, min(first + self.group_size, len(base)))
                       for first in range(0, len(base), self.group_size)]
        self.starts = np.array([g[0] for g in self.groups])
        self.bounds = [(int(g[0]), int(g[-1]) + 1) for g in self.groups]  # each group's columns
        self.padded_width = self.group_size * len(self.groups)
        self.short_list = short_list
        self.requested = backend
        self.stages: dict[str, tuple[_Backend, np.ndarray]] = {}
        self.stats = SearchStats()
        self.index = None  # faiss IndexFlatL2 over the sorted rows, built on first use

    def _stage(self, name: str):
        if name not in self.stages:
            backend = BACKENDS[name](self.base)
            norms = np.maximum(self.norms, backend.rounded_norms)
            errors = backend.table_error_norms()
            half_errors = backend.half_error()
            per_group = np.array([[norms[g].max(), errors[g].max(), backend.rounded_norms[g].max(),
                                   half_errors[g].max()] for g in self.groups])
            self.stages[name] = backend, per_group
        return self.stages[name]

    def stage_names(self) -> list[str]:
        """The backends tried in turn (then float64 brute force).

        ``auto``: a low-precision backend if it is fast enough here (``choose_backend``), else faiss's exact
        float32 search certified by its top-2 gap; then the float32 short-list search for what is left.
        """
        if self.requested == "auto":
            first = choose_backend(self.base.shape[1])
            names = [first] if first != "float32" and first not in _DISABLED else ["faiss"]
        else:
            names = [self.requested] if self.requested not in _DISABLED else []
        return names + ([] if "float32" in names else ["float32"])

    def nearest(self, queries: np.ndarray) -> np.ndarray:
        """Position in ``base`` of the nearest row to each query (float64-exact; ties: the smaller position)."""
        start = time.perf_counter()
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        answers = np.empty(len(queries), dtype=np.int64)
        self.stats.queries += len(queries)
        pending = np.arange(len(queries))
        names = self.stage_names()
        if names[0] == "faiss" and len(pending):  # faiss blocks the queries itself: one call for all of them
            found, pending = self._search("faiss", queries, pending)
            answers[list(found)] = list(found.values())
            names = names[1:]
        for first in range(0, len(pending), QUERY_BLOCK):
            left = pending[first : first + QUERY_BLOCK]
            for name in names:
                if not len(left):
                    break
                found, left = self._search(name, queries, left)
                answers[list(found)] = list(found.values())
            for row in left:
                answers[row] = self._brute_force(queries[row])
                self.stats.add("float64", 1)
        self.stats.seconds += time.perf_counter() - start
        return self.order[answers] if len(answers) else answers

    def _brute_force(self, query: np.ndarray) -> int:
        """Float64 brute force for one query (sorted position; ties: the smaller original position)."""
        distances = np.concatenate([((self.base[s : s + 4096].astype(np.float64) - query.astype(np.float64)) ** 2)
                                    .sum(axis=1) for s in range(0, len(self.base), 4096)])
        tied = np.flatnonzero(distances == distances.min())
        return int(tied[np.argmin(self.order[tied])])

    def _search(self, name: str, block: np.ndarray, rows: np.ndarray):
        """Certified answers (sorted position) for ``block[rows]`` by backend ``name``, and the rows left.

        The scan after the product is NumPy (one thread, a few passes over a block that stays in cache):
        torch's reductions cost 10-20x more than these on a loaded 2-core machine.
        """
        if name == "faiss":
            return self._search_faiss(block, rows)
        backend, per_group = self._stage(name)
        x = block[rows]
        rounded, scores = backend.scores(x, self.half_sq32, self.padded_width)  # ŝ(v) = <x̃, ṽ> - |v|²/2
        if scores is None:  # the int8 probe failed: the next backend answers
            return {}, rows
        error_x = np.linalg.norm(x.astype(np.float64) - rounded, axis=1)
        norm_x = np.linalg.norm(rounded, axis=1)
        # B per (query, group); μ covers float32 rounding of |v|²/2, of the product and of the subtraction
        top = float(np.abs(self.half_sq).max())
        bound = (error_x[:, None] * per_group[None, :, 0] + norm_x[:, None] * per_group[None, :, 1]
                 + backend.c_out * norm_x[:, None] * per_group[None, :, 2]
                 + 4 * U32 * (norm_x[:, None] * per_group[None, :, 2] + top) + per_group[None, :, 3]) * SAFETY
        group_max = self._group_maxima(scores)
        floor = (group_max.astype(np.float64) - bound).max(axis=1)  # L: a lower bound on the best true score
        thresholds = floor[:, None] - bound
        thresholds -= 4 * U32 * np.abs(thresholds)  # compared in float32: never cut a candidate by rounding
        limits = thresholds.astype(np.float32)
        # a candidate can be the nearest only if it passes its group's limit: the hits, looked for only in the
        # groups whose maximum passes it. The largest ŝ always does; a query with one hit is answered by it,
        # one with a short list is re-ranked in float64, and a crowded one is left to the next backend
        passing = group_max >= limits
        pairs_query, pairs_column = [], []
        for group, (first, last) in enumerate(self.bounds):
            which = np.flatnonzero(passing[:, group])
            if len(which):
                hit_query, hit_column = _hits(scores, which, first, last, limits[which, group])
                pairs_query.append(which[hit_query])
                pairs_column.append(first + hit_column)
        if not pairs_query:  # no group passes (NaN scores): the next backend answers
            return {}, rows
        hit_query, hit_column = np.concatenate(pairs_query), np.concatenate(pairs_column)
        counts = np.bincount(hit_query, minlength=len(rows))
        alone = counts[hit_query] == 1
        answered = dict(zip(rows[hit_query[alone]].tolist(), hit_column[alone].tolist()))
        kept = ~alone & (counts[hit_query] <= self.short_list)
        if kept.any():
            answered.update(self._rerank(block, rows, hit_query[kept], hit_column[kept]))
        left = rows[(counts == 0) | (counts > self.short_list)]  # none is a rounding bug's safe exit
        self.stats.add(name, len(answered))
        return answered, left

    def _group_maxima(self, scores) -> np.ndarray:
        """Per query and group, the largest score (float32 NumPy)."""
        if isinstance(scores, np.ndarray):
            return np.maximum.reduceat(scores, self.starts, axis=1)
        if _table_first(scores):  # reduced along the table's rows (torch is slow on the strided view)
            return scores.T.view(len(self.groups), self.group_size, len(scores)).amax(dim=1).T.float().numpy()
        return scores.view(len(scores), len(self.groups), self.group_size).amax(dim=2).float().numpy()

    def _search_faiss(self, block: np.ndarray, rows: np.ndarray):
        """faiss's float32 top 2 (IndexFlatL2), certified where the gap between them exceeds twice the error.

        faiss's squared distance |x|² + |v|² - 2<x, v> is within D = (γ_n + 4u)·(|x| + max|v|)² of the exact
        one (each norm and the product within γ_n of their magnitudes, two float32 additions), so a gap
        above 2·D makes the first the unique nearest, in float64 too.
        """
        if len(self.base) < 2:
            return {int(r): 0 for r in rows}, rows[:0]
        if self.index is None:
            import faiss

            self.index = faiss.IndexFlatL2(self.base.shape[1])
            self.index.add(self.base)
        x = np.ascontiguousarray(block[rows])
        distances, found = self.index.search(x, 2)
        reach = np.linalg.norm(x.astype(np.float64), axis=1) + self.norms.max()
        error = (gamma(self.base.shape[1]) + 4 * U32) * reach**2 * SAFETY * 1.01
        certain = (distances[:, 1].astype(np.float64) - distances[:, 0] > 2 * error) & (found[:, 0] >= 0)
        answered = dict(zip(rows[certain].tolist(), found[certain, 0].tolist()))
        self.stats.add("faiss", len(answered))
        return answered, rows[~certain]

    def _rerank(self, block, rows, hit_rows, hit_cols) -> dict[int, int]:
        """Float64 re-rank of short lists: candidate ``hit_cols[i]`` (sorted position) for query
        ``rows[hit_rows[i]]``; every query of ``rows`` with at least one candidate is answered."""
        self.stats.pairs += len(hit_rows)
        x64 = block[rows].astype(np.float64)
        distances = np.empty(len(hit_rows))
        for start in range(0, len(hit_rows), PAIR_CHUNK):
            part = slice(start, start + PAIR_CHUNK)
            distances[part] = ((x64[hit_rows[part]] - self.base[hit_cols[part]].astype(np.float64)) ** 2).sum(axis=1)
        ranked = np.lexsort((self.order[hit_cols], distances, hit_rows))  # nearest, then smaller original position
        first = np.ones(len(ranked), dtype=bool)
        first[1:] = hit_rows[ranked][1:] != hit_rows[ranked][:-1]
        best = ranked[first]
        return dict(zip(rows[hit_rows[best]].tolist(), hit_cols[best].tolist()))


def _table_first(scores) -> bool:
    """Whether torch ``scores`` (queries, width) are a view of a (width, queries) product."""
    return scores.stride(0) == 1 and len(scores) > 1


def _hits(scores, rows: np.ndarray, first: int, last: int, limits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in ``rows``, column in ``first:last``) of every score of queries ``rows`` that reaches the
    query's limit (float32 ``limits``, one per row), in no particular order."""
    if isinstance(scores, np.ndarray):
        return np.nonzero(scores[rows, first:last] >= limits[:, None])
    import torch

    # compared in float32; NumPy finds the hits in the mask far faster than torch.nonzero
    if _table_first(scores):  # the group's rows for these queries, (columns, queries)
        part = scores.T[first:last].index_select(1, torch.from_numpy(rows))
        column, query = np.divmod(np.flatnonzero((part >= torch.from_numpy(limits)[None, :]).numpy()), len(rows))
    else:
        part = scores[torch.from_numpy(rows), first:last]
        query, column = np.divmod(np.flatnonzero((part >= torch.from_numpy(limits)[:, None]).numpy()), last - first)
    return query, column
