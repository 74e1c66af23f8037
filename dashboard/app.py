"""Streamlit privacy-utility leaderboard over a results folder (JSON lines, CSV and JSON only: no torch, no pickle).

Run with ``bench dashboard``. Two sources: your runs (``$BENCH_RESULTS_DIR``, else ``./bench-results``, where
``bench run`` writes) and the published board (the checkout's committed ``results/``); the sidebar switches
between them, and shows your runs beside the published board on one leaderboard (the default when
``./bench-results`` has runs). The board is built from ``<results>/records/*.jsonl`` (a folder with only
``leaderboard.csv`` is read from that, without provenance); the other tabs read
``<results>/analysis/deniability-*.json`` and ``<results>/reproduction/*.json``. Data are read once per change of
the files (``st.cache_data``); every filter is kept per source and task, so switching either never carries another
board's choices over; the view's state (source, task, attack, view, metrics, row) is kept in the URL.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import streamlit as st

from bench.dashboard.adaptation import adaptation_gains, gain_chart, sweep_parameter
from bench.dashboard.charts import YOURS, scatter
from bench.dashboard.deniability import render_deniability
from bench.dashboard.markdown import literal
from bench.dashboard.one_scale import render_one_scale
from bench.dashboard.reproduction import render_reproduction
from bench.dashboard.sweeps import sweep_chart, sweeps
from bench.engine.applicable import applicable_attacks
from bench.results.leaderboard import aggregate, seed_frame
from bench.results.one_scale import read_audits
from bench.results.store import ResultStore, default_results_dir, published_results_dir
from bench.results.views import (
    ADVANTAGE,
    WORST,
    defense_order,
    direction,
    display_columns,
    headline_metrics,
    is_test_encoder,
    majority_by_config,
    ranked,
    short,
)

PUBLISHED = published_results_dir().resolve()  # the checkout's committed board
SCOPES = {YOURS: "yours", "published": "published"}  # a source's name in widget keys and the URL
TEXT_COLUMNS = ("arguments", "server", "attack args")  # shown whole: settings can differ only at their end
VIEWS = ["Privacy vs utility", "Sweeps", "Adaptation", "One scale"]


def _stamp(root: Path) -> tuple:
    """What the cache is keyed on: every input file with its size and modification time."""
    files = sorted((root / "records").glob("*.jsonl")) if (root / "records").is_dir() else []
    files += [root / "leaderboard.csv"] if (root / "leaderboard.csv").is_file() else []
    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)


@st.cache_data(show_spinner=False, max_entries=8)
def load(root: str, stamp: tuple) -> tuple[pd.DataFrame, pd.DataFrame, dict, list[str]]:
    """(board, per-seed values, raw records by config hash, problems): from the records when there are any,
    else from ``leaderboard.csv`` (no per-seed values then)."""
    store = ResultStore(root)
    records, problems = store.read()
    if records:
        seeds = seed_frame(records)
        board = aggregate(seeds, with_order=True)
        raw: dict[str, list[dict]] = {}
        for record in records:
            raw.setdefault(record.config_hash, []).append(record.model_dump(mode="json"))
    elif store.leaderboard_path.is_file():
        board = pd.read_csv(store.leaderboard_path, keep_default_na=False, na_values=[""])
        seeds, raw = pd.DataFrame(), {}
    else:
        return pd.DataFrame(), pd.DataFrame(), {}, [str(p) for p in problems]
    for column in ("defense_args", "server_args", "attack", "attack_args", "mode"):
        if column not in board:
            board[column] = ""
        board[column] = board[column].astype("string").fillna("").astype(str)
    return board, seeds, raw, [str(p) for p in problems]


def from_url(name: str, options: list, fallback):
    """The URL's value of ``name`` when it is one of ``options``, else ``fallback``."""
    value = st.query_params.get(name)
    return value if value in options else fallback


def to_url(**values) -> None:
    for name, value in values.items():
        if value is None or value == "":
            st.query_params.pop(name, None)
        else:
            st.query_params[name] = str(value)


def pick(label: str, options: list, fallback, key: str, url: str, container=st, **kwargs):
    """A selectbox whose first value comes from the URL (``url``) and whose choice goes back to it (only when it
    is not the default, so a metric chosen on one task does not override another task's headline)."""
    fallback = fallback if fallback in options else options[0]
    default = from_url(url, options, fallback)
    value = container.selectbox(label, options, index=options.index(default), key=key, **kwargs)
    to_url(**{url: value if value != fallback else None})
    return value


def sources() -> dict[str, Path]:
    """Your runs and the published board (one entry when they are the same folder)."""
    yours = default_results_dir()
    if yours.resolve() == PUBLISHED.resolve():
        return {f"published ({PUBLISHED.name}/ of this checkout)": PUBLISHED}
    return {f"your runs ({yours})": yours, f"published ({PUBLISHED.name}/ of this checkout)": PUBLISHED}


def choose_source() -> tuple[Path, bool]:
    """The chosen results folder, and whether the leaderboard shows the published board beside it (your runs
    only; on by default when ``./bench-results`` has runs, off when a folder was named)."""
    found = sources()
    labels = list(found)
    yours = found[labels[0]]
    explicit = "BENCH_RESULTS_DIR" in os.environ
    has_runs = bool(_stamp(yours))
    fallback = labels[0] if explicit or has_runs or len(labels) == 1 else labels[1]
    names = {"yours": labels[0], "published": labels[-1]}
    default = names.get(st.query_params.get("source", ""), fallback)
    label = st.sidebar.radio("results", labels, index=labels.index(default), key="source")
    to_url(source=None if label == fallback else "yours" if label == labels[0] else "published")
    beside = usual = False
    if len(labels) > 1 and label == labels[0]:
        usual = has_runs and not explicit
        wanted = {"1": True, "0": False}.get(st.query_params.get("beside", ""), usual)
        beside = st.sidebar.checkbox("beside the published board", value=wanted, key="beside",
                                     help="your runs and the published board on one leaderboard (ringed: yours)")
    to_url(beside=None if beside == usual else int(beside))
    return found[label], beside


def main() -> None:
    """The page: the leaderboard, plausible deniability and paper-vs-ours tabs."""
    st.set_page_config(page_title="Text privacy leaderboard", layout="wide")
    st.title("Privacy-utility leaderboard")
    root, beside = choose_source()
    # only the open tab runs (a widget change re-renders one view, not three); the tab is kept in the URL
    board_tab, deniability_tab, paper_tab = st.tabs(["Leaderboard", "Plausible deniability", "Paper vs ours"],
                                                    key="tab", on_change="rerun", bind="query-params")
    if board_tab.open:
        with board_tab:
            leaderboard(root, beside)
    if deniability_tab.open:
        with deniability_tab:
            render_deniability(root)
    if paper_tab.open:
        with paper_tab:
            render_reproduction(root)


def default_task(board: pd.DataFrame) -> str:
    """The task with the most configurations (SST-2 on the published board)."""
    counts = board.groupby("task")["config_hash"].nunique().sort_values(ascending=False, kind="stable")
    return counts.index[0]


def source_name(root: Path) -> str:
    return "published" if Path(root).resolve() == PUBLISHED else YOURS


@st.cache_data(show_spinner=False, max_entries=8)
def load_sources(key: tuple) -> tuple[pd.DataFrame, pd.DataFrame, dict, dict, list[str]]:
    """``load`` of each (name, root, stamp) in ``key``, with a ``source`` column: (board, per-seed values, raw
    records by config hash, majority-class utility by config hash, problems). Beside the published board, your
    runs' config hashes read ``yours:<hash>``, so a setting both hold stays two rows with their own records."""
    boards, seed_frames, raw, problems = [], [], {}, []
    for name, root, stamp in key:
        board, seeds, records, issues = load(root, stamp)
        problems += issues
        if board.empty:
            continue
        prefix = f"{SCOPES[name]}:" if len(key) > 1 and name == YOURS else ""
        boards.append(board.assign(source=name, config_hash=prefix + board["config_hash"].astype(str)))
        if not seeds.empty:
            seed_frames.append(seeds.assign(source=name, config_hash=prefix + seeds["config_hash"].astype(str)))
        raw.update({prefix + config: rows for config, rows in records.items()})
    board = pd.concat(boards, ignore_index=True) if boards else pd.DataFrame()
    seeds = pd.concat(seed_frames, ignore_index=True) if seed_frames else pd.DataFrame()
    majority = majority_by_config((config, r.get("notes")) for config, rows in raw.items() for r in rows)
    return board, seeds, raw, majority, problems


def leaderboard(root: Path, beside: bool) -> None:
    """Filters (kept per source and task), then one view: privacy against utility with the ranked table and
    provenance, sweeps, adaptation or every family on one scale."""
    shown_sources = ((YOURS, root), ("published", PUBLISHED)) if beside else ((source_name(root), root),)
    key = tuple((name, str(path), _stamp(Path(path))) for name, path in shown_sources)
    board, seeds, raw, _, problems = load_sources(key)
    for problem in problems:
        st.warning(literal(problem))
    if board.empty:
        st.info(f"No records in {literal(root)}: run `bench run ...` (records go to {literal(root / 'records')}); "
                "`bench summarize` writes the leaderboard CSV.")
        return
    scope = "+".join(SCOPES[name] for name, _ in shown_sources)  # every widget's state is kept per source
    sidebar = st.sidebar
    sidebar.header("Filters")
    tasks = sorted(board["task"].unique())
    task = pick("task", tasks, default_task(board), f"task:{scope}", "task", sidebar)
    on_task = board[board["task"] == task]
    attacks_known = sorted(a for a in on_task["attack"].unique() if a)
    if not attacks_known:
        st.info(f"No attacked cells on {literal(task)}: run a cell with `--attack`.")
        return
    busiest = on_task[on_task["attack"] != ""].groupby("attack")["config_hash"].nunique().idxmax()
    where = f"{scope}:{task}"
    attack = pick("attack", [WORST, *attacks_known], WORST, f"attack:{where}", "attack", sidebar,
                  help="worst case: each defense setting's strongest attack, on one advantage scale")
    encoders_all = sorted(on_task["encoder"].unique())
    tests = [e for e in encoders_all if is_test_encoder(e)]
    show_tests = bool(tests) and (len(tests) == len(encoders_all) or sidebar.checkbox(
        f"show test encoders ({len(tests)}: mock-*)", value=False, key=f"mocks:{where}"))
    encoders_known = [e for e in encoders_all if show_tests or not is_test_encoder(e)]
    encoders = sidebar.multiselect("encoder", encoders_known, default=encoders_known,
                                   key=f"encoder:{where}:{show_tests}")
    defenses_known = sorted(on_task["defense"].unique())
    defenses = sidebar.multiselect("defense", defenses_known, default=defenses_known, key=f"defense:{where}")
    modes_known = sorted(on_task["mode"].unique())
    modes = sidebar.multiselect("mode", modes_known, default=modes_known, key=f"mode:{where}")
    shown = on_task[on_task["encoder"].isin(encoders) & on_task["defense"].isin(defenses) & on_task["mode"].isin(modes)]
    if shown.empty:
        st.info("No results match these filters.")
        return

    views = [v for v in VIEWS if v != "Adaptation" or shown["server_args"].str.contains("adapt=").any()]
    view = st.radio("view", views, index=views.index(from_url("view", views, views[0])), horizontal=True,
                    key="view", label_visibility="collapsed")
    to_url(view=view if view != views[0] else None)
    cache_key = (key, (tuple(encoders), tuple(defenses), tuple(modes)))
    if view == "Sweeps":  # a sweep plots one attack's metrics: the worst case shows the busiest attack's
        render_sweeps(task, busiest if attack == WORST else attack, cache_key, where)
    elif view == "Adaptation":
        render_adaptation(shown, seeds, task)
    elif view == "One scale":
        audited, reports = root, read_audits(root)
        if not reports:  # the checkout's, when yours has none
            audited, reports = PUBLISHED, read_audits(PUBLISHED)
        render_one_scale(shown, task, headline_metrics(board).get(task), applicable_attacks, reports, f"{audited}/")
    else:
        privacy_view(shown, board, seeds, raw, task, attack, cache_key, where)


def _filtered(key: tuple, task: str, filters: tuple) -> pd.DataFrame:
    board = load_sources(key)[0]
    encoders, defenses, modes = filters
    return board[(board["task"] == task) & board["encoder"].isin(encoders) & board["defense"].isin(defenses)
                 & board["mode"].isin(modes)]


@st.cache_data(show_spinner=False, max_entries=64)
def ranked_and_chart(key: tuple, task: str, filters: tuple, attack: str, utility: str,
                     privacy: str) -> tuple[pd.DataFrame, dict | None]:
    """The ranked table (with whether each cell's utility beats the majority class) and the scatter's Vega-Lite
    spec of one view, computed once per view and data change (building and validating the layered chart is most
    of a re-render otherwise)."""
    board, _, _, majority, _ = load_sources(key)
    up = direction(board)
    table = ranked(_filtered(key, task, filters), task, attack, utility, privacy, majority, applicable_attacks)
    chart = scatter(table, utility, ADVANTAGE if attack == WORST else privacy, up, defense_order())
    return table, chart.to_dict() if chart is not None else None


def text_widths(frame: pd.DataFrame) -> dict:
    """Column settings that show ``TEXT_COLUMNS`` whole (about 8 pixels a character)."""
    return {c: st.column_config.TextColumn(width=max(80, 8 * int(frame[c].astype(str).str.len().max()) + 24))
            for c in TEXT_COLUMNS if c in frame and len(frame)}


def privacy_view(shown, board, seeds, raw, task: str, attack: str, cache_key: tuple, where: str) -> None:
    """The attack's privacy-utility scatter with its frontier and references, the ranked table, provenance."""
    headline = headline_metrics(board).get(task)
    rows = shown[shown["attack"] == attack]
    utility_metrics = sorted({m for m in shown["metric"] if m.startswith("utility/")}, key=lambda m: (m != headline, m))
    worst = attack == WORST
    privacy_metrics = [ADVANTAGE] if worst else sorted({m for m in rows["metric"]
                                                        if m.startswith(f"privacy/{attack}/")})
    if "order" in rows and privacy_metrics and not worst:  # the attack's first declared metric is its headline
        firsts = rows[rows["metric"].isin(privacy_metrics)].groupby("metric")["order"].min()
        privacy_metrics.sort(key=lambda m: (firsts.get(m, 0), m))
    st.subheader(f"{'Worst case' if worst else literal(attack)}: privacy against utility on {literal(task)}")
    if not utility_metrics or not privacy_metrics:
        st.info("These cells have no utility or no attack metric to plot.")
        return
    left, right = st.columns(2)
    utility = pick("utility metric", utility_metrics, headline, f"utility:{where}", "utility", left,
                   format_func=short)
    if worst:
        privacy = ADVANTAGE
        right.markdown("privacy: each setting's strongest attack, as its advantage over its random guess")
    else:
        privacy = pick("attack metric", privacy_metrics, privacy_metrics[0], f"privacy:{where}:{attack}", "privacy",
                       right, format_func=short)
    key, filters = cache_key
    table, spec = ranked_and_chart(key, task, filters, attack, utility, privacy)
    if spec is not None:
        st.vega_lite_chart(spec=spec, width="stretch")
    st.caption(
        "Points: means over seeds (colour and shape: the defense; filled or hollow: the encoder); bars: ± one sample "
        "std (none for a single seed). Black lines: the Pareto frontier of each encoder (no other setting on that "
        "encoder is both at least as useful and at least as private). References, in the legend with their values: "
        "the random guess scored in these "
        "same cells (dashed; band: its range over them) and the majority-class utility of these cells (dotted; "
        "missing for records made before it was noted). The axes fit the points; a reference outside them is named "
        "in the legend, not drawn. ×: the utility does not beat the majority class, so the setting carries no "
        "utility signal whatever its rank."
    )
    st.markdown("**Ranked settings** · *advantage* = (attack − random guess) / (best possible − random guess) of "
                "the attack's metric: 0 = as good as guessing, 1 = total recovery"
                + (" (worst case: the strongest attack on the setting)" if worst else "") + ". Rank = utility at a "
                "stated advantage: the most private *band* of advantage first (≤ 0.05, ≤ 0.20, ≤ 0.50, above), by "
                "utility within it, so a setting that leaks everything is never first however useful; settings "
                "that do not *beat the majority* class follow the others"
                + ("; a setting not attacked by every attack that applies to its release is *incomplete*: no rank, "
                   "the missing attacks listed, its advantage only a lower bound" if worst else "")
                + ". *Frontier* = Pareto layer on utility × advantage among the settings of one encoder.")
    shown_table = display_columns(table, board, headline)
    config = {c: st.column_config.NumberColumn(format="%.3f") for c in shown_table.columns
              if shown_table[c].dtype.kind == "f" and c != "seeds"}
    event = st.dataframe(shown_table, hide_index=True, width="stretch", on_select="rerun",
                         selection_mode="single-row", key=f"table:{where}:{attack}:{utility}:{privacy}",
                         column_config={**config, **text_widths(shown_table)})
    downloads(table, raw, task, attack)
    provenance(table, seeds, raw, event)


def downloads(table: pd.DataFrame, raw: dict, task: str, attack: str) -> None:
    """The view's rows: aggregated (CSV) and the raw records behind them (JSON lines)."""
    left, right = st.columns(2)
    left.download_button("download these rows (CSV)", table.to_csv(index=False), f"{task}-{attack}.csv", "text/csv",
                         key="download-csv")
    lines = [json.dumps(r) for h in table.get("config_hash", []) for r in raw.get(h, [])]
    right.download_button("download their records (JSON lines)", "\n".join(lines) + ("\n" if lines else ""),
                          f"{task}-{attack}.jsonl", "application/x-ndjson", key="download-jsonl",
                          disabled=not lines)


def _rank(value) -> str:
    return "–" if pd.isna(value) else str(int(value))


def provenance(table: pd.DataFrame, seeds: pd.DataFrame, raw: dict, event) -> None:
    """A chosen row's seeds and per-seed values, arguments, hashes, versions, hardware, runtime and notes."""
    labels = ["(none)"] + [f"{_rank(r['rank'])}. {r['defense']}({r['defense_args']}) · {r['encoder']} · "
                           f"{r['config_hash']}" for _, r in table.iterrows()]
    selected = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    fallback = labels[selected[0] + 1] if selected and selected[0] + 1 < len(labels) else "(none)"
    hashes = {label.rsplit(" · ", 1)[-1]: label for label in labels[1:]}
    wanted = hashes.get(st.query_params.get("row", ""), "(none)")
    choice = st.selectbox("provenance of (or select a row above)", labels, index=labels.index(wanted),
                          key="provenance")
    if selected:
        choice = fallback
    if choice == "(none)":
        to_url(row=None)
        return
    config = choice.rsplit(" · ", 1)[-1]
    to_url(row=config)
    records = raw.get(config, [])
    if not records:
        st.info("This board was read from leaderboard.csv: the per-seed records are not there.")
        return
    first = records[-1]
    st.markdown(f"**Provenance of {literal(choice)}**")
    per_seed = seeds[seeds["config_hash"] == config].pivot_table(index="seed", columns="metric", values="value")
    by_seed = {r["seed"]: r for r in records}
    facts = pd.DataFrame([{"seed": s, "run_id": r["run_id"], "git_sha": r["versions"].get("git_sha", ""),
                           "runtime_s": r["runtime_s"], "data_hash": r["data_hash"][:16], "created_at": r["created_at"]}
                          for s, r in sorted(by_seed.items())]).set_index("seed")
    st.dataframe(facts.join(per_seed), width="stretch")
    versions, hardware = first.get("versions", {}), first.get("hardware", {})
    st.markdown(" · ".join(literal(part) for part in (
        f"git_sha {versions.get('git_sha', '?')}", f"torch {versions.get('torch', '?')}",
        "hardware " + ", ".join(f"{k} {v}" for k, v in hardware.items() if k != "platform"),
        f"data {first.get('data_source', '?')}",
        "runtime " + ", ".join(f"{r['runtime_s']:.1f} s" for _, r in sorted(by_seed.items())))))
    left, right = st.columns(2)
    left.caption("spec (full arguments; config hash " + literal(config.rsplit(":", 1)[-1]) + ")")
    left.json(first["spec"], expanded=True)
    right.caption("versions, hardware, data source")
    right.json({"versions": first["versions"], "hardware": first["hardware"], "data_source": first["data_source"],
                "sizes": first["sizes"]}, expanded=True)
    notes = {r["seed"]: r.get("notes") or {} for r in records}
    if any(notes.values()):
        st.caption("notes (per seed)")
        st.json(notes, expanded=True)


@st.cache_data(show_spinner=False, max_entries=32)
def sweep_groups(key: tuple, task: str, filters: tuple, attack: str) -> dict[str, pd.DataFrame]:
    """The sweeps against ``attack`` (or no attack) under the filters, by a label naming everything that is held
    fixed: defense and its other arguments, encoder, mode, attack arguments and training size (and the source,
    when your runs are beside the published board: a sweep never mixes the two)."""
    shown = _filtered(key, task, filters)
    shown = shown[shown["attack"].isin([attack, ""])]
    several = shown["source"].nunique() > 1
    keys = ["defense", "fixed", "encoder", "mode", "attack", "attack_args", "parameter", "n_train", "n_eval"]
    groups = {}
    for source, part in shown.groupby("source", sort=False):
        found = sweeps(part)
        if found.empty:
            continue
        for values, rows in found.groupby(keys, dropna=False, sort=True):
            d, fixed, encoder, mode, att, att_args, parameter, n_train, _ = values
            label = (f"{f'{source} · ' if several else ''}{d} ({fixed or 'no other parameters'}) · {encoder} · "
                     f"{mode} · {att or 'no attack'}{f'({att_args})' if att_args else ''} · n_train {n_train}: "
                     f"{parameter}")
            groups[label] = rows
    return groups


@st.cache_data(show_spinner=False, max_entries=64)
def sweep_spec(key: tuple, task: str, filters: tuple, attack: str, label: str, metrics: tuple) -> dict:
    return sweep_chart(sweep_groups(key, task, filters, attack)[label], list(metrics)).to_dict()


def render_sweeps(task: str, attack: str, cache_key: tuple, where: str) -> None:
    """One privacy-parameter sweep at a time: utility and attack success against the parameter."""
    key, filters = cache_key
    groups = sweep_groups(key, task, filters, attack)
    st.subheader(f"Privacy parameter sweeps on {literal(task)}")
    if not groups:
        st.info(f"No sweep (settings differing in one numeric argument) against {literal(attack)} here.")
        return
    labels = list(groups)
    label = pick("sweep", labels, labels[0], f"sweep:{where}:{attack}", "sweep")
    rows = groups[label]
    swept = rows["attack"].iloc[0]
    known = sorted(m for m in rows["metric"].unique()
                   if m.startswith(("utility/", f"privacy/{swept}/", f"random/{swept}/")))
    chosen = st.multiselect("metrics", known, default=known, key=f"sweep-metrics:{where}:{label}")
    if chosen:
        st.vega_lite_chart(spec=sweep_spec(key, task, filters, attack, label, tuple(chosen)), width="stretch")


def render_adaptation(shown: pd.DataFrame, seeds: pd.DataFrame, task: str) -> None:
    """Utility gained by privacy-adaptive pretraining over the unadapted encoder, per privacy parameter."""
    parts = [adaptation_gains(part, seeds[seeds["source"] == source] if "source" in seeds else seeds)
             .assign(source=source) for source, part in shown.groupby("source", sort=False)]  # never across sources
    gains = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    gains = gains if "gain" in gains else pd.DataFrame()
    several = not gains.empty and gains["source"].nunique() > 1
    st.subheader(f"Privacy-adaptive pretraining on {literal(task)}: utility gained over the unadapted encoder")
    if gains.empty:
        st.info("No adapted setting with an unadapted one to compare.")
        return
    st.caption("gain: the mean over the seeds both settings have (gain_n) of adapted minus unadapted utility, "
               "± gain_ci95 (95% half-width); gain_n 0 means the per-seed values are not loaded and the gain is the "
               "difference of the two means, unpaired.")
    st.dataframe(gains.drop(columns=["task"] + ([] if several else ["source"])), hide_index=True, width="stretch")
    for (source, defense, attack, metric), rows in gains.groupby(["source", "defense", "attack", "metric"],
                                                                 sort=False):
        parameter = sweep_parameter(rows)
        if parameter is not None:
            st.caption(f"{f'{source}: ' if several else ''}{literal(defense)} ({literal(metric)}, cells attacked by "
                       f"{literal(attack) if attack else 'no attack'})")
            st.altair_chart(gain_chart(rows, parameter), width="stretch")


main()
