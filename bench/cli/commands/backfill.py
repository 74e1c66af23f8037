"""``bench backfill``: older records brought up to what the runner records today."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from bench.cli.common import ResultsOption, err, out, plain, user_errors


@user_errors
def backfill(results_dir: Optional[Path] = ResultsOption) -> None:
    """Bring records made by older runners up to what the runner records today, values untouched: add the
    majority-class reference (notes.majority_utility), recomputed from each cell's data with its data hash checked,
    and list each attack's metrics in its declared order (headline first, what readers rank by)."""
    from bench.engine.backfill import backfill_majority, order_attack_metrics
    from bench.results.store import ResultStore

    store = ResultStore(results_dir)
    store.check_exists()
    store.check_writable()
    majority = backfill_majority(store.records_dir)
    ordered = order_attack_metrics(store.records_dir)
    for report, what in ((majority, "majority reference"), (ordered, "metric order")):
        for reason, count in sorted(report.skipped.items()):
            err.print(f"  {what}: left {count} record(s) as they were: {plain(reason)}", highlight=False)
    out.print(f"added the majority-class reference to {majority.updated} record(s) and put the attack metrics of "
              f"{ordered.updated} in declared order in {plain(store.records_dir)}", highlight=False)

