"""Backfill what the runner records today into records made before it did.

Two backfills, each leaving every value as it was:

- the majority-class reference (below);
- the order of an attack's metrics: the runner lists them as the attack declares them, headline first, and
  readers rank by the first (``bench report``, the dashboard); records made before listed them in the order the
  attack computed them (AIA's per-attribute accuracies came first). ``order_attack_metrics`` reorders those keys,
  values and directions untouched.

The majority-class reference:

``run_cell`` records ``notes.majority_utility`` (the task's metrics for answering the training split's most frequent
label on every evaluation example) since the leaderboard draws a majority line; older records lack it. It depends
only on the cell's data, which the spec fixes (task, sizes, seed): this module reloads that data, checks that its
hash equals the record's ``data_hash`` (so the note describes the data the cell ran on), and writes the note with
``majority_utility_backfilled`` beside it. Metrics, specs and every other field stay as they were.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

from bench.core.errors import BenchError
from bench.core.files import atomic_writer
from bench.core.params import build_component
from bench.core.registry import ATTACKS, TASKS
from bench.engine.runner import majority_reference
from bench.results.migrations import SCHEMA_VERSION
from bench.results.record import ResultRecord

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


def order_attack_metrics(records_dir: Path) -> BackfillReport:
    """List each record's attack metrics (``privacy/<attack>/*``, ``random/<attack>/*``) in the order its attack
    declares them, in ``metrics`` and ``higher_is_better``; each file is rewritten atomically under its lock, and
    a record of an attack that is no longer registered is left as it is."""
    report = BackfillReport()
    for path in sorted(Path(records_dir).glob("*.jsonl")):
        with FileLock(str(path) + ".lock"):
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            reordered = [_reordered(line, report) for line in lines]
            if any(new is not None for new in reordered):
                with atomic_writer(path, "w") as handle:
                    handle.write("".join(old if new is None else new for old, new in zip(lines, reordered)))
    return report


def _reordered(line: str, report: BackfillReport) -> str | None:
    """The line with its attack's metrics in declared order, or None (already so, or left as it is)."""
    from pydantic import ValidationError


    try:
        raw = json.loads(line)
        record = ResultRecord.model_validate(raw)
    except (json.JSONDecodeError, ValidationError, TypeError):
        if line.strip():
            report.skip("unreadable line (left as it is)")
        return None
    if raw.get("schema_version") != SCHEMA_VERSION:  # rewriting it would also migrate it: not a reorder only
        report.skip("older record schema (left as it is; it is migrated when read)")
        return None
    attack = record.spec.get("attack")
    if not attack:
        return None
    try:
        declared = {m.name: place for place, m in enumerate(ATTACKS.get(attack).metrics)}
    except BenchError:
        report.skip("attack not registered here (left as it is)")
        return None
    keys = list(record.metrics)
    ordered = list(keys)
    for prefix in (f"privacy/{attack}/", f"random/{attack}/"):
        slots = [i for i, key in enumerate(keys) if key.startswith(prefix)]
        ranked = sorted((keys[i] for i in slots), key=lambda key: declared.get(key[len(prefix):], len(declared)))
        for slot, key in zip(slots, ranked):
            ordered[slot] = key
    if ordered == keys:
        return None
    directions = record.higher_is_better
    record = record.model_copy(update={
        "data_source": raw["data_source"],  # as stored: reading names it portably, a reorder leaves it alone
        "metrics": {key: record.metrics[key] for key in ordered},
        "higher_is_better": {key: directions[key] for key in ordered if key in directions} | directions})
    report.updated += 1
    return record.model_dump_json() + "\n"


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
