"""Result store: atomic appends, validation, corrupt lines skipped and reported."""

import json
import multiprocessing

import pytest
from pydantic import ValidationError

from bench.results.record import ResultRecord
from bench.results.store import ResultStore


def make_record(seed=0, defense="texthide", **overrides):
    data = dict(
        run_id=f"run{seed}",
        config_hash="abc123",
        seed=seed,
        spec={"task": "sst2", "defense": defense, "attack": "rss", "encoder": "mock",
              "defense_args": {"m": 256, "k": 4}, "attack_args": {}, "training": {"mode": "frozen"}},
        versions={"bench": "0.1.0"},
        data_hash="d" * 64,
        data_source="local:/x",
        sizes={"n_train": 10, "n_eval": 5},
        metrics={"utility/accuracy": 0.5 + seed / 10, "privacy/rss/identity": 0.0, "random/rss/identity": 0.01},
        higher_is_better={"utility/accuracy": True, "privacy/rss/identity": True, "random/rss/identity": True},
        runtime_s=1.0,
        hardware={"device": "cpu"},
        created_at="2026-01-01T00:00:00+00:00",
    )
    data.update(overrides)
    return ResultRecord(**data)


def test_round_trip(tmp_path):
    store = ResultStore(tmp_path)
    path = store.append(make_record(0))
    store.append(make_record(1))
    assert path == tmp_path / "records" / "texthide.jsonl"
    records, problems = store.read()
    assert [r.seed for r in records] == [0, 1] and problems == []
    assert records[0].schema_version == 2  # records load in the current schema


def test_corrupt_line_is_reported_and_cannot_swallow_the_next_record(tmp_path):
    store = ResultStore(tmp_path)
    store.append(make_record(0))
    with open(store.path_for("texthide"), "a") as handle:
        handle.write('{"schema_version": 1, "run_id": "cut off')  # a crash mid-write, no newline
    store.append(make_record(1))
    records, problems = store.read()
    assert [r.seed for r in records] == [0, 1]
    assert len(problems) == 1 and problems[0].line == 2
    assert "texthide.jsonl:2" in str(problems[0])


def test_invalid_record_is_rejected():
    with pytest.raises(ValidationError):
        make_record(metrics={"accuracy": 0.9})  # no utility/ prefix
    with pytest.raises(ValidationError):
        make_record(schema_version=99)
    with pytest.raises(ValidationError):
        make_record(spec={})


def test_nan_metric_round_trips(tmp_path):
    store = ResultStore(tmp_path)
    store.append(make_record(metrics={"utility/pearson": float("nan")}, higher_is_better={"utility/pearson": True}))
    records, problems = store.read()
    assert problems == [] and records[0].metrics["utility/pearson"] != records[0].metrics["utility/pearson"]


def test_valid_json_with_missing_fields_is_corrupt(tmp_path):
    store = ResultStore(tmp_path)
    store.records_dir.mkdir(parents=True)
    store.path_for("none").write_text(json.dumps({"schema_version": 1}) + "\n")
    records, problems = store.read()
    assert records == [] and len(problems) == 1


@pytest.mark.parametrize("field, value", [("defense_args", "m=4"), ("training", None), ("server", []),
                                          ("n_train", 32.5), ("n_train", float("inf")), ("seed", True)])
def test_a_spec_field_of_the_wrong_type_is_a_corrupt_line_and_the_rest_still_read(tmp_path, field, value):
    """Readers take spec fields as typed (format_args iterates defense_args): one mistyped line is skipped and
    reported, not a traceback for every record (summarize and report failed on such a line before)."""
    store = ResultStore(tmp_path)
    store.append(make_record(0))
    bad = json.loads(make_record(1).model_dump_json())
    bad["spec"][field] = value
    with store.path_for("texthide").open("a") as handle:
        handle.write(json.dumps(bad) + "\n")
    records, problems = store.read()
    assert [r.seed for r in records] == [0] and len(problems) == 1 and field in problems[0].reason


def test_a_folder_named_like_a_records_file_is_not_read(tmp_path):
    store = ResultStore(tmp_path)
    store.append(make_record(0))
    (store.records_dir / "odd.jsonl").mkdir()
    records, problems = store.read()
    assert len(records) == 1 and problems == []


def _append_many(root, start):
    store = ResultStore(root)
    for seed in range(start, start + 25):
        store.append(make_record(seed))


def test_concurrent_appends_keep_every_line_whole(tmp_path):
    workers = [multiprocessing.Process(target=_append_many, args=(tmp_path, i * 100)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    records, problems = ResultStore(tmp_path).read()
    assert problems == [] and len(records) == 100


def test_schema_1_adaptation_records_migrate_to_server_options():
    """An adapted dchi-token record of schema 1 loads with adapt in spec.server and the hash a new run gets."""
    from bench.engine.runner import make_spec
    from bench.results.record import ResultRecord

    old_spec = make_spec(defense="dchi-token", defense_args={"eta": 60}, attack="inversion").to_dict()
    old_spec.pop("server")
    old_spec["defense_args"] = {"eta": 60.0, "adapt": "denoising"}
    plain_spec = make_spec(defense="dchi-token", defense_args={"eta": 60}, attack="inversion").to_dict()
    plain_spec.pop("server")
    common = dict(schema_version=1, run_id="r", seed=0, versions={}, data_hash="d", data_source="s", sizes={},
                  metrics={"utility/accuracy": 0.5}, higher_is_better={"utility/accuracy": True}, runtime_s=1.0,
                  hardware={}, created_at="t")
    adapted = ResultRecord(**common, config_hash="old", spec=old_spec)
    plain = ResultRecord(**common, config_hash="kept", spec=plain_spec)
    expected = make_spec(defense="dchi-token", defense_args={"eta": 60}, attack="inversion",
                         server_args={"adapt": "denoising"})
    assert adapted.schema_version == 2 and adapted.spec["defense_args"] == {"eta": 60.0}
    assert adapted.spec["server"]["adapt"] == "denoising" and adapted.config_hash == expected.config_hash()
    assert plain.config_hash == "kept" and plain.spec["server"] == {}  # unadapted cells keep their hash
    assert adapted.metrics == {"utility/accuracy": 0.5}
