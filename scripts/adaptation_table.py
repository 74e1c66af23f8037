"""Print the privacy-adaptive pretraining table (Qu et al. Tables 6-7 layout) from the committed records.

Usage:

    python scripts/adaptation_table.py --defense dchi-text [--seeds 0,1,2] [--results-dir results]

One row per eta: the unadapted encoder's mean accuracy, then each objective's mean and its seed-paired gain over the
unadapted cell of the same configuration (same defense arguments, attack arguments and sizes, no server option).
The token inversion accuracy in the first column is the unadapted cells' mean. docs/results.md prints its output.
"""

from __future__ import annotations

import argparse
from pathlib import Path

OBJECTIVES = ("vanilla", "prob", "denoising")
ACCURACY, INVERSION = "utility/accuracy", "privacy/inversion/token_accuracy"


def adaptation_rows(frame, defense: str, task: str, seeds: list[int]) -> list[str]:
    """Markdown rows of the table for ``defense`` on ``task`` over ``seeds`` (from ``seed_frame``)."""
    cells = frame[(frame.defense == defense) & (frame.task == task) & (frame.attack == "inversion")
                  & frame.seed.isin(seeds)]
    adapted = cells[cells.server_args.str.startswith("adapt=")]
    keys = ["defense_args", "attack_args", "n_train", "n_eval"]
    rows = []
    for (args, attack_args, n_train, n_eval), group in adapted.groupby(keys, sort=False):
        twin = cells[(cells.server_args == "") & (cells.defense_args == args) & (cells.attack_args == attack_args)
                     & (cells.n_train == n_train) & (cells.n_eval == n_eval)]
        base = twin[twin.metric == ACCURACY].set_index("seed").value
        inversion = twin[twin.metric == INVERSION].value.mean()
        line = [f"{args.removeprefix('eta=').removesuffix('.0')} ({inversion:.3f})", f"{base.mean():.3f}"]
        for objective in OBJECTIVES:
            ours = group[(group.server_args == f"adapt={objective}") & (group.metric == ACCURACY)].set_index("seed")
            gain = (ours.value - base.reindex(ours.index)).mean()
            line.append(f"{ours.value.mean():.3f} ({gain:+.3f})" if len(ours) else "-")
        rows.append((float(args.removeprefix("eta=")), "| " + " | ".join(line) + " |"))
    return [row for _, row in sorted(rows)]


def main() -> None:
    """Parse the arguments and print the table."""
    from bench.results.leaderboard import seed_frame
    from bench.results.store import ResultStore

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--defense", default="dchi-text")
    parser.add_argument("--task", default="sst2")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    args = parser.parse_args()
    records, _ = ResultStore(args.results_dir).read()
    frame = seed_frame(records)
    print("| eta (token inversion) | unadapted | " + " | ".join(f"{o} MLM" for o in OBJECTIVES) + " |")
    print("|---|---|---|---|---|")
    print("\n".join(adaptation_rows(frame, args.defense, args.task, [int(s) for s in args.seeds.split(",")])))


if __name__ == "__main__":
    main()
