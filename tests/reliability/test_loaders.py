"""Class 2 of issue 60: data that loads wrong or crashes. Every loader checks what it reads against the task's
declared schema (labels in the label set, finite scores, at least one example) and names the file, the line or
question id, and the fix, in one sentence with exit code 2; nothing is recorded."""

from __future__ import annotations

import json
import zipfile

import pytest

from bench import BenchError
from bench.core.registry import TASKS
from tests.conftest import files_under
from tests.reliability.conftest import MOCK_CHECK, invoke, one_sentence


def _replace_line(path, number: int, line: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = line
    path.write_text("\n".join(lines), encoding="utf-8")


@pytest.mark.parametrize("label", ["-1", "7", "2"])
def test_label_outside_the_binary_label_set_is_named(tiny_data, results, label):
    train = tiny_data / "glue" / "SST-2" / "train.tsv"
    _replace_line(train, 5, f"{label}\ta film of some kind")
    one_sentence(invoke("run", "--defense", "none", *MOCK_CHECK), f"{train}:5", f"'{label}'", "0 to 1")
    assert files_under(results) == []


@pytest.mark.parametrize("score", ["nan", "inf", "-inf"])
def test_non_finite_similarity_score_is_named(tiny_data, results, score):
    train = tiny_data / "glue" / "STS-B" / "sts-train.csv"
    _replace_line(train, 3, f"main\tsrc\t2012\t0003\t{score}\ta cat sat\ta dog sat")
    one_sentence(invoke("run", "--task", "stsb", "--defense", "none", *MOCK_CHECK), f"{train}:3", "finite")
    assert files_under(results) == []


@pytest.mark.parametrize("content", ["", "label\tsentence\n", "\n\n"])
def test_empty_or_header_only_file_is_named(tiny_data, results, content):
    train = tiny_data / "glue" / "SST-2" / "train.tsv"
    train.write_text(content, encoding="utf-8")
    one_sentence(invoke("run", "--defense", "none", *MOCK_CHECK), f"{train}", "no example")
    assert files_under(results) == []


def test_a_very_long_sentence_loads(tiny_data):
    """20,000 words in one field passed the csv module's field limit (131,072 characters): a traceback."""
    train = tiny_data / "glue" / "SST-2" / "train.tsv"
    long = " ".join(["lengthy"] * 20_000)  # 160,000 characters
    _replace_line(train, 2, f"1\t{long}")
    data = TASKS.get("sst2")().load(1000, 10, 0)
    assert long in data.train.texts


def _conll(folder, train: bytes, testa: bytes | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eng.train").write_bytes(train)
    (folder / "eng.testa").write_bytes(testa if testa is not None else b"EU NNP B-NP I-ORG\nrejects VBZ B-VP O\n")


def test_empty_conll_file_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    _conll(tmp_path / "conll2003", b"-DOCSTART- -X- -X- O\n\n")
    with pytest.raises(BenchError, match="eng.train holds no example"):
        TASKS.get("conll2003")().load(10, 10, 0)


def test_non_utf8_conll_file_is_named_with_its_line(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    _conll(tmp_path / "conll2003", b"EU NNP B-NP I-ORG\n\ncaf\xe9 NN B-NP O\n")
    with pytest.raises(BenchError, match=r"eng.train:3 is not UTF-8"):
        TASKS.get("conll2003")().load(10, 10, 0)


def test_non_utf8_ncbi_file_is_named_with_its_line(tmp_path, monkeypatch):
    folder = tmp_path / "ncbi_disease"
    folder.mkdir()
    (folder / "train.tsv").write_bytes(b"Tumour\tB-Disease\n\ncaf\xe9\tO\n")
    (folder / "devel.tsv").write_bytes(b"Tumour\tB-Disease\n")
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    with pytest.raises(BenchError, match=r"train.tsv:3 is not UTF-8"):
        TASKS.get("ncbi-disease")().load(10, 10, 0)


def _squad(tmp_path, monkeypatch, answer: dict):
    """A SQuAD file of 40 articles, the first question's answer replaced by ``answer``."""
    context = "The cat sat on the mat in Paris ."
    articles = [{"title": f"a{i}", "paragraphs": [{"context": context, "qas": [
        {"id": f"q{i}", "question": "Where did the cat sit ?", "answers": [{"text": "the mat", "answer_start": 15}]}
    ]}]} for i in range(40)]
    articles[0]["paragraphs"][0]["qas"][0]["answers"] = [answer]
    folder = tmp_path / "squad"
    folder.mkdir()
    with zipfile.ZipFile(folder / "dev-v1.1.json.zip", "w") as archive:
        archive.writestr("dev-v1.1.json", json.dumps({"data": articles, "version": "1.1"}))
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))


@pytest.mark.parametrize("answer", [{"text": "the mat", "answer_start": -4},
                                    {"text": "the mat", "answer_start": 2},
                                    {"text": "the mat", "answer_start": 400},
                                    {"text": "the mat", "answer_start": "15"},
                                    {"text": "the mat"}])
def test_squad_answer_not_where_its_offset_says_is_named(tmp_path, monkeypatch, answer):
    _squad(tmp_path, monkeypatch, answer)
    with pytest.raises(BenchError, match=r"dev-v1.1.json.zip: question 'q0'"):
        TASKS.get("squad")().load(10, 4, 0)


def test_squad_with_correct_offsets_loads(tmp_path, monkeypatch):
    _squad(tmp_path, monkeypatch, {"text": "the mat", "answer_start": 15})
    data = TASKS.get("squad")().load(10, 4, 0)
    assert len(data.train) == 10


def test_the_schema_check_holds_for_any_task(tmp_path):
    """The check after every task's load: a plugin task's labels outside its label set, a non-finite regression
    label and an empty split are refused with the task and the source named."""
    import numpy as np

    from bench import Examples, TaskData
    from bench.core.examples import check_task_data

    class Binary:
        registry_name, num_labels = "plugin-task", 2

    class Regression:
        registry_name, num_labels = "plugin-reg", 1

    good = Examples(("a", "b"), np.array([0, 1]))
    with pytest.raises(BenchError, match="plugin-task.*local:x.*training example 1 has label 3"):
        check_task_data(Binary(), TaskData(Examples(("a", "b"), np.array([0, 3])), good, "local:x"))
    with pytest.raises(BenchError, match="plugin-task. loaded no example for its evaluation split from local:x"):
        check_task_data(Binary(), TaskData(good, Examples((), np.array([])), "local:x"))
    tags = np.empty(2, dtype=object)
    tags[:] = [[0, 1], [1, 9]]
    with pytest.raises(BenchError, match="training example 1 has label 9"):
        check_task_data(Binary(), TaskData(Examples(("a b", "c d"), tags), good, "local:x"))
    with pytest.raises(BenchError, match="plugin-reg.*not a finite number"):
        check_task_data(Regression(), TaskData(Examples(("a", "b"), np.array([0.5, np.nan])), good, "local:x"))
    check_task_data(Binary(), TaskData(good, good, "local:x"))
