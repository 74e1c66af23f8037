"""Similarity metrics and exact neighbour search."""

import numpy as np
import pytest

from bench import BenchError, Metric
from bench.core.metrics import check_declared, check_values
from bench.core.scores import jaccard_words, tfidf_cosine
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


def test_metric_declarations_are_checked():
    good = (Metric("identity", True, "exact match"), Metric("mse", False, "error", 0.0, float("inf")))
    assert check_declared("attack 'x'", good) == good
    for bad in ((), ("identity",), (Metric("Bad Name", True, "x"),), (good[0], good[0]),
                (Metric("span", True, "x", 1.0, 0.0),)):
        with pytest.raises(BenchError):
            check_declared("attack 'x'", bad)


def test_an_undeclared_computed_metric_is_named():
    with pytest.raises(BenchError, match="bleu"):
        check_values("attack 'x'", (Metric("identity", True, "exact match"),), {"identity": 1.0, "bleu": 0.2})


def test_computed_metrics_come_back_in_declared_order():
    declared = (Metric("accuracy", True, "mean"), Metric("macro_f1", True, "mean"),
                Metric("gender_accuracy", True, "x"))
    computed = {"gender_accuracy": 0.6, "macro_f1": 0.4, "accuracy": 0.5}  # per attribute first, as AIA computes
    assert list(check_values("attack 'aia'", declared, computed).items()) == [
        ("accuracy", 0.5), ("macro_f1", 0.4), ("gender_accuracy", 0.6)]
