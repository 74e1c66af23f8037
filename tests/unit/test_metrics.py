"""Similarity metrics and exact neighbour search."""

import numpy as np
import pytest

from bench.core.metrics import METRICS, jaccard_words, metric_info, tfidf_cosine
from bench.privacy.neighbours import cosine_search


def test_jaccard_is_word_overlap_over_union():
    score = jaccard_words(["the cat sat", "a b"], ["the cat ran", "c d"])
    assert np.allclose(score, [2 / 4, 0.0])


def test_tfidf_cosine_is_one_for_identical_and_zero_for_disjoint():
    corpus = ["the cat sat", "dogs bark loudly", "birds sing"]
    score = tfidf_cosine(["the cat sat", "dogs bark loudly"], ["the cat sat", "birds sing"], corpus)
    assert np.allclose(score, [1.0, 0.0])


def test_cosine_search_matches_brute_force():
    rng = np.random.default_rng(0)
    base, queries = rng.standard_normal((200, 24)), rng.standard_normal((30, 24))
    _, found = cosine_search(base, queries, k=1)
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    expected = (unit(queries) @ unit(base).T).argmax(axis=1)
    assert np.array_equal(found[:, 0], expected)


def test_metric_directions_are_looked_up_by_name():
    assert metric_info("privacy/rss/identity") is METRICS["identity"]
    with pytest.raises(KeyError, match="not declared"):
        metric_info("utility/bleu")
