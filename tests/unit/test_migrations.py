"""Load-time migrations: what a record's own fields determine is brought up to date when it is read, the file
untouched."""

import json

from bench.core.registry import ATTACKS
from bench.engine.runner import make_spec, run_cell
from bench.results.migrations import declared_order
from bench.results.record import ResultRecord
from bench.results.store import ResultStore


def test_a_record_with_its_attack_metrics_out_of_order_is_read_in_declared_order(tiny_data, tmp_path):
    store = ResultStore(tmp_path / "results")
    fresh = run_cell(make_spec(task="sst2", encoder="mock", n_train=16, n_eval=8, attack="rss",
                               training_args={"epochs": 1}))
    declared = [m.name for m in ATTACKS.get("rss").metrics]
    assert [k.split("/")[-1] for k in fresh.metrics if k.startswith("privacy/")] == declared  # the runner's order
    old_order = sorted(fresh.metrics, key=lambda k: (k.split("/")[0] != "utility", k.split("/")[0], k[::-1]))
    assert old_order != list(fresh.metrics)
    line = json.loads(fresh.model_dump_json())  # as an older runner wrote it: the attack's metrics reordered
    line["metrics"] = {k: fresh.metrics[k] for k in old_order}
    line["higher_is_better"] = {k: fresh.higher_is_better[k] for k in old_order}
    older = dict(line, schema_version=1, run_id="older")  # any schema
    path = store.path_for(fresh.defense)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(line) + "\n" + json.dumps(older) + "\n")
    before = path.read_bytes()

    records, problems = store.read()

    assert not problems and path.read_bytes() == before  # nothing rewritten
    for record in records:
        assert list(record.metrics) == list(fresh.metrics) and list(record.higher_is_better) == list(fresh.metrics)
        assert record.metrics == fresh.metrics and record.higher_is_better == fresh.higher_is_better


def test_declared_order_leaves_what_it_cannot_judge_as_it_is():
    unknown = {"spec": {"attack": "not-registered"}, "metrics": {"privacy/not-registered/b": 1.0,
                                                                 "privacy/not-registered/a": 0.0}}
    assert declared_order(unknown) is unknown
    plain = {"spec": {"attack": None}, "metrics": {"utility/accuracy": 0.5}}
    assert declared_order(plain) is plain
    broken = {"spec": "not a spec", "metrics": []}
    assert declared_order(broken) is broken


def test_committed_records_are_already_in_declared_order():
    # reading moves nothing in the committed board (its leaderboard is reproduced byte for byte)
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "results" / "records"
    for path in root.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            stored = json.loads(line)
            assert list(ResultRecord.model_validate(stored).metrics) == list(stored["metrics"])
