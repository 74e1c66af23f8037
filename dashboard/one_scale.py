"""The dashboard's one-scale view: every defense family's utility against one privacy axis, and utility at matched
attack success (``bench.results.one_scale``)."""

from __future__ import annotations

import math

import pandas as pd

from bench.dashboard.markdown import literal
from bench.results.one_scale import (
    AUDIT_LEGEND,
    AXES,
    LEGEND,
    MATCHED_LEGEND,
    SETTINGS_COLUMNS,
    audits,
    matched_shown,
    settings,
)

CHART_AXES = {**AXES, "formal ε (DP-SGD only)": "formal ε"}


def family_chart(table: pd.DataFrame, axis: str, title: str, utility: str):
    """Utility against ``axis``: one line per family through its settings sorted by the axis; None when no setting
    has both numbers (infinite values, such as DP-SGD's ε = ∞, are left out)."""
    import altair as alt

    points = table.replace([math.inf, -math.inf], math.nan).dropna(subset=[axis, "utility"])
    if points.empty:
        return None
    points = points.assign(privacy=points[axis]).sort_values(["family", "privacy"], kind="stable")
    base = alt.Chart(points).encode(
        x=alt.X("privacy:Q", title=title), y=alt.Y("utility:Q", title=utility, scale=alt.Scale(zero=False)),
        color=alt.Color("family:N", legend=alt.Legend(title="family", labelLimit=400)))
    return (base.mark_line(point=True)
            .encode(order="privacy:Q", tooltip=["family", "arguments", "utility", "privacy", "strongest"]))


def render_one_scale(shown: pd.DataFrame, task: str, utility: str | None, applicable,
                     audit_reports: list[dict] = (), source: str = "") -> None:
    """The view: the privacy axis to read, the chart, utility at matched attack success and the settings, then the
    token mechanisms' published audits (``source``: the folder they were read from)."""
    import streamlit as st

    table = settings(shown, task, utility, applicable)
    st.subheader(f"One scale on {literal(task)}: every defense family side by side")
    if table.empty:
        st.info("No attacked setting matches these filters.")
        return
    name = utility.rsplit("/", 1)[-1] if utility else "utility"
    title = st.radio("privacy axis", list(CHART_AXES), horizontal=True, key=f"onescale:{task}")
    axis = CHART_AXES[title]
    chart = family_chart(table, axis, title, name)
    if chart is None:
        st.info(f"No setting of {literal(task)} has both {literal(name)} and {literal(title)}.")
    else:
        st.altair_chart(chart, width="stretch")
    if axis in AXES.values():
        found = matched_shown(table, axis, name)
        st.caption(f"Utility at matched {literal(title)}. {MATCHED_LEGEND}")
        st.dataframe(found, hide_index=True, width="stretch")
    st.caption(LEGEND)
    st.dataframe(table[SETTINGS_COLUMNS].rename(columns={"utility": name}), hide_index=True, width="stretch")
    audited = audits(list(audit_reports))
    if not audited.empty:
        st.markdown("**The token mechanisms' own guarantee, audited**")
        st.caption(AUDIT_LEGEND.format(source=source))
        st.dataframe(audited, hide_index=True, width="stretch")
