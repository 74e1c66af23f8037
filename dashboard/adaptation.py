"""Utility gained by privacy-adaptive pretraining, per privacy parameter (the view of Qu et al. Tables 6-7).

An adapted row is a defense setting with ``adapt=<objective>``; its reference is the recorded setting
with the same mechanism arguments and no ``adapt`` (same task, encoder, attack and its arguments, mode and
sizes). Given the per-seed values, the gain is paired by seed: the mean over the seeds both settings have of the
adapted minus the unadapted utility, with its 95% half-width (seed-to-seed noise of the frozen head is shared by
the two cells of a seed, so pairing is what resolves a gain of 0.01). Read from leaderboard.csv alone, the gain
is the difference of the two means and says it is unpaired.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from bench.dashboard.charts import OKABE_ITO
from bench.dashboard.sweeps import parse_args, varying_arguments, with_settings
from bench.results.leaderboard import ci95_half_width

MATCH = ["task", "encoder", "defense", "attack", "attack_args", "mode", "n_train", "n_eval", "metric"]


def _mechanism(args: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in args.items() if not k.startswith("adapt"))


def _variant(args: dict[str, str]) -> str:
    """The objective, with the adaptation budget when it is not the default (adapt_steps=..., adapt_lr=...)."""
    budget = ",".join(f"{k}={v}" for k, v in args.items() if k.startswith("adapt_"))
    return f"{args.get('adapt', '')} ({budget})" if budget else args.get("adapt", "")


def adaptation_gains(board: pd.DataFrame, seeds: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per adapted utility metric: the mechanism, objective, adapted and unadapted means over their own
    seeds, and the gain with ``gain_n`` and ``gain_ci95`` (paired by seed when ``seeds``, a ``seed_frame``, has
    both settings' values; else the difference of the means, ``gain_n`` 0)."""
    board = with_settings(board)
    if "attack_args" not in board:
        board = board.assign(attack_args="")
    utility = board[board["metric"].str.startswith("utility/")]
    if utility.empty:
        return pd.DataFrame()
    args = utility["defense_args"].map(parse_args)
    frame = utility.assign(
        objective=args.map(_variant),
        mechanism=args.map(_mechanism),
    )
    adapted, plain = frame[frame["objective"] != ""], frame[frame["objective"] == ""]
    if adapted.empty or plain.empty:
        return pd.DataFrame()
    reference = plain[[*MATCH, "mechanism", "config_hash", "mean", "std", "n"]].rename(
        columns={"mean": "unadapted", "std": "unadapted_std", "n": "unadapted_n", "config_hash": "reference_hash"})
    joined = adapted.merge(reference, on=[*MATCH, "mechanism"], how="inner")
    joined = joined.rename(columns={"mean": "adapted", "std": "adapted_std", "n": "adapted_n"})
    joined = joined.merge(_paired(joined, seeds), on=["config_hash", "reference_hash", "metric"], how="left")
    unpaired = joined["gain_n"].isna()
    joined.loc[unpaired, "gain"] = (joined["adapted"] - joined["unadapted"])[unpaired]
    joined["gain_n"] = joined["gain_n"].fillna(0).astype(int)
    return joined[[*MATCH, "mechanism", "objective", "adapted", "adapted_std", "adapted_n", "unadapted",
                   "unadapted_std", "unadapted_n", "gain", "gain_n", "gain_ci95"]].reset_index(drop=True)


def _paired(joined: pd.DataFrame, seeds: pd.DataFrame | None) -> pd.DataFrame:
    """Per (adapted, reference, metric): the mean, count and 95% half-width of the per-seed differences."""
    columns = ["config_hash", "reference_hash", "metric", "gain", "gain_n", "gain_ci95"]
    if seeds is None or seeds.empty:
        return pd.DataFrame(columns=columns)
    values = seeds[["config_hash", "metric", "seed", "value"]]
    pairs = joined[["config_hash", "reference_hash", "metric"]].drop_duplicates()
    both = (pairs.merge(values, on=["config_hash", "metric"])
            .merge(values.rename(columns={"config_hash": "reference_hash", "value": "reference"}),
                   on=["reference_hash", "metric", "seed"]))
    if both.empty:
        return pd.DataFrame(columns=columns)
    both["difference"] = both["value"] - both["reference"]
    table = (both.groupby(["config_hash", "reference_hash", "metric"])["difference"]
             .agg(gain="mean", gain_std="std", gain_n="size").reset_index())
    table["gain_ci95"] = ci95_half_width(table["gain_std"].fillna(0.0), table["gain_n"])
    return table[columns]


def gain_chart(gains: pd.DataFrame, parameter: str) -> alt.Chart:
    """Utility gained over the unadapted encoder against the mechanism's parameter, one line per objective."""
    data = gains.assign(value=gains["mechanism"].map(lambda m: float(parse_args(m).get(parameter, "nan"))))
    x = alt.X("value:Q", title=parameter, scale=alt.Scale(type="log"))
    lines = alt.Chart(data).mark_line(point=True).encode(
        x=x, y=alt.Y("gain:Q", title="utility gained by adaptation"),
        color=alt.Color("objective:N", title="objective", scale=alt.Scale(range=OKABE_ITO)),
        tooltip=["objective", "mechanism", "adapted", "unadapted", "gain", "gain_n", "gain_ci95"])
    zero = alt.Chart(pd.DataFrame({"gain": [0.0]})).mark_rule(strokeDash=[6, 4], color="gray").encode(y="gain:Q")
    return (lines + zero).properties(height=320)


def sweep_parameter(gains: pd.DataFrame) -> str | None:
    """The one numeric mechanism argument that varies across the rows, if there is one."""
    varying = varying_arguments([parse_args(m) for m in gains["mechanism"].unique()])
    return varying[0] if len(varying) == 1 else None
