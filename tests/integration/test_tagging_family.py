"""A second task family on the same cell protocol: token tagging on a small synthetic corpus.

The task below is a plugin-style component (it lives in this test, not in tasks/): sentences of
single-WordPiece words, each tagged 1 when it is a person's first name and 0 otherwise. Its server is
``bench.models.servers.TaggingServer``. Every shipped defense that releases text or token vectors runs
through it unchanged (the defense files know nothing of tagging), and the engine alone trains, predicts,
scores and hands the release to the inversion attack.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from bench import DEFENSES, Examples, Metric, SpanDefense, TaskData, TokenDefense, TokenTask, register_task
from bench.engine.runner import make_spec, run_cell

NAMES = ["john", "mary", "james", "anna", "peter", "paul", "susan", "david", "laura", "robert"]
WORDS = ["the", "city", "went", "home", "with", "a", "friend", "after", "work", "and", "saw", "river",
         "old", "house", "near", "market", "red", "car", "at", "night"]


@register_task("toy-tagging")
@dataclass
class ToyTagging(TokenTask):
    """Synthetic first-name tagging: one tag per word; every word is one regular WordPiece."""

    metrics = (Metric("tag_accuracy", True, "fraction of released tokens tagged correctly"),)
    protocols = ("tokens",)
    num_labels = 2
    default_n_train, default_n_eval = 200, 60

    def load(self, n_train, n_eval, seed):
        """Seeded sentences of 5-9 words, a third of them names."""
        rng = np.random.default_rng(seed)

        def split(n):
            texts, labels = [], []
            for _ in range(n):
                tags = (rng.random(rng.integers(5, 10)) < 0.33).astype(int)
                words = [NAMES[rng.integers(len(NAMES))] if tag else WORDS[rng.integers(len(WORDS))] for tag in tags]
                texts.append(" ".join(words))
                labels.append(tags.tolist())
            array = np.empty(n, dtype=object)
            array[:] = labels
            return Examples(tuple(texts), array)

        return TaskData(split(n_train), split(n_eval), "synthetic:toy-tagging")

    def server(self, spec, training):
        """A token tagger on the server's encoder."""
        from bench.models.servers import TaggingServer

        return TaggingServer(2, training, spec.seed)

    def score(self, predictions, labels):
        """Token-level tag accuracy."""
        pairs = [(np.asarray(p), np.asarray(t)[: len(p)]) for p, t in zip(predictions, labels)]
        hits = sum(int((p == t).sum()) for p, t in pairs)
        return {"tag_accuracy": hits / max(1, sum(len(p) for p, _ in pairs))}


# span defenses rewrite declared spans and release rewritten text (tests/integration/test_span_cells.py)
TEXT_DEFENSES = sorted(n for n in DEFENSES.names() if issubclass(DEFENSES.get(n), TokenDefense)
                       and not issubclass(DEFENSES.get(n), SpanDefense))


def test_every_token_defense_is_offered_to_the_tagging_family():
    assert {"none", "dchi-text", "dchi-token", "santext", "santext-plus"} <= set(TEXT_DEFENSES)


@pytest.mark.parametrize("defense", TEXT_DEFENSES)
def test_text_releasing_defenses_run_unchanged_on_a_tagging_task(defense):
    # dp-mlm's masked LM at the smoke budget (one layer, trained in seconds): the full offline MLM takes minutes
    spec = make_spec(task="toy-tagging", defense=defense, attack="inversion", attack_args="bayes=false",
                     training_args="epochs=20,lr=0.002", smoke=defense == "dp-mlm")
    record = run_cell(spec)
    assert record.notes["protocol"] == "tokens"
    assert 0.0 <= record.metrics["utility/tag_accuracy"] <= 1.0
    assert 0.0 <= record.metrics["privacy/inversion/token_accuracy"] <= 1.0
    assert 0.0 <= record.metrics["utility/probe_tag_accuracy"] <= 1.0  # the convex probe on the same tokens
    if defense == "none":  # undefended: the tagger learns the names, and every token is released as it is
        assert record.metrics["utility/tag_accuracy"] > 0.95
        assert record.metrics["utility/probe_tag_accuracy"] > 0.95  # a name is linearly separable here too
        assert record.metrics["privacy/inversion/token_accuracy"] == 1.0


def test_a_representation_only_defense_is_refused_before_anything_runs():
    from bench import BenchError

    with pytest.raises(BenchError, match="no client part this task's server can train from"):
        make_spec(task="toy-tagging", defense="texthide")
