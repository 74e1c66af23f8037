"""`bench backfill`: the majority-class note added to old records equals what the runner notes today, only where
the cell's data is provably the same, and nothing else in a record changes."""

import json

from bench.engine.backfill import BACKFILLED, backfill_majority
from bench.engine.runner import make_spec, run_cell
from bench.results.store import ResultStore


def test_backfill_adds_the_runners_majority_note_and_only_that(tiny_data, tmp_path):
    store = ResultStore(tmp_path / "results")
    fresh = run_cell(make_spec(task="sst2", encoder="mock", n_train=16, n_eval=8, training_args={"epochs": 1}))
    assert fresh.notes["majority_utility"]  # what the runner notes today
    old = fresh.model_copy(update={"notes": {k: v for k, v in fresh.notes.items() if k != "majority_utility"}})
    stale = old.model_copy(update={"data_hash": "0" * 64, "run_id": "other"})  # data that differs from today's
    store.append(old)
    store.append(stale)
    store.append(fresh)  # has the note: untouched
    before = store.files()[0].read_text().splitlines()

    report = backfill_majority(store.records_dir)

    assert report.updated == 1 and report.skipped == {"the task's data today differs from the record's (data hash)": 1}
    after = store.files()[0].read_text().splitlines()
    assert after[1:] == before[1:]
    records, problems = store.read()
    assert not problems
    backfilled = records[0]
    assert backfilled.notes["majority_utility"] == fresh.notes["majority_utility"]
    assert backfilled.notes["majority_utility_backfilled"] == BACKFILLED
    assert json.loads(after[0])["metrics"] == json.loads(before[0])["metrics"]
    assert backfilled.model_dump(exclude={"notes"}) == old.model_dump(exclude={"notes"})
    assert backfill_majority(store.records_dir).updated == 0  # idempotent
