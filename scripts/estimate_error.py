"""How far the dry run's time estimates are from the recorded runtimes, on the records of a results folder.

    python scripts/estimate_error.py --results-dir results

Each configuration run in full (no reused release) is estimated by ``bench.engine.grid.estimate_cells`` from the
other records, as the dry run would estimate it: without its own records (the next configuration of a known
grid), and, for configurations with server options, also without any record of its task at the same server options
(a new DP-SGD epsilon, a new pretraining budget). The error of one estimate is the larger of estimate and runtime
over the smaller (1 = exact). It prints the median and geometric mean of the errors, how many are within 2x, and
how many had no estimate.
"""

from __future__ import annotations

import argparse
import json
import statistics

from bench.core.spec import RunSpec
from bench.engine.grid import estimate_cells
from bench.results.store import ResultStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results-dir", default="results")
    records = ResultStore(parser.parse_args().results_dir).read()[0]
    configs: dict[str, list] = {}
    for record in records:
        if "reused_from" not in (record.notes or {}):
            configs.setdefault(record.config_hash, []).append(record)

    def setting(record) -> tuple:
        return record.spec["task"], json.dumps(record.spec.get("server"), sort_keys=True)

    print("| configurations | left out | count | median error | geometric mean | within 2x | no estimate |")
    print("|---|---|---|---|---|---|---|")
    for which, left_out in (("all", "its own records"), ("with server options", "its own records"),
                            ("with server options", "its task's records at its server options")):
        chosen = {c: own for c, own in configs.items() if which == "all" or own[0].spec.get("server")}
        errors, unknown = [], 0
        for config, own in chosen.items():
            others = [r for r in records if r.config_hash != config
                      and (left_out == "its own records" or setting(r) != setting(own[0]))]
            (estimate,) = estimate_cells([RunSpec.from_dict(own[0].spec)], others)
            runtime = statistics.median(r.runtime_s for r in own)
            if not estimate.seconds or not runtime:
                unknown += 1
                continue
            errors.append(max(estimate.seconds, runtime) / min(estimate.seconds, runtime))
        if not errors:
            print(f"| {which} | {left_out} | {len(chosen)} | – | – | 0 | {unknown} |")
            continue
        print(f"| {which} | {left_out} | {len(chosen)} | {statistics.median(errors):.2f} | "
              f"{statistics.geometric_mean(errors):.2f} | {sum(e <= 2 for e in errors)} | {unknown} |")


if __name__ == "__main__":
    main()
