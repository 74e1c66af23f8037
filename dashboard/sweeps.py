"""Privacy-parameter sweeps on the dashboard: utility and attack success against eta, eps, m, ...

A sweep is a set of a defense's recorded settings that differ in exactly one numeric argument (the
others held fixed), for one task, encoder, attack and mode. Reads the leaderboard frame only.
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


def with_settings(board: pd.DataFrame) -> pd.DataFrame:
    """The board with each setting as the defense's and the server's arguments together (``eta=60,adapt=prob``),
    so adapted and unadapted settings form separate sweeps; idempotent (``server_args`` is folded in once)."""
    if "server_args" not in board:
        return board
    board = board.copy()
    server = board.pop("server_args").astype("string").fillna("").astype(str)
    board["defense_args"] = [",".join(filter(None, pair)) for pair in zip(board["defense_args"].fillna("").astype(str),
                                                                         server)]
    return board


def sweeps(board: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``board`` that belong to a sweep, with ``parameter``, ``value`` and ``fixed`` columns.

    A sweep over a numeric argument is every recorded setting that has it and agrees on all the other
    arguments (so adapt=... or adapt_lr=... settings form their own eta sweeps). A row can be in two
    sweeps, one per argument it shares a sweep in.
    """
    board = with_settings(board)
    parts = []
    for _, group in board.groupby(GROUP, dropna=False):
        settings = {text: parse_args(text) for text in group["defense_args"].unique()}
        names = {k for args in settings.values() for k, v in args.items() if _number(v) is not None}
        for name in sorted(names):
            lines: dict[str, list[str]] = {}
            for text, args in settings.items():
                if _number(args.get(name, "")) is not None:
                    fixed = ",".join(f"{k}={v}" for k, v in args.items() if k != name)
                    lines.setdefault(fixed, []).append(text)
            for fixed, texts in lines.items():
                if len(texts) >= 2:
                    rows = group[group["defense_args"].isin(texts)]
                    parts.append(rows.assign(parameter=name, fixed=fixed,
                                             value=rows["defense_args"].map(lambda t: _number(settings[t][name]))))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def varying_arguments(settings: list[dict[str, str]]) -> list[str]:
    """The argument names (sorted) whose value differs between the parsed ``settings``."""
    names = set().union(*settings) if settings else set()
    return [n for n in sorted(names) if len({s.get(n) for s in settings}) > 1]


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
