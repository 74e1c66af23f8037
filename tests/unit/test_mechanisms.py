"""Public mechanism math: d_chi noise and exact nearest-row search."""

import numpy as np
import pytest

from bench import BenchError
from bench.privacy.mechanisms import dchi_noise, nearest_tokens, regular_token_ids


def test_dchi_noise_radius_and_direction():
    rng = np.random.default_rng(0)
    noise = dchi_noise(20000, 16, eta=4.0, rng=rng)
    norms = np.linalg.norm(noise, axis=1)
    assert abs(norms.mean() - 16 / 4.0) < 0.05  # Gamma(n, 1/eta) has mean n/eta
    assert abs(norms.var() - 16 / 4.0**2) < 0.1  # and variance n/eta^2
    directions = noise / norms[:, None]
    assert np.abs(directions.mean(axis=0)).max() < 0.02  # isotropic


def test_dchi_noise_is_seeded():
    a = dchi_noise(5, 8, 1.0, np.random.default_rng(1))
    assert np.array_equal(a, dchi_noise(5, 8, 1.0, np.random.default_rng(1)))
    assert not np.array_equal(a, dchi_noise(5, 8, 1.0, np.random.default_rng(2)))


def test_dchi_noise_rejects_nonpositive_eta():
    with pytest.raises(BenchError, match="eta must be > 0"):
        dchi_noise(1, 4, 0.0, np.random.default_rng(0))


def test_nearest_tokens_equal_brute_force_and_reuse_one_search_per_table():
    from bench.privacy.mechanisms import candidate_search

    rng = np.random.default_rng(0)
    table, candidates = rng.standard_normal((500, 32)), np.sort(rng.choice(500, size=300, replace=False))
    queries = [rng.standard_normal((n, 32)) * 2 for n in (7, 0, 193)]
    flat = np.concatenate(queries)
    brute = candidates[((flat[:, None, :] - table[candidates][None]) ** 2).sum(-1).argmin(axis=1)]
    found = nearest_tokens(queries, table, candidates)
    assert [len(x) for x in found] == [7, 0, 193] and np.array_equal(np.concatenate(found), brute)
    assert candidate_search(table, candidates) is candidate_search(table, candidates)
    other = table[::-1].copy()  # another table: another search, never the cached one
    assert candidate_search(other, candidates) is not candidate_search(table, candidates)
    brute_other = candidates[((flat[:, None, :] - other[candidates][None]) ** 2).sum(-1).argmin(axis=1)]
    assert np.array_equal(np.concatenate(nearest_tokens(queries, other, candidates)), brute_other)


def test_regular_tokens_exclude_special_and_unused():
    vocab = {"[PAD]": 0, "[unused0]": 1, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103,
             "the": 1996, "##s": 2015}
    assert regular_token_ids(vocab).tolist() == [1996, 2015]


def test_dchi_text_is_the_exact_nearest_candidate_of_the_noisy_vector():
    from bench.privacy.mechanisms import dchi_token_text, dchi_token_vectors

    rng = np.random.default_rng(0)
    table = rng.standard_normal((300, 16)).astype(np.float32)
    candidates = np.arange(5, 300)  # rows 0-4 play the special tokens: never outputs
    ids = [rng.integers(5, 300, size=n) for n in (3, 7, 1)]
    released = dchi_token_text(ids, table, candidates, 2.0, np.random.default_rng(9))
    noisy = np.concatenate(dchi_token_vectors(ids, table, 2.0, np.random.default_rng(9)))
    brute = candidates[((noisy[:, None] - table[candidates][None]) ** 2).sum(-1).argmin(1)]
    assert [len(x) for x in released] == [3, 7, 1]
    assert np.array_equal(np.concatenate(released), brute)
    assert np.all(np.concatenate(released) >= 5)


def test_dchi_text_keeps_tokens_at_small_noise_and_changes_them_at_large():
    from bench.privacy.mechanisms import dchi_token_text

    rng = np.random.default_rng(1)
    table = rng.standard_normal((200, 16)).astype(np.float32)
    ids = [rng.integers(0, 200, size=500)]
    candidates = np.arange(200)
    kept = lambda eta: np.mean(dchi_token_text(ids, table, candidates, eta, np.random.default_rng(2))[0] == ids[0])  # noqa: E731
    assert kept(1e4) == 1.0 and kept(0.5) < 0.1
