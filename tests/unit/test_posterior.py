"""Bayesian inversion: channels are distributions, and the MAP guess follows prior and channel."""

import numpy as np
import pytest

from bench import BenchError
from bench.privacy.mechanisms import santext_tokens
from bench.privacy.posterior import (
    bayes_guesses,
    exponential_log_channel,
    keep_or_scatter_log_channel,
)
from bench.privacy.public import DchiNearestToken, ExponentialMechanism, IdentityTokens

COUNTS = np.array([0, 50, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1])  # token 1 the prior's mode; token 0 never a candidate


def table(rows=12, dim=4, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_exponential_channel_rows_are_distributions(p):
    vocabulary = np.arange(12)
    sensitive = np.array([2, 5, 7, 11])
    log_channel = exponential_log_channel(vocabulary, vocabulary, table(), sensitive, eps=2.0, p=p)
    assert np.allclose(np.exp(log_channel).sum(axis=1), 1.0)
    non_sensitive = np.setdiff1d(vocabulary, sensitive)
    kept = np.exp(log_channel[non_sensitive, non_sensitive])
    assert np.allclose(kept, 1 - p)  # a non-sensitive token can only stay itself or enter V_S


def test_exponential_channel_matches_the_sampler():
    embeddings, sensitive = table(), np.array([1, 3, 4, 8])
    draws = santext_tokens([np.full(30000, 0)], embeddings, sensitive, eps=1.5, p=0.4, rng=np.random.default_rng(0))[0]
    observed = np.array([(draws == y).mean() for y in range(12)])
    expected = np.exp(exponential_log_channel(np.array([0]), np.arange(12), embeddings, sensitive, 1.5, 0.4))[0]
    assert np.abs(observed - expected).max() < 0.01


def test_keep_or_scatter_channel_is_a_distribution():
    outputs = np.arange(6)
    scatter = np.full(6, 1 / 6)
    log_channel = keep_or_scatter_log_channel(np.array([0, 3]), outputs, np.array([0.5, 0.9]), scatter)
    assert np.allclose(np.exp(log_channel).sum(axis=1), 1.0)
    assert np.isclose(np.exp(log_channel[1, 3]), 0.9 + 0.1 / 6)


def test_uninformative_channel_guesses_the_most_frequent_token():
    regular = np.arange(1, 12)
    mechanism = ExponentialMechanism(eps=1e-6, p=1.0, w=1.0)  # output independent of input
    guesses = bayes_guesses([np.array([2, 3, 9])], mechanism, table(), regular, COUNTS, np.random.default_rng(0))
    assert guesses[0].tolist() == [1, 1, 1]


def test_faithful_channel_guesses_the_released_token():
    regular = np.arange(1, 12)
    mechanism = ExponentialMechanism(eps=1e4, p=1.0, w=1.0)  # every token stays itself
    released = [np.array([2, 3]), np.array([9])]
    guesses = bayes_guesses(released, mechanism, table(), regular, COUNTS, np.random.default_rng(0))
    assert [g.tolist() for g in guesses] == [[2, 3], [9]]


def test_simulated_nearest_token_channel_of_a_faithful_mechanism_keeps_every_token():
    regular = np.arange(1, 12)
    inputs, log_channel = DchiNearestToken(eta=1e4).bayes_channel(regular, table(), regular, COUNTS,
                                                                  np.random.default_rng(0), trials=400, support=11)
    assert inputs.tolist() == regular.tolist()
    channel = np.exp(log_channel(inputs))
    totals = channel.sum(axis=1)  # over the outputs: add-one smoothing leaves a little on token 0, never drawn
    assert np.all(totals <= 1.0) and np.all(totals > 0.99)
    assert np.diag(channel).min() > 0.99


@pytest.mark.parametrize("eta, expected", [(1e4, [[2, 3], [9]]), (1e-3, [[1, 1], [1]])])
def test_nearest_token_guess_follows_the_noise(eta, expected):
    released = [np.array([2, 3]), np.array([9])]
    guesses = bayes_guesses(released, DchiNearestToken(eta=eta), table(), np.arange(1, 12), COUNTS,
                            np.random.default_rng(0), trials=200, support=11)
    assert [g.tolist() for g in guesses] == expected  # faithful: the release; uninformative: the prior's mode


def test_unknown_mechanism_is_refused():
    with pytest.raises(BenchError, match="no Bayesian channel"):
        bayes_guesses([np.array([1])], IdentityTokens(), table(), np.arange(12), np.ones(12), np.random.default_rng(0))


def test_uniform_mechanism_releases_every_candidate_equally_and_its_channel_guesses_the_prior_mode():
    from bench.privacy.mechanisms import uniform_tokens
    from bench.privacy.public import UniformTokens

    candidates = np.arange(1, 12)
    ids = [np.full(40000, 2), np.full(2, 7), np.zeros(0, dtype=np.int64)]
    released = uniform_tokens(ids, candidates, np.random.default_rng(0))
    assert [len(x) for x in released] == [40000, 2, 0]
    share = np.bincount(released[0], minlength=12)[1:] / 40000
    assert np.abs(share - 1 / 11).max() < 0.01  # uniform over the candidates, token 2 no likelier than the rest
    assert np.bincount(released[0], minlength=12)[0] == 0  # never outside the candidates
    guesses = bayes_guesses([np.array([2, 3, 9])], UniformTokens(), table(), candidates, COUNTS,
                            np.random.default_rng(0))
    assert guesses[0].tolist() == [1, 1, 1]


def test_uniform_channel_offers_only_the_mode_and_guesses_as_the_full_candidate_set_would():
    from bench.privacy.public import UniformTokens

    class EveryInput(UniformTokens):  # the same flat channel over every candidate input
        def bayes_channel(self, outputs, table, regular, corpus_counts, rng, trials, support):
            inputs = regular[corpus_counts[regular] > 0]
            return inputs, lambda rows: np.zeros((len(rows), len(outputs)))

    counts = np.array([0, 3, 9, 9, 1, 0, 9, 2, 1, 1, 1, 1])  # three tied modes: 2, 3 and 6
    released = [np.array([1, 4, 11, 5]), np.array([7, 7])]
    fast = bayes_guesses(released, UniformTokens(), table(), np.arange(1, 12), counts, np.random.default_rng(0))
    full = bayes_guesses(released, EveryInput(), table(), np.arange(1, 12), counts, np.random.default_rng(0))
    assert [g.tolist() for g in fast] == [g.tolist() for g in full] == [[2, 2, 2, 2], [2, 2]]
