"""Print the privacy-adaptive pretraining table (Qu et al. Tables 6-7 layout) from the committed records.

Usage:

    python scripts/adaptation_table.py --defense dchi-text [--seeds 0,1,2] [--metric utility/probe_accuracy]
        [--results-dir results]

One row per eta: the unadapted encoder's mean accuracy, then each objective's mean and its seed-paired gain over the
unadapted cell of the same configuration (same defense arguments, attack arguments and sizes, no server option) with
the gain's 95% half-width over the paired seeds: ``dashboard.adaptation.adaptation_gains``, the dashboard's own
figure. The token inversion accuracy in the first column is the unadapted cells' mean. docs/analyses.md prints its
output.
"""

from __future__ import annotations

import argparse
from pathlib import Path

OBJECTIVES = ("vanilla", "prob", "denoising")
ACCURACY, INVERSION = "utility/accuracy", "privacy/inversion/token_accuracy"


def adaptation_rows(frame, defense: str, task: str, seeds: list[int], metric: str = ACCURACY) -> list[str]:
    """Markdown rows of the table for ``defense`` on ``task`` over ``seeds`` (from ``seed_frame``), of ``metric``
    (the MLP head's accuracy; ``utility/probe_accuracy`` is the deterministic convex probe's, the same on every
    CPU)."""
    from bench.dashboard.adaptation import adaptation_gains
    from bench.results.leaderboard import aggregate

    cells = frame[(frame.defense == defense) & (frame.task == task) & (frame.attack == "inversion")
                  & frame.seed.isin(seeds)]
    if cells.empty:  # e.g. records of an older inversion version, which no table shows
        return ["| no current records: the cells await a re-run (docs/results/known-limits.md) | | | | |"]
    board = aggregate(cells)
    gains = adaptation_gains(board, cells)
    gains = gains[gains.metric == metric]
    keys = ["encoder", "mode", "attack_args", "n_train", "n_eval"]  # the BiLSTM twins share everything else
    inversion = (board[(board.server_args == "") & (board.metric == INVERSION)]
                 .set_index(["defense_args", *keys])["mean"])
    rows = []
    for (mechanism, *setting), group in gains.groupby(["mechanism", *keys]):
        line = [f"{mechanism.removeprefix('eta=').removesuffix('.0')} ({inversion[(mechanism, *setting)]:.3f})",
                f"{group.unadapted.iloc[0]:.3f}"]
        by_objective = group.set_index("objective")
        for objective in OBJECTIVES:
            if objective not in by_objective.index:
                line.append("-")
                continue
            row = by_objective.loc[objective]
            spread = f" ± {row.gain_ci95:.3f}" if row.gain_n > 1 else ""
            line.append(f"{row.adapted:.3f} ({row.gain:+.3f}{spread})")
        rows.append((float(mechanism.removeprefix("eta=")), "| " + " | ".join(line) + " |"))
    return [row for _, row in sorted(rows)]


def main() -> None:
    """Parse the arguments and print the table."""
    from bench.results.leaderboard import seed_frame
    from bench.results.store import ResultStore

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--defense", default="dchi-text")
    parser.add_argument("--task", default="sst2")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--metric", default=ACCURACY)
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    args = parser.parse_args()
    records, _ = ResultStore(args.results_dir).read()
    frame = seed_frame(records)
    print("| eta (token inversion) | unadapted | " + " | ".join(f"{o} MLM" for o in OBJECTIVES) + " |")
    print("|---|---|---|---|---|")
    print("\n".join(adaptation_rows(frame, args.defense, args.task, [int(s) for s in args.seeds.split(",")],
                                     args.metric)))


if __name__ == "__main__":
    main()
