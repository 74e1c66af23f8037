"""Membership inference cells on real SST-2 slices with the real frozen encoder: the check cell, and the query a
token sanitizer's client sends."""

from __future__ import annotations

import numpy as np
import pytest

from tests.integration.conftest import bench_run


def test_the_check_cell_runs(tmp_path):
    record = bench_run("--task", "sst2", "--defense", "none", "--attack", "membership", "--check", results=tmp_path)
    m, notes = record["metrics"], record["notes"]
    assert notes["membership_shadows"] == 4 and notes["membership_candidates"] == 2 * 32
    for prefix in ("privacy", "random"):
        assert 0.0 <= m[f"{prefix}/membership/auc"] <= 1.0
        assert 0.0 <= m[f"{prefix}/membership/tpr_at_fpr_1pct"] <= 1.0


def test_a_token_sanitizers_server_is_queried_with_freshly_privatized_text():
    from bench.engine.cell import run_defense
    from bench.engine.runner import make_spec

    spec = make_spec(task="sst2", defense="dchi-token", defense_args="eta=10", attack="membership", n_train=40,
                     n_eval=20, training_args="epochs=5")
    _, output, kind, path = run_defense(spec)
    data = output.release(kind).data
    assert path.name == "tokens" and "privatized" in data.query_form
    texts = list(data.candidates)
    first, second = (data.query(texts, data.labels, np.random.default_rng(seed))[0] for seed in (0, 1))
    assert first.shape == (40, 2) and not np.allclose(first, second)  # each query is a fresh draw
    # from the adversary's generator alone
    assert np.allclose(first, data.query(texts, data.labels, np.random.default_rng(0))[0])


@pytest.mark.parametrize("method", ["loss", "lira-offline"])
def test_each_method_runs_on_the_real_encoder(method):
    from bench.engine.runner import make_spec, run_cell

    record = run_cell(make_spec(task="sst2", defense="none", attack="membership", n_train=40, n_eval=20,
                                attack_args=f"method={method},shadows=2", training_args="epochs=5"))
    assert 0.0 <= record.metrics["privacy/membership/auc"] <= 1.0


def test_a_tagger_trained_on_ndd_rewrites_is_attacked_token_by_token():
    from bench.engine.cell import run_defense
    from bench.engine.runner import make_spec, run_cell

    args = dict(task="conll2003", defense="ndd", defense_args="mode=substitutive,select=random", attack="membership",
                n_train=40, n_eval=20, training_args="epochs=3")
    _, output, kind, path = run_defense(make_spec(**args))
    data = output.release(kind).data
    logits, tags, owners = data.query(list(data.candidates), data.labels, np.random.default_rng(0))
    assert path.name == "tokens" and logits.shape == (len(tags), 9) and set(owners) == set(range(40))
    record = run_cell(make_spec(**args, attack_args="method=lira-offline,shadows=2"))
    assert 0.0 <= record.metrics["privacy/membership/auc"] <= 1.0
