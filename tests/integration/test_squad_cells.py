"""SQuAD cells on the real encoder: the reader trained on released training pairs beats trivial guesses.

A small slice (SIZES) with the task's training defaults and defense none. The baselines read the same evaluation
windows: the first three words of the window (three words is about SQuAD's mean answer length), and the three
words right after the window's longest run of question words (a lexical-overlap guess). Figures measured on this
slice are in the assertion comments (2026-11, 2 shared CPU cores; the test took 8.5 minutes at a load of ~8).
"""

from __future__ import annotations

import pytest

from bench.core.examples import data_dir
from bench.engine.runner import make_spec, run_cell
from bench.tasks.squad import FILE, SQuAD, squad_scores

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (data_dir() / "squad" / FILE).is_file(), reason="SQuAD v1.1 dev file missing"),
]
SIZES = {"n_train": 800, "n_eval": 200}


def first_words(question: str, window: str, k: int = 3) -> str:
    """The window's first ``k`` words."""
    return " ".join(window.split(" ")[:k])


def after_overlap(question: str, window: str, k: int = 3) -> str:
    """The ``k`` words after the window's longest run of words that occur in the question."""
    asked = {w.lower().strip("?.,;:!\"'()") for w in question.split(" ")}
    words = window.split(" ")
    best, end, run = 0, 0, 0
    for i, word in enumerate(words):
        run = run + 1 if word.lower().strip("?.,;:!\"'()") in asked else 0
        if run > best:
            best, end = run, i + 1
    return " ".join(words[end:end + k])


def baseline_scores(data, guess) -> dict[str, float]:
    return squad_scores([guess(q, w) for q, w in data.eval.texts], [label["answers"] for label in data.eval.labels])


def test_the_reader_beats_trivial_guesses_on_original_evaluation_text():
    data = SQuAD().load(SIZES["n_train"], SIZES["n_eval"], 0)
    baselines = [baseline_scores(data, guess) for guess in (first_words, after_overlap)]
    record = run_cell(make_spec(task="squad", defense="none", **SIZES))
    metrics = record.metrics
    assert record.notes["protocol"] == "tokens"
    assert record.notes["evaluation_data"].startswith("original")
    assert set(metrics) == {"utility/f1", "utility/em"}
    assert "span_slots" not in record.notes  # no attack reads the spans, so spaCy never looked for them
    assert metrics["utility/em"] <= metrics["utility/f1"]
    best = max(b["f1"] for b in baselines)
    assert best < 0.2  # measured: first words F1 0.049 (EM 0.005), after the overlap F1 0.162 (EM 0.020)
    assert metrics["utility/f1"] > best + 0.05  # measured F1 0.260
    assert metrics["utility/em"] > max(b["em"] for b in baselines) + 0.05  # measured EM 0.115
