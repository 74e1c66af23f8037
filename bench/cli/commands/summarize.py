"""``bench summarize``: the records aggregated over seeds into the leaderboard CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from rich.table import Table

from bench.cli.common import ResultsOption, err, out, plain, user_errors, wide


@user_errors
def summarize(results_dir: Optional[Path] = ResultsOption) -> None:
    """Aggregate records over seeds (mean, std, n) into <results>/leaderboard.csv."""
    import pandas as pd

    from bench.results.leaderboard import summarize as write_leaderboard
    from bench.results.store import ResultStore

    store = ResultStore(results_dir)
    store.check_exists()  # a mistyped folder gets one sentence, not an empty folder and CSV
    path, rows, problems = write_leaderboard(store)
    for problem in problems:
        err.print(f"[yellow]warning:[/yellow] {plain(problem)}", highlight=False, soft_wrap=True)
    board = pd.read_csv(path, keep_default_na=False)
    for column in ("mean", "std"):  # a NaN metric is written as an empty field and shown as nan
        board[column] = pd.to_numeric(board[column].replace("", float("nan")), errors="coerce")
    if not board.empty:
        wide(200).print(summary_table(board))
    out.print(f"wrote {rows} rows to {plain(path)}", highlight=False)


def summary_table(board) -> Table:
    """The board as a table: one row per configuration, mean ± std over seeds.

    Each attack's random guess follows, per encoder, evaluation size and attack setting. A train / eval column
    appears where the board's cells differ in size. Every cell is printed literally (``plain``), since record
    fields may hold Rich markup.
    """
    from bench.results.views import size_labels, sizes_differ

    table = Table(title="means ± std over seeds", title_justify="left")
    metrics = sorted({m for m in board["metric"] if m.startswith("utility/")})
    metrics += sorted({m for m in board["metric"] if m.startswith("privacy/")})
    sized = sizes_differ(board)  # cells of different sizes meet: each row says its own
    for column in ["task", "defense", "attack", *(["train / eval"] if sized else []), "seeds",
                   *(m.rsplit("/", 1)[-1] for m in metrics)]:
        table.add_column(column, no_wrap=True)
    for (task, attack), group in board.groupby(["task", "attack"], sort=True):
        # a random guess is pooled only over configurations scored on the same data with the same attack and encoder
        labels = ["encoder", "n_eval", "attack_args"]
        varying = [k for k in labels if group[k].nunique(dropna=False) > 1]  # what a guess row's label names
        for setting_values, setting in group.groupby(labels, sort=True, dropna=False):
            named = dict(zip(labels, setting_values))
            for _, config in setting.groupby("config_hash", sort=False):
                values = config.set_index("metric")
                first = config.iloc[0]
                name = f"{first['defense']}({first['defense_args']})" if first["defense_args"] else first["defense"]
                cells = [
                    f"{values.at[m, 'mean']:.3f}±{values.at[m, 'std']:.3f}" if m in values.index else ""
                    for m in metrics
                ]
                size = size_labels(config.iloc[:1])[0] if sized else None
                table.add_row(*(plain(c) for c in (task, name, attack or "-", *([size] if sized else []),
                                                   str(int(config["n"].max())), *cells)))
            random = setting[setting["metric"].str.startswith("random/")].groupby("metric")["mean"].mean()
            if not random.empty:
                keys = ["random/" + m.split("/", 1)[1] for m in metrics]
                cells = [f"{random[k]:.3f}" if k in random.index else "" for k in keys]
                differ = [f"n_eval {named[k]}" if k == "n_eval" else str(named[k]) for k in varying]
                label = f"random guess ({', '.join(differ)})" if differ else "random guess"
                table.add_row(*(plain(c) for c in (task, label, attack, *([""] if sized else []), "", *cells)),
                              style="dim")
    return table

