"""``bench summarize``: aggregate records over seeds into ``results/leaderboard.csv``.

One row per (configuration, metric): mean, std and n over seeds and the half-width of the mean's 95% confidence
interval (Student's t with n - 1 degrees of freedom; empty for one seed), with the labels the dashboard filters on.
Written atomically, so a reader never sees half a table.
"""

from __future__ import annotations

from pathlib import Path

from bench.core.errors import BenchError
from bench.core.files import atomic_writer, output_file
from bench.core.options import PrivateTraining
from bench.core.params import component_args
from bench.results.migrations import SERVER_DEFAULTS
from bench.results.record import ResultRecord, current
from bench.results.store import CorruptLine, ResultStore

# DP-SGD's options beside its target epsilon, at their defaults (a DP cell is labelled by what it changed)
DP_DEFAULTS = {k: v for k, v in component_args(PrivateTraining()).items() if k != "dp_epsilon"}

COLUMNS = [
    "task", "encoder", "defense", "defense_args", "server_args", "attack", "attack_args", "mode", "n_train", "n_eval",
    "config_hash", "metric", "higher_is_better", "mean", "std", "n", "ci95",
]
STATISTICS = ("mean", "std", "n", "ci95")


def format_args(args: dict) -> str:
    """``{"m": 256, "k": 4}`` -> ``"m=256,k=4"``."""
    return ",".join(f"{k}={v}" for k, v in args.items())


def server_changes(server: dict) -> dict:
    """The server options that differ from their defaults (all of them are in the spec and its hash)."""
    return {k: v for k, v in server.items() if {**SERVER_DEFAULTS, **DP_DEFAULTS}.get(k, object()) != v}


def seed_frame(records: list[ResultRecord]):
    """One row per (record, metric): the configuration's labels, ``seed``, ``value``, ``higher_is_better`` and
    ``order`` (the metric's place in its record: a task lists its headline metric first). A cell re-run with the
    same seed counts once (the newest record wins), and only a configuration's newest component versions count.
    A record made at the smoke budget (``bench run --check``) is never on the board."""
    import pandas as pd

    rows = []
    for record in current([r for r in records if not r.at_smoke_budget]):
        spec = record.spec
        base = {
            "task": spec["task"],
            "encoder": spec["encoder"],
            "defense": spec["defense"],
            "defense_args": format_args(spec.get("defense_args", {})),
            "server_args": format_args(server_changes(spec.get("server", {}))),
            "attack": spec.get("attack") or "",
            # a cell of the inference traffic reads as such wherever the attack's arguments are shown or grouped
            "attack_args": format_args({**spec.get("attack_args", {}),
                                        **({"traffic": spec["traffic"]} if spec.get("traffic") else {})}),
            "mode": spec.get("training", {}).get("mode", ""),
            "n_train": record.sizes.get("n_train"),
            "n_eval": record.sizes.get("n_eval"),
            "config_hash": record.config_hash,
            "seed": record.seed,
        }
        for order, (metric, value) in enumerate(record.metrics.items()):
            rows.append({**base, "metric": metric, "value": value, "order": order,
                         "higher_is_better": record.higher_is_better.get(metric, True)})
    if not rows:
        return pd.DataFrame(columns=[*COLUMNS[:-3], "seed", "value", "order"])
    frame = pd.DataFrame(rows)
    return frame.drop_duplicates(subset=["config_hash", "seed", "metric"], keep="last").reset_index(drop=True)


def aggregate(frame, with_order: bool = False):
    """Mean, std, n and the 95% half-width over seeds of a ``seed_frame`` (with ``order``, the metric's smallest
    place, if asked)."""
    keys = [c for c in COLUMNS if c not in STATISTICS]
    if frame.empty:
        import pandas as pd

        return pd.DataFrame(columns=COLUMNS + (["order"] if with_order else []))
    aggregations = {"mean": ("value", _mean), "std": ("value", _std), "n": ("value", "size")}
    if with_order:
        aggregations["order"] = ("order", "min")
    table = frame.groupby(keys, dropna=False).agg(**aggregations).reset_index()
    table["ci95"] = ci95_half_width(table["std"], table["n"])
    columns = COLUMNS + (["order"] if with_order else [])
    return table[columns].sort_values(["task", "attack", "metric", "defense", "defense_args"]).reset_index(drop=True)


def leaderboard_frame(records: list[ResultRecord]):
    """Long-format table of per-configuration metric means, stds and seed counts."""
    return aggregate(seed_frame(records))


def ci95_half_width(std, n):
    """t(0.975, n - 1) · std / sqrt(n) per row: the mean's 95% confidence interval is mean ± this (NaN for n < 2)."""
    import numpy as np
    from scipy import stats

    n = np.asarray(n, dtype=float)
    several = n > 1
    width = np.full(len(n), np.nan)
    width[several] = stats.t.ppf(0.975, n[several] - 1) * np.asarray(std, dtype=float)[several] / np.sqrt(n[several])
    return width


def _mean(values) -> float:
    """Mean over seeds; one NaN seed makes it NaN (a failed seed is never averaged away)."""
    return float(values.mean(skipna=False))


def _std(values) -> float:
    """Sample standard deviation over seeds (0 for one seed); NaN when any seed is NaN."""
    if values.isna().any():
        return float("nan")
    return float(values.std(ddof=1)) if len(values) > 1 else 0.0


def summarize(store: ResultStore) -> tuple[Path, int, list[CorruptLine]]:
    """Write the leaderboard; returns (path, rows written, corrupt lines skipped). A store with nothing to read (no
    cell ran into it) is refused, as ``bench report`` refuses it, rather than given an empty leaderboard."""
    path = output_file(store.leaderboard_path, "the leaderboard")  # a folder there, or no write access: said first
    records, problems = store.read()
    if not records and not problems:
        raise BenchError(f"no records in {store.records_dir}: run `bench run ...` first.")
    table = leaderboard_frame(records)
    try:
        with atomic_writer(path) as handle:
            table.to_csv(handle, index=False, float_format="%.6g")
    except OSError as exc:  # a full or read-only disk: the old leaderboard stays as it was
        raise BenchError(f"cannot write the leaderboard {path} ({exc.strerror or exc}); the records are unchanged "
                         "and the previous leaderboard is kept.") from None
    return path, len(table), problems
