"""TextHide against RSS with all-MiniLM-L6-v2 on real SST-2 and CoLA slices.

These check the qualitative pattern of TextHide Table 3, not its numbers: the offline setting
differs from the paper's (a frozen 384-dimensional MiniLM instead of fine-tuned bert-base-cased,
slices instead of whole datasets).
"""

import json

import pytest

from bench.engine.runner import make_spec, run_cell
from tests.integration.conftest import bench_run

PATTERN_SLICE = {"n_train": 2000, "n_eval": 500, "training_args": "epochs=1"}  # utility not checked here


def rss(task, **defense):
    spec = make_spec(task=task, defense="texthide" if defense else "none", defense_args=defense,
                     attack="rss", **PATTERN_SLICE)
    return run_cell(spec).metrics


@pytest.mark.parametrize("task", ["sst2", "cola"])
def test_table3_pattern(task):
    baseline, mix_only, texthide = rss(task), rss(task, m=0, k=4), rss(task, m=256, k=4)
    assert baseline["privacy/rss/identity"] >= 0.95
    for metric in ("identity", "jcdist", "tfidf"):
        gap = abs(texthide[f"privacy/rss/{metric}"] - texthide[f"random/rss/{metric}"])
        assert gap <= 0.03, f"{metric}: TextHide {gap:.3f} away from random"
    assert texthide["privacy/rss/identity"] < mix_only["privacy/rss/identity"] < baseline["privacy/rss/identity"]


def test_main_job_acceptance(tmp_path):
    """`bench run --defense texthide --attack rss` with every default, as the README runs it."""
    record = bench_run("--defense", "texthide", "--attack", "rss", results=tmp_path)
    metrics = record["metrics"]
    assert record["spec"]["defense_args"] == {"m": 256, "k": 4} and record["spec"]["task"] == "sst2"
    assert metrics["utility/accuracy"] >= 0.70
    assert abs(metrics["privacy/rss/identity"] - metrics["random/rss/identity"]) <= 0.03
    lines = (tmp_path / "records" / "texthide.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["run_id"] == record["run_id"]
    # the undefended release against RSS (identity >= 0.95) is test_table3_pattern's baseline


def test_finetune_mode_trains_the_encoder_through_texthide(monkeypatch, tmp_path):
    """The encoder's weights change, and fine-tuned features never enter the shared cache."""
    import torch

    from bench.engine.paths import CellContext

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    copies = []
    original = CellContext.fresh_encoder

    def keep(cell):
        encoder = original(cell)
        copies.append((encoder, [p.detach().clone() for p in encoder.model.parameters()]))
        return encoder

    monkeypatch.setattr(CellContext, "fresh_encoder", keep)
    spec = make_spec(defense="texthide", attack="rss", mode="finetune", n_train=32, n_eval=16,
                     training_args="epochs=1,batch_size=8,lr=0.001")
    record = run_cell(spec)
    encoder, before = copies[0]
    assert any(not torch.equal(a, b) for a, b in zip(before, encoder.model.parameters()))
    assert 0.0 <= record.metrics["utility/accuracy"] <= 1.0
    cached = list((tmp_path / "cache").rglob("*.npy"))
    assert len(cached) == 1  # only the pretrained SBERT features of the corpus (for SBERTsim)


@pytest.mark.parametrize("traffic", ["inference", "training"])
def test_abs_rss_on_each_traffic_is_recorded(tmp_path, traffic):
    """`bench run --defense texthide --attack abs-rss --check`: the inference queries (masked, unmixed) are found
    whole; the training traffic (mixed with k - 1 others) is not, and each record names its traffic."""
    record = bench_run("--task", "sst2", "--defense", "texthide", "--attack", "abs-rss", "--traffic", traffic,
                       "--check", "--no-reuse", results=tmp_path)
    identity = record["metrics"]["privacy/abs-rss/identity"]
    assert record["notes"]["traffic"] == traffic and record["notes"]["attacked_rows"] == 32
    assert identity == 1.0 if traffic == "inference" else identity < 0.6
    assert record["metrics"]["random/abs-rss/identity"] < 0.2
