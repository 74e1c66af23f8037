"""Privacy-parameter sweeps on the dashboard: utility and attack success against eta, eps, m, ...

A sweep is a defense whose recorded settings differ in exactly one numeric argument (the others
held fixed), for one task, encoder, attack and mode. Reads the leaderboard frame only.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

GROUP = ["task", "encoder", "defense", "attack", "mode", "n_train", "n_eval"]


def parse_args(text) -> dict[str, str]:
    """``"eps=4.0,p=0.3"`` -> ``{"eps": "4.0", "p": "0.3"}`` (a missing value has no arguments)."""
    if not isinstance(text, str):
        return {}
    return dict(part.split("=", 1) for part in text.split(",") if "=" in part)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def sweeps(board: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``board`` that belong to a sweep, with ``parameter``, ``value`` and ``fixed`` columns."""
    parts = []
    for _, group in board.groupby(GROUP, dropna=False):
        # settings that differ in a non-numeric argument (adapt=..., scheme=...) belong to different sweeps
        kinds = group["defense_args"].map(
            lambda text: ",".join(f"{k}={v}" for k, v in parse_args(text).items() if _number(v) is None))
        for _, rows in group.groupby(kinds):
            found = _sweep(rows)
            if found is not None:
                parts.append(found)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def varying_arguments(settings: list[dict[str, str]]) -> list[str]:
    """The argument names (sorted) whose value differs between the parsed ``settings``."""
    names = set().union(*settings) if settings else set()
    return [n for n in sorted(names) if len({s.get(n) for s in settings}) > 1]


def _sweep(rows: pd.DataFrame) -> pd.DataFrame | None:
    """``rows`` with the sweep columns, if its settings differ in exactly one numeric argument."""
    settings = {text: parse_args(text) for text in rows["defense_args"].unique()}
    if len(settings) < 2:
        return None
    varying = varying_arguments(list(settings.values()))
    if len(varying) != 1 or any(_number(s.get(varying[0], "")) is None for s in settings.values()):
        return None
    name = varying[0]
    fixed = {text: ",".join(f"{k}={v}" for k, v in s.items() if k != name) for text, s in settings.items()}
    return rows.assign(
        parameter=name,
        value=rows["defense_args"].map(lambda text: _number(settings[text][name])),
        fixed=rows["defense_args"].map(fixed),
    )


def sweep_chart(rows: pd.DataFrame, metrics: list[str]) -> alt.Chart:
    """Mean ± std of each metric against the swept parameter (log axis), one line per metric."""
    parameter = rows["parameter"].iloc[0]
    data = rows[rows["metric"].isin(metrics)].assign(
        low=lambda f: f["mean"] - f["std"].fillna(0), high=lambda f: f["mean"] + f["std"].fillna(0)
    )
    x = alt.X("value:Q", title=parameter, scale=alt.Scale(type="log"))
    base = alt.Chart(data).encode(x=x, color=alt.Color("metric:N", title=None))
    lines = base.mark_line(point=True).encode(
        y=alt.Y("mean:Q", title="mean over seeds"), tooltip=["metric", "value", "mean", "std", "n"]
    )
    bars = base.mark_errorbar().encode(y="low:Q", y2="high:Q")
    return (lines + bars).properties(height=320)
