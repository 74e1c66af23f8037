"""GLUE tasks read every offline format, score with their GLUE metrics and split single files safely."""

import numpy as np
import pytest
from typer.testing import CliRunner

from bench import BenchError
from bench.cli.main import app
from bench.core.params import build_component
from bench.core.registry import TASKS
from bench.engine.runner import make_spec, run_cell
from tests.conftest import files_under, synthetic_pairs

PAIR_TASKS = {"mrpc": ("f1", "accuracy"), "stsb": ("pearson", "spearman"), "qqp": ("f1", "accuracy"),
              "qnli": ("accuracy",), "rte": ("accuracy",)}


def load(name, n_train=10**6, n_eval=10**6, seed=0):
    return build_component(TASKS.get(name), {}).load(n_train, n_eval, seed)


def labelled(data):
    return dict(zip(data.train.texts + data.eval.texts, np.concatenate([data.train.labels, data.eval.labels])))


@pytest.mark.parametrize("name", sorted(PAIR_TASKS))
def test_pair_tasks_load_pairs_and_declare_their_glue_metrics(tiny_data, name):
    data = load(name)
    assert all(isinstance(t, tuple) and len(t) == 2 and all(isinstance(s, str) and s for s in t)
               for t in data.train.texts + data.eval.texts)
    assert len(data.train.labels) == len(data.train) and len(data.eval.labels) == len(data.eval)
    task = TASKS.get(name)
    assert task.metric == PAIR_TASKS[name][0]
    assert tuple(build_component(task, {}).score(data.eval.labels, data.eval.labels)) == PAIR_TASKS[name]


@pytest.mark.parametrize("name, files, truth", [
    ("mrpc", [("train.tsv", 200, 10), ("dev.tsv", 60, 11)], lambda y: y),
    ("stsb", [("sts-train.csv", 200, 12), ("sts-dev.csv", 60, 13)], lambda y: 5.0 * y),
    ("qqp", [("qqp_subset.tsv", 250, 14)], lambda y: y),
    ("qnli", [("dev.tsv", 250, 15)], lambda y: 1 - y),  # written as "entailment" when y = 1; GLUE's 0
    ("rte", [("rte.zip", 250, 16)], lambda y: 1 - y),  # TRUE/YES when y = 1; GLUE's 0 is entailment
])
def test_every_pair_keeps_its_own_label(tiny_data, name, files, truth):
    expected = {(a, b): truth(y) for _, n, seed in files for y, a, b in synthetic_pairs(n, seed)}
    found = labelled(load(name))
    assert found.keys() == expected.keys()  # nothing lost but the malformed QQP row, nothing invented
    assert all(found[t] == expected[t] for t in expected)


def test_formats_parse_as_written(tiny_data):
    mrpc = load("mrpc")
    assert (len(mrpc.train), len(mrpc.eval)) == (200, 60)  # the BOM before the header is dropped
    assert mrpc.notes["eval_split"] == "GLUE dev"
    stsb = load("stsb")
    assert stsb.train.labels.dtype.kind == "f" and len(stsb.train) == 200  # rows with extra columns kept
    assert TASKS.get("stsb").num_labels == 1
    assert len(load("qqp").train) + len(load("qqp").eval) == 250  # the malformed row skipped


def test_mrpc_without_the_bom_handling_would_not_find_its_header(tiny_data):
    raw = (tiny_data / "glue" / "MRPC" / "train.tsv").read_bytes()
    assert raw.startswith("\ufeff".encode("utf-8")) and raw[3:].startswith(b"Quality")


@pytest.mark.parametrize("name", ["qqp", "qnli", "rte"])
def test_single_file_split_is_fixed_disjoint_and_seed_independent(tiny_data, name):
    runs = [load(name, seed=seed) for seed in (0, 1, 2)]
    pools = [(set(r.train.texts), set(r.eval.texts)) for r in runs]
    assert all(train.isdisjoint(evaluation) for train, _ in pools for _, evaluation in pools)
    assert pools[0] == pools[1] == pools[2]  # one training pool and one evaluation pool for every seed
    assert runs[0].eval.texts != runs[1].eval.texts  # ... each sampled (here: ordered) with the run's seed
    assert len(runs[0].eval) == round(0.2 * (len(runs[0].train) + len(runs[0].eval)))
    assert "fixed seed" in runs[0].notes["eval_split"] and "not GLUE dev" in runs[0].notes["eval_split"]
    small = load(name, n_train=20, n_eval=10, seed=3)
    assert set(small.eval.texts) <= pools[0][1] and set(small.train.texts) <= pools[0][0]


def test_seeded_samples_are_reproducible(tiny_data):
    assert load("mrpc", 50, 20, seed=4).data_hash() == load("mrpc", 50, 20, seed=4).data_hash()
    assert load("mrpc", 50, 20, seed=4).data_hash() != load("mrpc", 50, 20, seed=5).data_hash()


@pytest.mark.parametrize("name", ["mrpc", "stsb", "qnli", "rte"])
def test_pair_cells_run_with_the_task_metrics(tiny_data, name):
    spec = make_spec(task=name, defense="texthide", defense_args="m=16,k=2", attack="rss", encoder="mock",
                     attack_args="sbert=mock", training_args="epochs=2", n_train=64, n_eval=32)
    record = run_cell(spec)
    for metric in PAIR_TASKS[name]:
        assert np.isfinite(record.metrics[f"utility/{metric}"])
    assert 0.0 <= record.metrics["privacy/rss/identity"] <= 1.0
    assert record.notes["attack_corpus_size"] == 96


def test_undefended_pairs_are_found_by_rss(tiny_data):
    spec = make_spec(task="qnli", defense="none", attack="rss", encoder="mock", attack_args="sbert=mock",
                     training_args="epochs=2", n_train=64, n_eval=32)
    record = run_cell(spec)
    assert record.metrics["privacy/rss/identity"] == 1.0 and record.metrics["privacy/rss/jcdist"] == 1.0


def test_hub_splits_become_pairs_with_glue_labels(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    asked = []

    def fake_load(path, config):
        asked.append((path, config))
        split = lambda n: datasets.Dataset.from_dict(  # noqa: E731
            {"premise": [f"p{i}" for i in range(n)], "hypothesis": [f"h{i}" for i in range(n)],
             "label": [i % 3 for i in range(n)], "idx": list(range(n))})
        return datasets.DatasetDict({"train": split(30), "validation_matched": split(7),
                                     "validation_mismatched": split(5)})

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    data = load("mnli")
    assert asked == [("nyu-mll/glue", "mnli")]
    assert data.source == "hub:nyu-mll/glue/mnli" and len(data.train) == 30 and len(data.eval) == 7
    assert all(t == (f"p{t[0][1:]}", f"h{t[0][1:]}") for t in data.eval.texts)
    assert set(data.train.labels) == {0, 1, 2} and TASKS.get("mnli").num_labels == 3


def test_mnli_without_hub_says_how_to_get_it(tiny_data, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BenchError, match="dev_matched.tsv under .*MNLI.*nyu-mll/glue', 'mnli'"):
        load("mnli")


def test_missing_pair_data_says_both_ways(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BenchError, match="train.tsv and dev.tsv, or dev.tsv under .*QNLI.*load_dataset"):
        load("qnli")


@pytest.mark.parametrize("task", ["mrpc", "rte", "mnli"])
def test_missing_data_exits_2_with_one_sentence(tmp_path, results, monkeypatch, task):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = CliRunner().invoke(app, ["run", "--task", task, "--defense", "none", "--attack", "rss",
                                      "--encoder", "mock", "--attack-args", "sbert=mock"])
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and message.count(". ") == 0
    assert "BENCH_DATA_DIR" in message and "load_dataset('nyu-mll/glue'" in message
    assert files_under(results) == []


def test_bad_label_is_one_sentence(tiny_data):
    path = tiny_data / "glue" / "QNLI" / "dev.tsv"
    path.write_text("index\tquestion\tsentence\tlabel\n0\tq\ts\tmaybe\n", encoding="utf-8")
    with pytest.raises(BenchError, match="dev.tsv:2 has label 'maybe'"):
        load("qnli")


def test_missing_column_names_the_header(tiny_data):
    path = tiny_data / "glue" / "MRPC" / "train.tsv"
    path.write_text("Quality\t#1 ID\t#2 ID\t#1 String\n", encoding="utf-8")
    with pytest.raises(BenchError, match="expected a column named #2 string"):
        load("mrpc")
