"""Sentence-pair GLUE tasks with the real encoder on real slices: the server assembles a client's pair
exactly as the tokenizer encodes it, and pair cells record their task's metrics."""

import numpy as np
import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.engine.runner import make_spec, run_cell
from bench.models.loading import load_encoder
from tests.conftest import files_under

PAIR = ("The cat sat on the mat.", "A cat was sitting on a mat!")


def test_assembled_pair_of_ids_equals_the_tokenizers_pair_encoding():
    encoder = load_encoder("minilm")
    (first, second), = encoder.token_ids([PAIR])
    assembled = encoder.model_inputs([(first, second)])
    reference = encoder.tokenizer(*PAIR, return_tensors="pt")
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert assembled[key].tolist() == reference[key].tolist(), key
    assert 1 in assembled["token_type_ids"].tolist()[0]


def test_a_long_pair_is_cut_like_the_tokenizer_cuts_it():
    encoder = load_encoder("minilm")
    long_pair = (" ".join(["word"] * 200), "a short hypothesis")
    (first, second), = encoder.token_ids([long_pair])
    assert len(first) + len(second) + 3 == encoder.max_length and len(second) == 3
    reference = encoder.model_inputs([long_pair])  # text: the tokenizer truncates
    assert encoder.model_inputs([(first, second)])["input_ids"].tolist() == reference["input_ids"].tolist()
    # segments cut separately (as a client's flattened segments are) are fitted together by the server
    whole = encoder.tokenizer(long_pair[0], add_special_tokens=False, truncation=True, max_length=126)["input_ids"]
    fitted = encoder.model_inputs([(np.asarray(whole), second)])
    assert fitted["input_ids"].tolist() == reference["input_ids"].tolist()


def test_assembled_pair_of_vectors_gives_the_features_of_the_text():
    encoder = load_encoder("minilm")
    (first, second), = encoder.token_ids([PAIR])
    table = encoder.input_embeddings().detach().numpy()
    from_vectors = encoder.encode([(table[first], table[second])], use_cache=False)
    from_text = encoder.encode([PAIR], use_cache=False)
    assert np.allclose(from_vectors, from_text, atol=1e-5)
    swapped = encoder.encode([(table[second], table[first])], use_cache=False)
    assert not np.allclose(from_vectors, swapped, atol=1e-3)


@pytest.mark.parametrize("task, defense, args, attack, metrics", [
    ("mrpc", "dchi-text", {"eta": 1000.0}, "inversion", {"f1": (0, 1), "accuracy": (0, 1)}),
    ("stsb", "texthide", {"m": 16, "k": 4}, "rss", {"pearson": (-1, 1), "spearman": (-1, 1)}),
    ("qnli", "none", {}, "rss", {"accuracy": (0, 1)}),
    ("rte", "dchi-token", {"eta": 1000.0}, "inversion", {"accuracy": (0, 1)}),
])
def test_pair_cells_record_the_task_metrics(task, defense, args, attack, metrics):
    spec = make_spec(task=task, defense=defense, defense_args=args, attack=attack, n_train=64, n_eval=32,
                     attack_args={"bayes": False} if attack == "inversion" else {}, training_args="epochs=5")
    record = run_cell(spec)
    # the task's metrics, and the same metrics of the deterministic probe on the frozen features (docs/probe.md)
    probe = {f"probe_{name}": bounds for name, bounds in metrics.items()}
    assert {key.split("/")[1] for key in record.metrics if key.startswith("utility/")} == set(metrics) | set(probe)
    for name, (low, high) in {**metrics, **probe}.items():
        assert low <= record.metrics[f"utility/{name}"] <= high, name
    assert record.sizes == {"n_train": 64, "n_eval": 32}
    if attack == "rss":
        assert 0 <= record.metrics["random/rss/identity"] <= 0.2
    if defense == "none":
        assert record.metrics["privacy/rss/identity"] == 1.0
    if defense.startswith("dchi"):  # almost no noise: nearly every token of both sentences is recovered
        assert record.metrics["privacy/inversion/token_accuracy"] > 0.95
        assert record.metrics["random/inversion/token_accuracy"] < 0.01


def test_rte_check_run_works_offline(tmp_path):
    result = CliRunner().invoke(app, ["run", "--task", "rte", "--defense", "none", "--check",
                                      "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "accuracy" in result.output and files_under(tmp_path) == []
