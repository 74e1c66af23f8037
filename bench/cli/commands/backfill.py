"""``bench backfill``: older records brought up to what the runner records today."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from bench.cli.common import ResultsOption, err, out, plain, user_errors


@user_errors
def backfill(results_dir: Optional[Path] = ResultsOption) -> None:
    """Add the majority-class reference (notes.majority_utility) to records made by older runners, recomputed from
    each cell's data with its data hash checked; every other value untouched. (What a record's own fields
    determine, such as the order of an attack's metrics, is brought up to date when it is read.)"""
    from bench.engine.backfill import backfill_majority
    from bench.results.store import ResultStore

    store = ResultStore(results_dir)
    store.check_exists()
    store.check_writable()
    majority = backfill_majority(store.records_dir)
    for reason, count in sorted(majority.skipped.items()):
        err.print(f"  majority reference: left {count} record(s) as they were: {plain(reason)}", highlight=False)
    out.print(f"added the majority-class reference to {majority.updated} record(s) in {plain(store.records_dir)}",
              highlight=False)
