"""Streamlit privacy-utility leaderboard over results/ (CSV and JSON only: no torch, no pickle).

Run with ``bench dashboard``. Reads ``<results>/leaderboard.csv`` (written by ``bench summarize``) and
``<results>/analysis/deniability-*.json`` (written by ``bench analyze deniability``) and
``<results>/reproduction/*.json`` (written by ``bench reproduce``) from
``$BENCH_RESULTS_DIR`` or ``./results``.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from bench.results.store import ResultStore
from dashboard.adaptation import adaptation_gains, gain_chart, sweep_parameter
from dashboard.deniability import render_deniability
from dashboard.markdown import literal
from dashboard.reproduction import render_reproduction
from dashboard.sweeps import sweep_chart, sweeps, with_settings

CONFIG_KEYS = ["task", "encoder", "defense", "defense_args", "attack", "mode", "n_train", "n_eval", "config_hash"]


@st.cache_data(show_spinner=False)
def load_board(path: str, mtime: float) -> pd.DataFrame:
    """The leaderboard table (``mtime`` invalidates the cache when the file changes)."""
    board = pd.read_csv(path, keep_default_na=False, na_values=[""])
    board["defense_args"] = board["defense_args"].fillna("").astype(str)
    board = with_settings(board)  # a setting is the client's mechanism and the server's options together
    board["attack"] = board["attack"].fillna("").astype(str)
    return board


def point_label(row: pd.Series) -> str:
    """``texthide(m=256,k=4)``, or the bare name for a defense without parameters."""
    return f"{row['defense']}({row['defense_args']})" if row["defense_args"] else row["defense"]


def wide_table(board: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration, one column per metric, cells ``mean ± std (n)``."""
    cells = board.assign(
        value=board.apply(lambda r: f"{r['mean']:.3f} ± {r['std']:.3f} (n={int(r['n'])})", axis=1)
    )
    table = cells.pivot_table(index=CONFIG_KEYS, columns="metric", values="value", aggfunc="first")
    return table.reset_index().drop(columns=["config_hash"])


def scatter(board: pd.DataFrame, attack: str, utility: str, privacy: str) -> alt.Chart | None:
    """Privacy (attack success) against utility, one labelled point per defense setting."""
    keys = CONFIG_KEYS
    x = board[board["metric"] == utility].set_index(keys)["mean"].rename("utility")
    y = board[board["metric"] == f"privacy/{attack}/{privacy}"].set_index(keys)["mean"].rename("privacy")
    points = pd.concat([x, y], axis=1, join="inner").reset_index()
    if points.empty:
        return None
    points["label"] = points.apply(point_label, axis=1)
    base = alt.Chart(points).encode(
        x=alt.X("utility:Q", title=utility, scale=alt.Scale(zero=False)),
        y=alt.Y("privacy:Q", title=f"{attack} {privacy} (higher = more recovered)"),
        tooltip=["label", "encoder", "mode", "utility", "privacy"],
    )
    chart = base.mark_circle(size=90).encode(color="defense:N") + base.mark_text(
        align="left", dx=7, dy=-6
    ).encode(text="label:N")
    random_rows = board[board["metric"] == f"random/{attack}/{privacy}"]
    if not random_rows.empty:
        rule = pd.DataFrame({"random": [random_rows["mean"].mean()], "what": ["random guess"]})
        chart += alt.Chart(rule).mark_rule(strokeDash=[6, 4], color="gray").encode(y="random:Q")
        chart += alt.Chart(rule).mark_text(align="left", dy=-6, color="gray").encode(
            y="random:Q", text="what:N", x=alt.value(4)
        )
    return chart.properties(height=380)


def render_sweeps(shown: pd.DataFrame, task: str) -> None:
    """One chart per privacy-parameter sweep: utility and attack success against the parameter."""
    found = sweeps(shown)
    if found.empty:
        return
    st.subheader(f"Privacy parameter sweeps on {literal(task)}")
    for (defense, attack, parameter, fixed), rows in found.groupby(["defense", "attack", "parameter", "fixed"]):
        known = sorted(m for m in rows["metric"].unique()
                       if m.startswith("utility/") or m.startswith(f"privacy/{attack}/"))
        key = f"sweep-{defense}-{attack}-{parameter}-{fixed}"
        label = (f"{literal(defense)} ({literal(fixed) if fixed else 'no other parameters'}) against "
                 f"{literal(attack) if attack else 'no attack'}: metrics against {literal(parameter)}")
        chosen = st.multiselect(label, known + sorted(
                                    m for m in rows["metric"].unique() if m.startswith(f"random/{attack}/")),
                                default=known[:4], key=key)
        if chosen:
            st.altair_chart(sweep_chart(rows, chosen), width="stretch")


def render_adaptation(shown: pd.DataFrame, task: str) -> None:
    """Utility gained by privacy-adaptive pretraining over the unadapted encoder, per privacy parameter."""
    gains = adaptation_gains(shown)
    if gains.empty:
        return
    st.subheader(f"Privacy-adaptive pretraining on {literal(task)}: utility gained over the unadapted encoder")
    st.dataframe(gains.drop(columns=["task"]), hide_index=True, width="stretch")
    for (defense, attack, metric), rows in gains.groupby(["defense", "attack", "metric"]):
        parameter = sweep_parameter(rows)
        if parameter is not None:
            st.caption(f"{literal(defense)} ({literal(metric)}, cells attacked by "
                       f"{literal(attack) if attack else 'no attack'})")
            st.altair_chart(gain_chart(rows, parameter), width="stretch")


def main() -> None:
    """The page: the leaderboard, plausible deniability and paper-vs-ours tabs."""
    st.set_page_config(page_title="Text privacy leaderboard", layout="wide")
    st.title("Privacy-utility leaderboard")
    store = ResultStore()
    board_tab, deniability_tab, paper_tab = st.tabs(["Leaderboard", "Plausible deniability", "Paper vs ours"])
    with board_tab:
        leaderboard(store)
    with deniability_tab:
        render_deniability(store.root)
    with paper_tab:
        render_reproduction(store.root)


def leaderboard(store: ResultStore) -> None:
    """Filters, the leaderboard table and one privacy-utility scatter per attack."""
    path = store.leaderboard_path
    if not path.is_file():
        st.info(f"No leaderboard at {literal(path)}: run `bench run ...`, then `bench summarize`.")
        return
    board = load_board(str(path), path.stat().st_mtime)
    if board.empty:
        st.info("The leaderboard is empty: run `bench run ...`, then `bench summarize`.")
        return

    with st.sidebar:
        st.header("Filters")
        task = st.selectbox("task", sorted(board["task"].unique()), key="task")
        attacks_known = sorted(a for a in board["attack"].unique() if a)
        attacks = st.multiselect("attack", attacks_known, default=attacks_known, key="attack")
        encoders_known = sorted(board["encoder"].unique())
        encoders = st.multiselect("encoder", encoders_known, default=encoders_known, key="encoder")
    shown = board[(board["task"] == task) & board["encoder"].isin(encoders)]
    shown = shown[shown["attack"].isin(attacks) | (shown["attack"] == "")]
    if shown.empty:
        st.info("No results match these filters.")
        return
    if not attacks:
        st.info("Select an attack in the sidebar to see privacy against utility; no attack is selected.")

    st.caption(
        "Means over seeds (± sample std, n seeds). privacy/* is what the attack recovered (higher = "
        "weaker defense); random/* is a random guess scored the same way in the same runs."
    )
    st.dataframe(wide_table(shown), hide_index=True, width="stretch")

    utility_metrics = sorted(m for m in shown["metric"].unique() if m.startswith("utility/"))
    for attack in attacks:
        privacy_metrics = sorted(
            m.split("/", 2)[2] for m in shown["metric"].unique() if m.startswith(f"privacy/{attack}/")
        )
        if not privacy_metrics or not utility_metrics:
            continue
        st.subheader(f"{literal(attack)}: privacy against utility on {literal(task)}")
        left, right = st.columns(2)
        utility = left.selectbox("utility metric", utility_metrics, key=f"utility-{attack}")
        privacy = right.selectbox("attack metric", privacy_metrics, key=f"privacy-{attack}")
        chart = scatter(shown[shown["attack"] == attack], attack, utility, privacy)
        if chart is not None:
            st.altair_chart(chart, width="stretch")
    render_sweeps(shown, task)
    render_adaptation(shown, task)


main()
