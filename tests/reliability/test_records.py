"""Records that would break or bend the board: every field is validated when records are read (a bad line is
skipped with a warning naming its file and line), and two specs that share a config hash never merge."""

from __future__ import annotations

import csv
import json

import pytest

from bench.core.spec import RunSpec
from bench.results.store import ResultStore
from tests.reliability.conftest import invoke

SPEC = {"task": "sst2", "defense": "none", "attack": None, "encoder": "mock", "defense_args": {}, "attack_args": {},
        "training": {"epochs": 1}, "server": {}, "n_train": 40, "n_eval": 20, "pooling": "mean", "max_length": 128,
        "device": "cpu", "precision": "fp32", "seed": 0}


def record(seed: int = 0, accuracy: float = 0.75, **spec_changes) -> dict:
    """A valid stored record (its config hash computed from its spec), as a dictionary."""
    spec = dict(SPEC, seed=seed, **spec_changes)
    return {"schema_version": 2, "run_id": f"r{seed}{accuracy}", "config_hash": RunSpec.from_dict(spec).config_hash(),
            "seed": seed, "spec": spec,
            "versions": {"task": "sst2@1", "defense": "none@1", "attack": "", "bench": "0.1.0"},
            "data_hash": "d" * 64, "data_source": "local:/x", "sizes": {"n_train": 40, "n_eval": 20},
            "metrics": {"utility/accuracy": accuracy}, "higher_is_better": {"utility/accuracy": True},
            "notes": {}, "runtime_s": 1.0, "hardware": {"device": "cpu"}, "created_at": "2026-01-01T00:00:00+00:00"}


def _edit(data: dict, path: str, value) -> dict:
    data = json.loads(json.dumps(data))
    *parents, last = path.split(".")
    target = data
    for key in parents:
        target = target[key]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return data


DELETE = object()
BAD = [
    ("schema version 0", "schema_version", 0),
    ("schema version true", "schema_version", True),
    ("boolean metric", "metrics.utility/accuracy", True),
    ("string metric", "metrics.utility/accuracy", "0.9"),
    ("direction not a boolean", "higher_is_better.utility/accuracy", 1),
    ("superscript version", "versions.task", "sst2@²"),
    ("markup task", "spec.task", "[/x]"),
    ("markup defense", "spec.defense", "[bold]none"),
    ("seed a boolean", "seed", True),
    ("seed not the spec's", "seed", 3),
    ("size a string", "sizes.n_train", "40"),
]


def write(folder, *lines) -> None:
    records = folder / "records"
    records.mkdir(parents=True, exist_ok=True)
    (records / "none.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


@pytest.mark.parametrize("what, path, value", BAD, ids=[b[0] for b in BAD])
def test_a_bad_field_is_a_skipped_line_named_by_file_and_line(tmp_path, what, path, value):
    write(tmp_path, record(0), _edit(record(1), path, value), record(2))
    records, problems = ResultStore(tmp_path).read()
    assert sorted(r.seed for r in records) == [0, 2]
    assert [(p.path.name, p.line) for p in problems] == [("none.jsonl", 2)], problems
    result = invoke("summarize", "--results-dir", tmp_path)
    assert result.exit_code == 0, result.output
    assert "none.jsonl:2" in " ".join(result.stderr.split()) and "Traceback" not in result.output
    board = list(csv.DictReader(open(tmp_path / "leaderboard.csv", encoding="utf-8")))
    assert [row["n"] for row in board if row["metric"] == "utility/accuracy"] == ["2"]


def test_a_schema_1_record_without_attack_is_skipped(tmp_path):
    old = _edit(_edit(record(1), "schema_version", 1), "spec.attack", DELETE)
    write(tmp_path, record(0), old)
    records, problems = ResultStore(tmp_path).read()
    assert [r.seed for r in records] == [0] and [p.line for p in problems] == [2]
    assert invoke("summarize", "--results-dir", tmp_path).exit_code == 0
    assert invoke("report", "--results-dir", tmp_path, "--out", tmp_path / "r.md").exit_code == 0


def test_two_specs_sharing_a_config_hash_never_merge(tmp_path):
    """A seed whose arguments differ from its configuration's, under the same hash, is reported and left out."""
    good = [record(seed) for seed in range(2)]
    other = _edit(record(2, accuracy=0.1, n_train=30), "config_hash", good[0]["config_hash"])
    write(tmp_path, *good, other)
    records, problems = ResultStore(tmp_path).read()
    assert sorted(r.seed for r in records) == [0, 1]
    assert [p.line for p in problems] == [3] and "belongs to another spec" in problems[0].reason
    result = invoke("summarize", "--results-dir", tmp_path)
    assert result.exit_code == 0 and "none.jsonl:3" in " ".join(result.stderr.split())
    board = list(csv.DictReader(open(tmp_path / "leaderboard.csv", encoding="utf-8")))
    assert [(row["n"], row["mean"]) for row in board if row["metric"] == "utility/accuracy"] == [("2", "0.75")]


def test_a_record_reusing_another_hash_and_seed_cannot_replace_it(tmp_path):
    """Listed first or last, the record whose spec hashes to the shared hash is the configuration's."""
    good = record(0)
    forged = _edit(record(0, accuracy=0.0, n_train=30), "config_hash", good["config_hash"])
    for order in ((good, forged), (forged, good)):
        write(tmp_path, *order)
        records, problems = ResultStore(tmp_path).read()
        assert [r.metrics["utility/accuracy"] for r in records] == [0.75] and len(problems) == 1


def test_committed_records_all_read(committed_records):
    assert len(committed_records) > 1000  # every committed record passes the stricter reading
