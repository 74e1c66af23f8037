"""Privacy-parameter sweeps on the dashboard: utility and attack success against eta, eps, m, ...

A sweep is a set of a defense's recorded settings that differ in exactly one numeric argument (the
others held fixed), for one task, encoder, attack with its arguments, mode, server options and sizes (so a
line never zigzags across encoders or attackers). Reads the leaderboard frame only.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from bench.dashboard.charts import OKABE_ITO

GROUP = ["task", "encoder", "defense", "attack", "attack_args", "mode", "n_train", "n_eval"]


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
    if "attack_args" not in board:
        board = board.assign(attack_args="")
    board = board.assign(attack_args=board["attack_args"].astype("string").fillna("").astype(str))
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


def x_axis(values, parameter: str) -> alt.X:
    """The swept parameter's axis: log when every value is positive and finite and they span a decade, ordinal
    (values in numeric order, ``inf`` last) when one is 0, negative or infinite, else linear."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if len(finite) < len(values) or any(v <= 0 for v in finite):
        order = [_label(v) for v in sorted(values, key=lambda v: (not math.isfinite(v), v))]
        return alt.X("value_label:O", title=f"{parameter} (ordinal: 0 and ∞ have no place on a log axis)",
                     sort=order, axis=alt.Axis(labelAngle=0))
    if finite and max(finite) / min(finite) >= 10:
        return alt.X("value:Q", title=f"{parameter} (log)", scale=alt.Scale(type="log"))
    return alt.X("value:Q", title=parameter, scale=alt.Scale(zero=False))


def _label(value: float) -> str:
    return "∞" if value == math.inf else f"{value:g}"


def series_name(metric: str, higher_is_better: bool) -> str:
    """A legend entry with the metric's declared direction."""
    kind, _, rest = metric.partition("/")
    if kind == "utility":
        return f"{rest} ({'higher' if higher_is_better else 'lower'} = more useful)"
    name = rest.split("/", 1)[-1]
    if kind == "random":
        return f"random guess: {name}"
    return f"{name} ({'higher' if higher_is_better else 'lower'} = more recovered)"


def sweep_chart(rows: pd.DataFrame, metrics: list[str]) -> alt.VConcatChart:
    """Utility (top) and attack success with its random guess dashed (bottom) against the swept parameter,
    mean ± std over seeds; the x axis handles 0 and ∞ (``x_axis``)."""
    parameter = rows["parameter"].iloc[0]
    data = rows[rows["metric"].isin(metrics)].assign(
        low=lambda f: f["mean"] - f["std"].fillna(0), high=lambda f: f["mean"] + f["std"].fillna(0)
    )
    up = data.get("higher_is_better", pd.Series(True, index=data.index))
    up = up.map(lambda h: str(h).strip().lower() not in ("false", "0"))
    data = data.assign(series=[series_name(m, h) for m, h in zip(data["metric"], up)],
                       value_label=data["value"].map(_label), kind=data["metric"].str.split("/").str[0])
    x = x_axis(list(data["value"].unique()), parameter)
    panels = []
    for kinds, title in ((("utility",), "utility (mean ± std over seeds)"),
                         (("privacy", "random"), "attack success (mean ± std over seeds)")):
        part = data[data["kind"].isin(kinds)]
        if part.empty:
            continue
        base = alt.Chart(part).encode(x=x, color=alt.Color("series:N", title=None, scale=alt.Scale(range=OKABE_ITO),
                                                           legend=alt.Legend(orient="bottom", columns=2,
                                                                             labelLimit=400)))
        lines = base.mark_line(point=True).encode(
            y=alt.Y("mean:Q", title=title, scale=alt.Scale(zero=False)),
            strokeDash=alt.condition(alt.datum.kind == "random", alt.value([6, 4]), alt.value([1, 0])),
            tooltip=["metric", "value_label", "mean", "std", "n"])
        # the bars' y carries the same title: untitled, its field name was merged into the axis title (", low")
        bars = base.mark_errorbar().encode(y=alt.Y("low:Q", title=title, scale=alt.Scale(zero=False)), y2="high:Q")
        panels.append((lines + bars).properties(height=240))
    return alt.vconcat(*panels).resolve_scale(color="independent")
