"""Masked-LM support: BERT masking, the soft MLM loss, the public corpus (no model needed)."""

import numpy as np
import pytest
import torch

from bench import BenchError
from bench.adaptation import AdaptationConfig, adaptation_key, bert_mask, soft_mlm_loss
from bench.public_corpus import public_corpus


def test_bert_mask_takes_15_percent_of_regular_tokens_capped_at_20():
    regular = np.arange(10, 1000)
    ids = np.array([101] + list(range(10, 110)) + [102])  # 100 regular tokens between two specials
    positions, how = bert_mask(ids, regular, np.random.default_rng(0))
    assert len(positions) == 15 and np.isin(ids[positions], regular).all()
    long = np.arange(10, 410)
    assert len(bert_mask(long, regular, np.random.default_rng(0))[0]) == 20
    shown = np.concatenate([bert_mask(long, regular, np.random.default_rng(s))[1] for s in range(200)])
    assert abs((shown == 0).mean() - 0.8) < 0.05 and abs((shown == 2).mean() - 0.1) < 0.05


def test_soft_loss_weights_each_masked_position_once():
    logits = torch.zeros(1, 3, 4)
    logits[0, 1, 2] = 10.0
    hard = soft_mlm_loss(logits, np.array([[0, 1]]), np.array([2]), np.array([1.0]))
    soft = soft_mlm_loss(logits, np.array([[0, 1], [0, 1]]), np.array([2, 3]), np.array([0.5, 0.5]))
    assert hard < 0.01 < soft  # splitting the target's mass onto an unlikely token costs


def test_adaptation_key_covers_mechanism_objective_and_corpus():
    base = adaptation_key("minilm", {"defense": "dchi-token", "eta": 60.0}, AdaptationConfig("denoising"), "h")
    assert base != adaptation_key("minilm", {"defense": "dchi-token", "eta": 61.0}, AdaptationConfig("denoising"), "h")
    assert base != adaptation_key("minilm", {"defense": "dchi-token", "eta": 60.0}, AdaptationConfig("prob"), "h")
    assert base != adaptation_key("minilm", {"defense": "dchi-token", "eta": 60.0}, AdaptationConfig("denoising"), "g")
    with pytest.raises(BenchError, match="vanilla, prob, denoising"):
        AdaptationConfig("mlm")


def test_public_corpus_is_seeded_hashed_and_leaves_out_the_measured_task(tiny_data_dir_with_squad):
    texts, description, digest = public_corpus("auto", None, 5, seed=0)
    again = public_corpus("auto", None, 5, seed=0)
    assert len(texts) == 5 and again[2] == digest and public_corpus("auto", None, 5, seed=1)[2] != digest
    kept, description, _ = public_corpus("auto", "conll2003", None)
    assert "left out conll2003" in description and all("Reuters" not in t for t in kept)
    with pytest.raises(BenchError, match="unknown public corpus"):
        public_corpus("not a corpus!")
    with pytest.raises(BenchError, match="evaluation data"):
        public_corpus("squad", "squad")


@pytest.fixture
def tiny_data_dir_with_squad(tmp_path, monkeypatch):
    import json
    import zipfile

    (tmp_path / "squad").mkdir()
    paragraphs = [{"context": f"Sentence number {i} is here. Another one follows {i} now."} for i in range(6)]
    with zipfile.ZipFile(tmp_path / "squad" / "dev-v1.1.json.zip", "w") as archive:
        archive.writestr("dev-v1.1.json", json.dumps({"data": [{"paragraphs": paragraphs}]}))
    (tmp_path / "conll2003").mkdir()
    (tmp_path / "conll2003" / "eng.train").write_text(
        "-DOCSTART- -X- O O\n\nReuters NNP I-NP I-ORG\nsaid VBD I-VP O\non IN I-PP O\nMonday NNP I-NP O\n\n")
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    return tmp_path
