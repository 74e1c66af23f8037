"""Paper vs ours on the dashboard: each `bench reproduce` report, row by row, and its claims' verdicts.

Reads ``<results>/reproduction/*.json`` (written by ``bench reproduce <table>``) with the standard library:
no bench import, no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from bench.dashboard.markdown import code, literal
from bench.dashboard.reports import load_json_reports

REQUIRED = ("table", "title", "rows", "claims", "summary")


def load_reports(root: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every readable reproduction report under ``root/reproduction``, and one sentence per unreadable file."""
    return load_json_reports(Path(root) / "reproduction", "*.json", REQUIRED)


def rows_frame(report: dict[str, Any], recorded_only: bool = False) -> pd.DataFrame:
    """One line per paper cell: the paper's value (and std) beside our mean ± std over n seeds."""
    lines = []
    for row in report["rows"]:
        ours, paper = row["ours"], row["paper"]
        if recorded_only and ours.get("mean") is None:
            continue
        setting = ours.get("setting") or {}
        lines.append({"row": row["id"], "metric": row["metric"], "paper": paper.get("value"),
                      "paper std": paper.get("std"), "ours": ours.get("mean"), "ours std": ours.get("std"),
                      "n": ours.get("n", 0), "ours - paper": row.get("difference"),
                      "our setting": " ".join(str(setting.get(k, "")) for k in ("encoder", "n_train", "mode"))
                      if setting else "",
                      "note": ours.get("note") or ("" if ours.get("mean") is not None else "no records")})
    return pd.DataFrame(lines)


def claims_frame(report: dict[str, Any]) -> pd.DataFrame:
    """One line per named claim: our verdict, the same checks on the paper's numbers, and what was checked."""
    lines = []
    for claim in report["claims"]:
        checks = claim.get("checks", [])
        checked = sum(c.get("verdict") in ("holds", "fails") for c in checks)
        idle = sum(c.get("verdict") == "not applicable" for c in checks)
        failing = "; ".join(c.get("detail", "") for c in checks if c.get("verdict") == "fails")
        unresolved = "; ".join(c.get("detail", "") for c in checks if c.get("verdict") == "unresolved")
        lines.append({"claim": claim["id"], "ours": claim["verdict"], "paper": claim.get("paper_verdict", ""),
                      "checked": f"{checked}/{len(checks)}" + (f" ({idle} at chance)" if idle else ""),
                      "statement": claim.get("text", ""), "failing checks": failing,
                      "unresolved by the seeds": unresolved, "paper says": claim.get("paper_says", "")})
    return pd.DataFrame(lines)


def render_reproduction(root: Path) -> None:
    """The section: pick a table, read its claims' verdicts, then the paper's cells beside ours."""
    reports, problems = load_reports(root)
    for problem in problems:
        st.warning(literal(problem))  # a file name or its contents are never Markdown (a link, an image)
    if not reports:
        st.info(f"No reproduction report in {Path(root) / 'reproduction'}: run "
                f"{code(f'bench reproduce <table> --results-dir {root}')} (`bench reproduce` lists the tables).")
        return
    labels = [f"{r['title']} ({r['table']})" for r in reports]
    index = st.selectbox("table", range(len(reports)), format_func=labels.__getitem__, key="reproduction")
    report = reports[index]
    summary = report["summary"]
    counts = ", ".join(f"{n} {verdict}" for verdict, n in summary.get("claims", {}).items())
    st.caption(f"{literal(report.get('paper', ''))} · {summary['rows_with_records']} of {summary['rows']} cells "
               f"have records · claims: {literal(counts)} · {code(report.get('command', ''))}")
    for side, key in (("paper", "paper_setting"), ("ours", "our_setting")):
        setting = report.get(key) or {}
        if setting:
            st.markdown(f"**{side}**: " + " · ".join(f"{literal(k)} {literal(v)}" for k, v in setting.items()))
    for deviation in report.get("deviations", []):
        st.caption(f"deviation: {literal(deviation)}")
    st.subheader("Claims")
    st.dataframe(claims_frame(report), hide_index=True, width="stretch")
    st.subheader("Paper vs ours")
    recorded_only = st.checkbox("only cells with records", value=True, key="reproduction-recorded")
    st.dataframe(rows_frame(report, recorded_only), hide_index=True, width="stretch")
