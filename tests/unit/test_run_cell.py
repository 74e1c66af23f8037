"""run_cell end to end with the mock encoder on tiny synthetic data."""

import numpy as np
import pytest

from bench import ReleaseKind
from bench.core.params import build_component
from bench.core.registry import TASKS
from bench.engine.runner import make_spec, run_cell, run_defense

FAST = "epochs=3"


def test_undefended_rss_finds_every_sentence(tiny_data):
    spec = make_spec(defense="none", attack="rss", attack_args="sbert=mock", encoder="mock", training_args=FAST)
    record = run_cell(spec)
    assert record.metrics["privacy/rss/identity"] == 1.0
    assert record.metrics["random/rss/identity"] < 0.05
    assert record.sizes == {"n_train": 400, "n_eval": 120}
    assert record.config_hash == spec.config_hash() and len(record.data_hash) == 64
    assert set(record.higher_is_better) == set(record.metrics)
    assert record.hardware["cpu_model"] and record.hardware["cpu_capability"]  # results differ in the last bits by CPU


def test_texthide_rss_is_near_random(tiny_data):
    spec = make_spec(defense="texthide", attack="rss", attack_args="sbert=mock", encoder="mock", training_args=FAST)
    metrics = run_cell(spec).metrics
    assert metrics["privacy/rss/identity"] <= metrics["random/rss/identity"] + 0.05


def test_utility_is_learned_on_the_evaluation_split(tiny_data):
    record = run_cell(make_spec(defense="none", encoder="mock", training_args="epochs=20"))
    assert record.metrics["utility/accuracy"] > 0.8  # the synthetic label is one sentiment word
    assert "privacy/rss/identity" not in record.metrics


def release_of(seed):
    spec = make_spec(defense="texthide", defense_args="m=16,k=4", encoder="mock", training_args="epochs=1", seed=seed)
    _, output, _, _ = run_defense(spec)
    return output.releases[ReleaseKind.SENTENCE_EMBEDDINGS].data


def test_same_spec_same_release_other_seed_other_release(tiny_data):
    assert np.array_equal(release_of(0), release_of(0))
    assert not np.array_equal(release_of(0), release_of(1))


def test_missing_dataset_says_both_ways_to_get_it(tmp_path, monkeypatch):
    from bench import BenchError

    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "nothing"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    task = build_component(TASKS.get("sst2"), {})
    with pytest.raises(BenchError, match="BENCH_DATA_DIR.*hub"):
        task.load(10, 10, 0)
