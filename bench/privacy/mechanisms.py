"""Public mechanism math shared by defenses and attacks (the adversary knows these mechanisms).

d_chi-privacy noise (Feyisetan et al. 2020): N = r·u with u uniform on the unit sphere of R^n and
r ~ Gamma(shape n, scale 1/eta), so the density of N is proportional to exp(-eta·||N||).
Exact nearest-neighbour search over an embedding table (bench.privacy.search: low-precision scores with a
certified error bound, re-ranked in float64): an approximate index would change the mechanism's output
distribution.
"""

from __future__ import annotations

import re

import numpy as np

from bench.core.params import require
from bench.privacy.search import CertifiedSearch

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


def released_token_ids(tokenizer) -> np.ndarray:
    """Ids a client may send: the regular WordPieces, and [MASK], which only a span-masking defense writes."""
    ids = regular_token_ids(tokenizer.get_vocab())
    mask = getattr(tokenizer, "mask_token_id", None)
    return np.union1d(ids, [mask]).astype(np.int64) if mask is not None else ids


def client_token_ids(encoder, texts) -> list[np.ndarray]:
    """What a client sends: each text's regular WordPiece ids, and [MASK] where a span defense wrote it (the
    other special tokens, [UNK] among them, are never inputs)."""
    released = released_token_ids(encoder.tokenizer)
    sentences = encoder.token_ids(list(texts))
    size = max([int(released.max(initial=-1)) + 1] + [int(ids.max(initial=-1)) + 1 for ids in sentences])
    kept = np.zeros(size, dtype=bool)  # a lookup table: one pass per sentence, not a set search
    kept[released] = True
    return [ids[kept[ids]] for ids in sentences]


def _split(flat: np.ndarray, lengths: list[int]) -> list[np.ndarray]:
    return np.split(flat, np.cumsum(lengths)[:-1]) if lengths else []


def dchi_token_vectors(
    ids: list[np.ndarray], table: np.ndarray, eta: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """M_rep: each token's input embedding plus its own d_chi noise, per sentence ``(len, dim)``."""
    flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    noisy = table[flat] + dchi_noise(len(flat), table.shape[1], eta, rng)
    return _split(noisy, [len(x) for x in ids])


_BUILT: dict[tuple[str, int, int], tuple[np.ndarray, np.ndarray, object]] = {}
CACHED_BUILDS = 12  # (kind, table, candidates) entries kept between calls


def cached_build(kind: str, table: np.ndarray, candidates: np.ndarray) -> object | None:
    """What ``kind`` built for this table and candidate set, if it is still cached (else None)."""
    hit = _BUILT.get((kind, id(table), id(candidates)))
    return hit[2] if hit is not None and hit[0] is table and hit[1] is candidates else None


def _built_once(kind: str, table: np.ndarray, candidates: np.ndarray, build):
    """``build()`` for this (table, candidates) pair of arrays, kept between calls.

    Callers privatize many small batches against one table (pretraining, channel estimates): rebuilding an
    index or a gathered table each time cost more than the search. The entry keeps both arrays, so their
    ids cannot be reused by other arrays while it lives.
    """
    key = (kind, id(table), id(candidates))
    hit = _BUILT.get(key)
    if hit is not None and hit[0] is table and hit[1] is candidates:
        return hit[2]
    value = build()
    if len(_BUILT) >= CACHED_BUILDS:
        _BUILT.pop(next(iter(_BUILT)))
    _BUILT[key] = (table, candidates, value)
    return value


def candidate_search(table: np.ndarray, candidates: np.ndarray):
    """The certified exact search over ``table[candidates]`` (bench.privacy.search), built once per pair."""
    return _built_once("search", table, candidates, lambda: CertifiedSearch(table[candidates]))


def candidate_rows(table: np.ndarray, candidates: np.ndarray):
    """``table[candidates]`` as a contiguous torch tensor, gathered once per (table, candidates) pair."""
    import torch

    return _built_once("rows", table, candidates,
                       lambda: torch.from_numpy(np.ascontiguousarray(table[candidates])))


def candidate_sq_norms(table: np.ndarray, candidates: np.ndarray):
    """The squared norms of ``candidate_rows`` (float32 torch), computed once per (table, candidates) pair."""
    return _built_once("norms", table, candidates,
                       lambda: candidate_rows(table, candidates).float().square().sum(dim=1))


def nearest_tokens(vectors: list[np.ndarray], table: np.ndarray, candidates: np.ndarray) -> list[np.ndarray]:
    """Per sentence, the ``candidates`` id whose embedding is nearest to each vector: exactly the float64
    argmin of the squared distance between the float32 vector and the float32 embedding (ties: the
    earlier candidate)."""
    lengths = [len(x) for x in vectors]
    if not sum(lengths):
        return [np.zeros(0, dtype=np.int64) for _ in lengths]
    found = candidate_search(table, candidates).nearest(np.concatenate(vectors))
    return _split(candidates[found], lengths)


def dchi_token_text(
    ids: list[np.ndarray], table: np.ndarray, candidates: np.ndarray, eta: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """M_txt: the token nearest (exactly) to each noisy embedding, among ``candidates`` ids."""
    return nearest_tokens(dchi_token_vectors(ids, table, eta, rng), table, candidates)


def embedding_table(encoder) -> np.ndarray:
    """The encoder's public input embedding table as float32 NumPy ``(vocab, dim)``."""
    return encoder.input_embeddings().detach().float().cpu().numpy()


def euclidean_distances(rows, table, table_sq_norms=None):
    """Euclidean distances as float64 ``(len(rows), len(table))`` (torch tensors in and out).

    Computed in float32 as sqrt(|x|^2 + |y|^2 - 2 x.y), one matrix product (~1e-5 absolute error, 6x faster
    than the direct float64 path; ``table_sq_norms``, the table's squared row norms, saves recomputing them).
    """
    rows, table = rows.float(), table.float()
    if table_sq_norms is None:
        table_sq_norms = table.square().sum(dim=1)
    squared = table_sq_norms.float().addmm(rows, table.T, alpha=-2).add_(rows.square().sum(dim=1, keepdim=True))
    return squared.clamp_min_(0).sqrt_().double()


def exponential_log_probs(rows, table, table_sq_norms=None, *, scale: float):
    """log Pr[y|x] ∝ -scale·||x - y|| over the rows of ``table``, for each row x of ``rows``."""
    import torch

    return torch.log_softmax(-scale * euclidean_distances(rows, table, table_sq_norms), dim=1)


class ExponentialRows:
    """The exponential mechanism's CDF rows kept across calls (least recently used first out).

    For callers that privatize many small batches with one (table, candidates, eps), such as
    pretraining on the fly: text is Zipfian, so most tokens of a batch were seen before.
    """

    def __init__(self, capacity: int = 4096) -> None:
        from collections import OrderedDict

        self.capacity = capacity  # rows of len(candidates) float64 each (236 KB for 29,523 candidates)
        self.rows: OrderedDict[tuple[int, int, int, float], np.ndarray] = OrderedDict()
        self.owners: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # keeps the keyed arrays alive

    def get(self, table: np.ndarray, candidates: np.ndarray, eps: float, token: int) -> np.ndarray | None:
        """The cached CDF row of ``token``, or None."""
        owner = self.owners.get((id(table), id(candidates)))
        if owner is None or owner[0] is not table or owner[1] is not candidates:
            return None
        key = (id(table), id(candidates), token, eps)
        row = self.rows.get(key)
        if row is not None:
            self.rows.move_to_end(key)
        return row

    def put(self, table: np.ndarray, candidates: np.ndarray, eps: float, token: int, row: np.ndarray) -> None:
        """Keep ``row`` as ``token``'s CDF row."""
        self.owners[(id(table), id(candidates))] = (table, candidates)
        self.rows[(id(table), id(candidates), token, eps)] = row
        while len(self.rows) > self.capacity:
            self.rows.popitem(last=False)


def exponential_sample(
    tokens: np.ndarray, table: np.ndarray, candidates: np.ndarray, eps: float, rng: np.random.Generator,
    chunk: int = 256, rows: ExponentialRows | None = None, block: int = 16, segment: int = 64,
) -> np.ndarray:
    """Exponential mechanism: each token id replaced by a ``candidates`` id y drawn with
    Pr[y|x] ∝ exp(-eps·||phi(x) - phi(y)||/2).

    The distribution depends on the input token only, so one row is computed per distinct token
    (``chunk`` rows at a time, never a |V|×|V| matrix: one matrix product per chunk) and every occurrence
    samples from it by inverse CDF in two levels: each row's float32 weights are summed (float64) over runs of
    ``segment`` candidates, an occurrence's uniform scaled by its row's total picks the run by one binary search
    over the running sums of the runs, and a float64 running sum inside that run alone picks the candidate.
    This is the same inverse CDF as one running sum along the row (a draw differs only where the uniform lies
    within float64 rounding of a step), without a sequential pass over every weight. The passes after the
    product go ``block`` rows at a time, while those rows are in cache. With ``rows``, whole CDF rows are kept
    and reused across calls: the same distribution and the same uniforms, each searched in its own row.
    """
    require(eps > 0, f"eps must be > 0, got {eps}.")
    tokens = np.asarray(tokens, dtype=np.int64)
    out = np.empty(len(tokens), dtype=np.int64)
    uniforms = rng.random(len(tokens))
    if rows is not None:
        return _sample_cached_rows(tokens, uniforms, table, candidates, eps, rows, chunk, out)
    require(block >= 1, f"block must be >= 1, got {block}.")
    require(segment >= 1, f"segment must be >= 1, got {segment}.")
    distinct, inverse, by_row, row_starts = _grouped_occurrences(tokens)
    for first in range(0, len(distinct), chunk):
        part = distinct[first : first + chunk]
        squared, sq_norms = _squared_distances(table, part, candidates)
        for top in range(0, len(part), block):
            weights = _exponential_weights(squared[top : top + block], sq_norms[top : top + block], eps)
            row = first + top
            occurrences = by_row[row_starts[row] : row_starts[row + len(weights)]]
            picked = _inverse_cdf(weights, inverse[occurrences] - row, uniforms[occurrences], segment)
            out[occurrences] = candidates[picked]
    return out


def _inverse_cdf(weights: np.ndarray, rows: np.ndarray, uniforms: np.ndarray, segment: int) -> np.ndarray:
    """For each (row, uniform) pair, the column of ``weights`` (float32, unnormalised, one distribution per row)
    where the row's float64 running sum first exceeds uniform × the row's total, searched run by run."""
    count, width = weights.shape
    runs = -(-width // segment)
    full = width // segment * segment
    run_sums = np.empty((count, runs))
    np.add.reduce(weights[:, :full].reshape(count, -1, segment), axis=2, dtype=np.float64,
                  out=run_sums[:, : full // segment])
    if full < width:
        np.add.reduce(weights[:, full:], axis=1, dtype=np.float64, out=run_sums[:, -1])
    ends = np.cumsum(run_sums.ravel())  # the rows' runs laid end to end: one increasing sequence
    row_end = ends[runs - 1 :: runs]
    row_start = np.concatenate([[0.0], row_end[:-1]])
    targets = row_start[rows] + uniforms * (row_end[rows] - row_start[rows])
    # a target rounded past its row's end stays in the row's last run
    found = np.minimum(np.searchsorted(ends, targets, side="right"), (rows + 1) * runs - 1)
    run = found - rows * runs
    before = np.where(run > 0, ends[np.maximum(found - 1, 0)], row_start[rows])
    columns = run[:, None] * segment + np.arange(segment)
    inside = columns < width
    within = np.where(inside, weights[rows[:, None], np.minimum(columns, width - 1)], 0.0)
    running = np.cumsum(within, axis=1, dtype=np.float64)
    step = (running <= (targets - before)[:, None]).sum(axis=1)
    return np.minimum(run * segment + step, np.minimum(run * segment + segment, width) - 1)


def _grouped_occurrences(tokens: np.ndarray):
    """The distinct tokens, each occurrence's index among them, the occurrences grouped by distinct token
    (ascending within a group), and where each group starts in that grouping (one more entry: the end)."""
    distinct, inverse = np.unique(tokens, return_inverse=True)
    by_row = np.argsort(inverse, kind="stable")
    row_starts = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=len(distinct)))])
    return distinct, inverse, by_row, row_starts


def _weight_rows(table: np.ndarray, tokens: np.ndarray, candidates: np.ndarray, eps: float) -> np.ndarray:
    """exp(-eps/2·(d(x, y) - min_y d(x, y))) for each of ``tokens`` x over the ``candidates`` y, float32
    ``(len(tokens), len(candidates))``: ``_squared_distances``, then ``_exponential_weights`` in place."""
    squared, sq_norms = _squared_distances(table, tokens, candidates)
    return _exponential_weights(squared, sq_norms, eps)


def _squared_distances(table: np.ndarray, tokens: np.ndarray, candidates: np.ndarray):
    """One matrix product for all of ``tokens``: |y|² - 2 x·y over the ``candidates`` y (float32 rows, the
    tokens' own |x|² returned beside them), and -inf where y is x itself, so that its distance comes out
    exactly 0 rather than the square root of the expansion's cancellation error."""
    import torch

    rows = torch.from_numpy(np.ascontiguousarray(table[tokens], dtype=np.float32))
    squared = candidate_sq_norms(table, candidates).float().addmm(rows, candidate_rows(table, candidates).float().T,
                                                                  alpha=-2).numpy()
    sorter = np.argsort(candidates, kind="stable")
    position = np.minimum(np.searchsorted(candidates, tokens, sorter=sorter), len(candidates) - 1)
    own = np.flatnonzero(candidates[sorter[position]] == tokens)
    squared[own, sorter[position[own]]] = -np.inf  # stays -inf when |x|² is added, then clamped to 0
    return squared, np.einsum("ij,ij->i", rows.numpy(), rows.numpy())


def _exponential_weights(squared: np.ndarray, sq_norms: np.ndarray, eps: float) -> np.ndarray:
    """Rows of ``_squared_distances`` turned in place into exp(-eps/2·(d - min d)): distances
    sqrt(|x|² + |y|² - 2 x·y) in float32 (about 1e-5 absolute error). NumPy on one thread: on a shared
    2-core machine torch's threaded elementwise passes cost several times more."""
    squared += sq_norms[:, None]
    np.maximum(squared, 0, out=squared)
    distances = np.sqrt(squared, out=squared)
    distances -= distances.min(axis=1, keepdims=True)
    distances *= -eps / 2
    return np.exp(distances, out=distances)


def _cdf_rows(table: np.ndarray, tokens: np.ndarray, candidates: np.ndarray, eps: float) -> np.ndarray:
    """The exponential mechanism's CDF over the ``candidates`` for each of ``tokens`` (float64 rows)."""
    cdf = np.cumsum(_weight_rows(table, tokens, candidates, eps), axis=1, dtype=np.float64)
    return cdf / cdf[:, -1:]  # exactly 1 at the end of every row


def _sample_cached_rows(tokens, uniforms, table, candidates, eps, rows: ExponentialRows, chunk, out):
    """``exponential_sample`` through the row cache: missing rows computed in chunks, then kept."""
    distinct, _, by_row, row_starts = _grouped_occurrences(tokens)
    cdfs = [rows.get(table, candidates, eps, int(t)) for t in distinct]
    missing = [i for i, row in enumerate(cdfs) if row is None]
    for first in range(0, len(missing), chunk):
        part = missing[first : first + chunk]
        cdf = _cdf_rows(table, distinct[part], candidates, eps)
        for i, row in zip(part, cdf):
            cdfs[i] = row
            rows.put(table, candidates, eps, int(distinct[i]), row)
    width = len(candidates)
    for i, cdf in enumerate(cdfs):
        where = by_row[row_starts[i] : row_starts[i + 1]]  # one slice per token, not a scan of the batch
        out[where] = candidates[np.minimum(np.searchsorted(cdf, uniforms[where], side="right"), width - 1)]
    return out


def least_frequent(counts: np.ndarray, candidates: np.ndarray, fraction: float) -> np.ndarray:
    """The ``fraction`` of ``candidates`` with the lowest counts (ties: higher id first), sorted ids.

    ``counts`` is indexed by token id (SanText+'s sensitive set: the rare words).
    """
    require(0 < fraction <= 1, f"w must be in (0, 1], got {fraction}.")
    size = max(1, round(fraction * len(candidates)))
    order = np.lexsort((-candidates, counts[candidates]))  # ascending count, then descending id
    return np.sort(candidates[order[:size]])


def santext_tokens(
    ids: list[np.ndarray], table: np.ndarray, sensitive: np.ndarray, eps: float, p: float,
    rng: np.random.Generator, rows: ExponentialRows | None = None,
) -> list[np.ndarray]:
    """SanText+ (SanText when ``sensitive`` is the whole vocabulary): sensitive tokens are always
    replaced, other tokens with probability ``p``, by a sensitive token from the exponential mechanism.
    """
    require(0 <= p <= 1, f"p must be in [0, 1], got {p}.")
    flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    replace = np.isin(flat, sensitive) | (rng.random(len(flat)) < p)
    out = flat.copy()
    out[replace] = exponential_sample(flat[replace], table, sensitive, eps, rng, rows=rows)
    return _split(out, [len(x) for x in ids])


def uniform_tokens(ids: list[np.ndarray], candidates: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Every token replaced by a ``candidates`` id drawn uniformly and independently of it."""
    lengths = [len(x) for x in ids]
    return _split(candidates[rng.integers(len(candidates), size=sum(lengths))].astype(np.int64), lengths)


def token_counts(ids: list[np.ndarray], vocab_size: int) -> np.ndarray:
    """Occurrences of every token id in ``ids``, ``(vocab_size,)``."""
    flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    return np.bincount(flat, minlength=vocab_size)
