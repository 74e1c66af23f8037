"""Backfill the majority-class reference into records made before the runner recorded it.

``run_cell`` records ``notes.majority_utility`` (the task's metrics for answering the training split's most frequent
label on every evaluation example) since the leaderboard draws a majority line; older records lack it. It depends
only on the cell's data, which the spec fixes (task, sizes, seed): this module reloads that data, checks that its
hash equals the record's ``data_hash`` (so the note describes the data the cell ran on), and writes the note with
``majority_utility_backfilled`` beside it. Metrics, specs and every other field stay as they were.

This is the one backfill that rewrites files: it needs each cell's data, which reading a record must not load.
What a record's own fields determine is supplied when it is read instead (``bench.results.migrations``): the order
of an attack's metrics, which this module rewrote on disk before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

from bench.core.errors import BenchError
from bench.core.files import atomic_writer
from bench.core.params import build_component
from bench.core.registry import TASKS
from bench.engine.runner import majority_reference

BACKFILLED = "bench backfill: computed afterwards from the cell's data (data hash checked)"


@dataclass
class BackfillReport:
    """What a backfill did: records given the note, and records left as they were with the reason."""

    updated: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def backfill_majority(records_dir: Path) -> BackfillReport:
    """Add ``notes.majority_utility`` to every record under ``records_dir`` that lacks it and whose task has a
    majority class (class-id labels); each file is rewritten atomically under its lock."""
    report = BackfillReport()
    cache: dict[tuple, tuple[str, dict]] = {}
    for path in sorted(Path(records_dir).glob("*.jsonl")):
        with FileLock(str(path) + ".lock"):
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            changed = False
            for number, line in enumerate(lines):
                updated = _backfilled(line, cache, report)
                if updated is not None:
                    lines[number] = updated
                    changed = True
            if changed:
                with atomic_writer(path, "w") as handle:
                    handle.write("".join(lines))
    return report


def _backfilled(line: str, cache: dict, report: BackfillReport) -> str | None:
    """The line with the note added, or None (left as it is; the reason counted)."""
    try:
        record = json.loads(line)
        spec, notes = record["spec"], record["notes"]
    except (json.JSONDecodeError, KeyError, TypeError):
        if line.strip():
            report.skip("unreadable line (left as it is)")
        return None
    if "majority_utility" in notes:
        return None
    key = (spec.get("task"), spec.get("n_train"), spec.get("n_eval"), record.get("seed"))
    if key not in cache:
        cache[key] = _reference(*key)
    data_hash, reference = cache[key]
    if data_hash is None:
        report.skip(reference.get("why", "task data unavailable"))
        return None
    if data_hash != record.get("data_hash"):
        report.skip("the task's data today differs from the record's (data hash)")
        return None
    if not reference:
        report.skip("no majority class (labels are not one class id per example)")
        return None
    record["notes"] = {**notes, **reference, "majority_utility_backfilled": BACKFILLED}
    report.updated += 1
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def _reference(task_name, n_train, n_eval, seed) -> tuple[str | None, dict]:
    try:
        task = build_component(TASKS.get(task_name), {})
        data = task.load(int(n_train), int(n_eval), int(seed))
    except (BenchError, TypeError, ValueError) as exc:
        return None, {"why": f"task data unavailable ({type(exc).__name__})"}
    return data.data_hash(), majority_reference(task, data)
