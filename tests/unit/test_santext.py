"""The exponential mechanism of SanText / SanText+ on small tables whose distribution is known."""

import numpy as np
import pytest
from scipy.special import softmax

from bench import BenchError
from bench.engine.runner import make_spec
from bench.privacy.mechanisms import (
    ExponentialRows,
    exponential_sample,
    least_frequent,
    santext_tokens,
    token_counts,
)


def table(rows=6, dim=3, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


def exact_row(embeddings, source, candidates, eps):
    distance = np.linalg.norm(embeddings[candidates] - embeddings[source], axis=1)
    return softmax(-eps * distance / 2)


@pytest.mark.parametrize("eps", [0.5, 3.0])
def test_samples_follow_the_exponential_mechanism(eps):
    embeddings, candidates = table(), np.array([0, 2, 3, 4, 5])
    draws = 40000
    tokens = np.array([1] * draws + [3] * draws)  # two distinct inputs, sampled in one call
    out = exponential_sample(tokens, embeddings, candidates, eps, np.random.default_rng(0), chunk=1)
    assert set(np.unique(out)) <= set(candidates)
    for source, part in ((1, out[:draws]), (3, out[draws:])):
        observed = np.array([(part == c).mean() for c in candidates])
        expected = exact_row(embeddings, source, candidates, eps)
        assert np.abs(observed - expected).max() < 0.01, (observed, expected)


def test_sampling_is_seeded_and_independent_of_chunking():
    embeddings, candidates = table(rows=30, dim=4), np.arange(30)
    tokens = np.random.default_rng(1).integers(0, 30, size=500)
    first = exponential_sample(tokens, embeddings, candidates, 2.0, np.random.default_rng(5), chunk=7)
    assert np.array_equal(first, exponential_sample(tokens, embeddings, candidates, 2.0, np.random.default_rng(5)))
    assert not np.array_equal(first, exponential_sample(tokens, embeddings, candidates, 2.0,
                                                        np.random.default_rng(6)))


def whole_chunk_sample(tokens, embeddings, candidates, eps, rng, chunk):
    """The sampler as first written: each chunk's float32 weights summed in one float64 running sum, searched."""
    distance = np.sqrt(np.maximum(
        (embeddings[candidates] ** 2).sum(1)[None] - 2 * embeddings @ embeddings[candidates].T
        + (embeddings ** 2).sum(1)[:, None], 0)).astype(np.float32)
    distance[candidates, np.arange(len(candidates))] = 0.0
    uniforms, out = rng.random(len(tokens)), np.empty(len(tokens), dtype=np.int64)
    distinct, inverse = np.unique(tokens, return_inverse=True)
    width = len(candidates)
    for first in range(0, len(distinct), chunk):
        rows = distance[distinct[first : first + chunk]]
        weights = np.exp((rows - rows.min(axis=1, keepdims=True)) * np.float32(-eps / 2))
        cumulative = np.cumsum(weights.ravel(), dtype=np.float64)
        ends = cumulative[width - 1 :: width]
        starts = np.concatenate([[0.0], ends[:-1]])
        where = np.flatnonzero((inverse >= first) & (inverse < first + len(rows)))
        local = inverse[where] - first
        targets = starts[local] + uniforms[where] * (ends[local] - starts[local])
        out[where] = candidates[np.clip(np.searchsorted(cumulative, targets, side="right") - local * width, 0,
                                        width - 1)]
    return out


@pytest.mark.parametrize("block,segment", [(1, 64), (3, 1), (16, 7), (64, 64), (16, 512)])
def test_two_level_search_draws_what_one_running_sum_per_chunk_draws(block, segment):
    # runs of `segment` candidates (1: every candidate its own run; 512 > 400: one short run per row; 7 does not
    # divide 400) searched, then a running sum inside one run, against one float64 running sum along the whole
    # chunk: the same inverse CDF, so a draw may differ only where a uniform lies within float rounding of a CDF
    # step, and the independent NumPy reference's float32 distances differ in the last bits too (another product)
    embeddings, candidates = table(rows=400, dim=16, seed=3), np.arange(400)
    tokens = np.random.default_rng(2).integers(0, 400, size=3000)
    for eps in (1.0, 8.0):
        ours = exponential_sample(tokens, embeddings, candidates, eps, np.random.default_rng(7), chunk=37,
                                  block=block, segment=segment)
        plain = whole_chunk_sample(tokens, embeddings, candidates, eps, np.random.default_rng(7), chunk=37)
        assert (ours != plain).sum() <= 2, (ours != plain).sum()
        # rows are independent of one another: the block size changes the passes' grouping, never a draw
        assert np.array_equal(ours, exponential_sample(tokens, embeddings, candidates, eps, np.random.default_rng(7),
                                                       chunk=37, block=5, segment=segment))


def test_a_uniform_at_the_edge_of_a_run_lands_on_the_candidate_whose_step_holds_it():
    # weights 1, 2, 3, 4 in runs of 2: the CDF steps are at 0.1, 0.3, 0.6 and 1.0 of the total
    from bench.privacy.mechanisms import _inverse_cdf

    weights = np.array([[1.0, 2.0, 3.0, 4.0], [4.0, 0.0, 0.0, 6.0]], dtype=np.float32)
    uniforms = np.array([0.0, 0.0999, 0.1, 0.2999, 0.3, 0.5999, 0.6, 0.9999999, 0.39, 0.4, 0.41])
    rows = np.array([0] * 8 + [1] * 3)
    picked = _inverse_cdf(weights, rows, uniforms, segment=2)
    assert picked.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 0, 3, 3]  # zero weights are never drawn


def test_cached_rows_give_the_same_draws_and_are_reused_across_calls():
    embeddings, candidates = table(rows=30, dim=4), np.arange(2, 30)
    tokens = np.random.default_rng(1).integers(0, 30, size=500)
    plain = exponential_sample(tokens, embeddings, candidates, 2.0, np.random.default_rng(5))
    rows = ExponentialRows(capacity=100)
    cached = exponential_sample(tokens, embeddings, candidates, 2.0, np.random.default_rng(5), chunk=7, rows=rows)
    assert np.array_equal(plain, cached) and len(rows.rows) == len(np.unique(tokens))
    row = rows.get(embeddings, candidates, 2.0, int(tokens[0]))
    assert np.allclose(np.diff(row, prepend=0.0), exact_row(embeddings, tokens[0], candidates, 2.0), atol=1e-6)
    again = exponential_sample(tokens, embeddings, candidates, 2.0, np.random.default_rng(5), rows=rows)
    assert np.array_equal(again, plain) and rows.get(embeddings, candidates, 2.0, int(tokens[0])) is row  # reused
    assert rows.get(embeddings, candidates, 3.0, int(tokens[0])) is None  # another eps: another row
    assert rows.get(embeddings.copy(), candidates, 2.0, int(tokens[0])) is None  # another table: never reused
    small = ExponentialRows(capacity=3)
    exponential_sample(tokens, embeddings, candidates, 2.0, np.random.default_rng(5), rows=small)
    assert len(small.rows) == 3


def test_large_eps_keeps_tokens_small_eps_scatters_them():
    embeddings, candidates = table(rows=50, dim=8), np.arange(50)
    tokens = np.repeat(np.arange(50), 20)

    def kept(eps):
        return (exponential_sample(tokens, embeddings, candidates, eps, np.random.default_rng(0)) == tokens).mean()

    assert kept(1000.0) == 1.0
    assert kept(0.01) < 0.1


def test_sensitive_set_is_the_least_frequent_fraction():
    counts = token_counts([np.array([1, 1, 1, 2, 2, 3])], vocab_size=5)
    candidates = np.array([1, 2, 3, 4])
    assert least_frequent(counts, candidates, 0.5).tolist() == [3, 4]  # counts 1 and 0
    assert least_frequent(counts, candidates, 1.0).tolist() == [1, 2, 3, 4]
    assert least_frequent(counts, candidates, 0.01).tolist() == [4]  # at least one token


def test_santext_plus_keeps_non_sensitive_tokens_with_p_zero_and_maps_sensitive_ones_into_the_set():
    embeddings = table(rows=20, dim=4)
    sensitive = np.array([10, 11, 12])
    ids = [np.array([0, 1, 10, 2]), np.array([11, 3])]
    out = santext_tokens(ids, embeddings, sensitive, eps=1.0, p=0.0, rng=np.random.default_rng(0))
    assert out[0][[0, 1, 3]].tolist() == [0, 1, 2] and out[1][1] == 3
    assert out[0][2] in sensitive and out[1][0] in sensitive
    everything = santext_tokens(ids, embeddings, sensitive, eps=1.0, p=1.0, rng=np.random.default_rng(0))
    assert all(np.isin(x, sensitive).all() for x in everything)


@pytest.mark.parametrize(
    "defense, args, message",
    [
        ("santext", {"eps": 0}, "eps must be > 0"),
        ("santext-plus", {"eps": -1}, "eps must be > 0"),
        ("santext-plus", {"p": 1.5}, r"p must be in \[0, 1\]"),
        ("santext-plus", {"p": -0.1}, r"p must be in \[0, 1\]"),
        ("santext-plus", {"w": 0}, r"w must be in \(0, 1\]"),
        ("santext-plus", {"w": 1.2}, r"w must be in \(0, 1\]"),
    ],
)
def test_bad_values_are_refused(tiny_data, defense, args, message):
    with pytest.raises(BenchError, match=message):
        make_spec(defense=defense, defense_args=args, encoder="mock")


def test_santext_has_no_p_or_w(tiny_data):
    with pytest.raises(BenchError):
        make_spec(defense="santext", defense_args={"p": 0.3}, encoder="mock")


def test_a_guarded_mechanism_copied_and_fitted_privatizes_as_the_copy():
    """Privacy-adaptive pretraining deep-copies the release's mechanism and fits the copy: the output check the
    engine wraps around privatize must follow the copy (it called the unfitted original before)."""
    import copy
    from types import SimpleNamespace

    from bench.core.registry import DEFENSES
    from bench.engine.sanity import guard

    defense = guard(DEFENSES.get("santext-plus")(eps=3.0, p=0.3, w=0.5))
    original = defense.token_mechanism()
    copied = copy.deepcopy(original)
    space = SimpleNamespace(table=table(8), format="wordpiece", candidates=np.arange(8))
    ids = [np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7, 1])]
    copied.fit(ids, space)
    out = copied.privatize(ids, space, np.random.default_rng(0))
    assert [len(x) for x in out] == [4, 5]
    with pytest.raises(BenchError, match="call fit before privatize"):
        original.privatize(ids, space, np.random.default_rng(0))
    assert copied.privatize.__self__ is copied  # the check is bound to the copy
