"""Utility gained by privacy-adaptive pretraining, per privacy parameter (the view of Qu et al. Tables 6-7).

An adapted row is a defense setting with ``adapt=<objective>``; its reference is the recorded setting
with the same mechanism arguments and no ``adapt`` (same task, encoder, attack, mode and sizes). The
gain is the difference of their mean utilities. Reads the leaderboard frame only.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from dashboard.sweeps import parse_args, varying_arguments, with_settings

MATCH = ["task", "encoder", "defense", "attack", "mode", "n_train", "n_eval", "metric"]


def _mechanism(args: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in args.items() if not k.startswith("adapt"))


def _variant(args: dict[str, str]) -> str:
    """The objective, with the adaptation budget when it is not the default (adapt_steps=..., adapt_lr=...)."""
    budget = ",".join(f"{k}={v}" for k, v in args.items() if k.startswith("adapt_"))
    return f"{args.get('adapt', '')} ({budget})" if budget else args.get("adapt", "")


def adaptation_gains(board: pd.DataFrame) -> pd.DataFrame:
    """One row per adapted utility metric: the mechanism, objective, adapted and unadapted means, and the gain."""
    board = with_settings(board)
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
    reference = plain[[*MATCH, "mechanism", "mean", "std", "n"]].rename(
        columns={"mean": "unadapted", "std": "unadapted_std", "n": "unadapted_n"})
    joined = adapted.merge(reference, on=[*MATCH, "mechanism"], how="inner")
    joined = joined.rename(columns={"mean": "adapted", "std": "adapted_std", "n": "adapted_n"})
    joined["gain"] = joined["adapted"] - joined["unadapted"]
    return joined[[*MATCH, "mechanism", "objective", "adapted", "adapted_std", "adapted_n", "unadapted",
                   "unadapted_std", "unadapted_n", "gain"]].reset_index(drop=True)


def gain_chart(gains: pd.DataFrame, parameter: str) -> alt.Chart:
    """Utility gained over the unadapted encoder against the mechanism's parameter, one line per objective."""
    data = gains.assign(value=gains["mechanism"].map(lambda m: float(parse_args(m).get(parameter, "nan"))))
    x = alt.X("value:Q", title=parameter, scale=alt.Scale(type="log"))
    lines = alt.Chart(data).mark_line(point=True).encode(
        x=x, y=alt.Y("gain:Q", title="utility gained by adaptation (mean over seeds)"),
        color=alt.Color("objective:N", title="objective"),
        tooltip=["objective", "mechanism", "adapted", "unadapted", "gain", "adapted_n", "unadapted_n"])
    zero = alt.Chart(pd.DataFrame({"gain": [0.0]})).mark_rule(strokeDash=[6, 4], color="gray").encode(y="gain:Q")
    return (lines + zero).properties(height=320)


def sweep_parameter(gains: pd.DataFrame) -> str | None:
    """The one numeric mechanism argument that varies across the rows, if there is one."""
    varying = varying_arguments([parse_args(m) for m in gains["mechanism"].unique()])
    return varying[0] if len(varying) == 1 else None
