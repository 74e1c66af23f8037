"""Plausible deniability on the dashboard: the distributions of N_w and S_w against eta (as Qu et al.
2021, Fig. 4) and the etas the worst-case and average-case rules select.

Reads ``<results>/analysis/deniability-*.json`` (written by ``bench analyze deniability``) with the
standard library: no bench import, no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from bench.dashboard.markdown import code, literal
from bench.dashboard.reports import load_json_reports

REQUIRED = ("encoder", "mechanism", "trials", "tokens", "etas", "per_eta", "selections", "thresholds")
QUANTILES = {"q05": 0.05, "q25": 0.25, "median": 0.5, "q75": 0.75, "q95": 0.95}


def load_reports(root: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every readable deniability report under ``root/analysis``, and one sentence per unreadable file."""
    return load_json_reports(Path(root) / "analysis", "deniability-*.json", REQUIRED)


def quantile_frame(report: dict[str, Any]) -> pd.DataFrame:
    """One row per (eta, statistic): min, 5/25/50/75/95% quantiles, max and mean over the tokens."""
    rows = []
    for entry in report["per_eta"]:
        for statistic in ("n_w", "s_w"):
            values = np.asarray(entry[statistic], dtype=float)
            row = {"eta": float(entry["eta"]), "statistic": statistic, "mean": values.mean(),
                   "min": values.min(), "max": values.max()}
            row.update({name: float(np.quantile(values, q)) for name, q in QUANTILES.items()})
            rows.append(row)
    return pd.DataFrame(rows)


def box_chart(frame: pd.DataFrame, statistic: str, title: str, bound: float, bound_label: str,
              parameter: str = "eta") -> alt.LayerChart:
    """Box plot per parameter value: 5-95% whiskers, 25-75% box, median tick, mean diamond, the bound dashed."""
    data = frame[frame["statistic"] == statistic]
    x = alt.X("eta:O", title=f"{parameter} (larger = less noise)", sort=sorted(data["eta"].unique()))
    base = alt.Chart(data).encode(x=x, tooltip=["eta", "mean", "min", "q05", "q25", "median", "q75", "q95", "max"])
    whiskers = base.mark_rule().encode(y=alt.Y("q05:Q", title=title), y2="q95:Q")
    box = base.mark_bar(size=22, opacity=0.55).encode(y="q25:Q", y2="q75:Q")
    median = base.mark_tick(size=22, thickness=2, color="black").encode(y="median:Q")
    mean = base.mark_point(shape="diamond", filled=True, color="firebrick").encode(y="mean:Q")
    rule = pd.DataFrame({"bound": [bound], "what": [bound_label]})
    line = alt.Chart(rule).mark_rule(strokeDash=[6, 4], color="gray").encode(y="bound:Q")
    label = alt.Chart(rule).mark_text(align="left", dy=-6, color="gray").encode(
        y="bound:Q", text="what:N", x=alt.value(4))
    return (whiskers + box + median + mean + line + label).properties(height=300)


def selections_frame(report: dict[str, Any]) -> pd.DataFrame:
    """One row per rule: its condition, the selected eta and the eta each statistic alone allows."""
    rows = []
    for rule, chosen in report["selections"].items():
        by = chosen.get("by_statistic", {})
        rows.append({"rule": rule.replace("_", " "), "selected eta": _eta(chosen.get("eta")),
                     "condition": chosen.get("rule", ""), "N_w alone": _eta(by.get("n_w")),
                     "S_w alone": _eta(by.get("s_w"))})
    return pd.DataFrame(rows)


def _eta(value) -> str:
    return "none of the grid" if value is None else f"{value:g}"


def render_deniability(root: Path) -> None:
    """The section: pick a report, read its selections, see N_w and S_w against eta."""
    reports, problems = load_reports(root)
    for problem in problems:
        st.warning(literal(problem))
    if not reports:
        st.info(f"No plausible deniability analysis in {literal(Path(root) / 'analysis')}: run "
                "`bench analyze deniability`.")
        return
    labels = [f"{r['mechanism']} · {r['encoder']} · {r['tokens']} tokens × T={r['trials']}" for r in reports]
    index = 0
    if len(reports) > 1:
        index = st.selectbox("analysis", range(len(reports)), format_func=labels.__getitem__, key="deniability")
    report = reports[index]
    trials, bounds = report["trials"], report["thresholds"]
    st.caption(
        f"{literal(labels[index])} ({literal(report.get('token_sample', 'seeded'))} sample, seed "
        f"{literal(report.get('seed'))}). Each "
        f"token is perturbed T={literal(trials)} times at each eta; N_w counts the outputs equal to the token (small "
        f"= deniable), S_w the distinct outputs (large = deniable). {code(report.get('command', ''))}"
    )
    st.dataframe(selections_frame(report), hide_index=True, width="stretch")
    frame = quantile_frame(report)
    parameter = report.get("parameter", "eta")
    left, right = st.columns(2)
    left.altair_chart(box_chart(frame, "n_w", f"N_w (of T = {trials})", bounds["max_unchanged"] * trials,
                                f"bound {bounds['max_unchanged']:g}·T", parameter), width="stretch")
    right.altair_chart(box_chart(frame, "s_w", "S_w (distinct outputs)", bounds["min_support"],
                                 f"bound {bounds['min_support']}", parameter), width="stretch")
    st.caption("Whiskers: 5-95% of tokens; box: 25-75%; black tick: median; diamond: mean.")
