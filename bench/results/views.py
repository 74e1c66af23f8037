"""What a reader ranks by: per task and attack, one row per configuration with numeric columns, each metric's
direction, the Pareto frontier of utility against attack success, and the references of the same cells.

Shared by the dashboard and ``bench report`` (no torch, no Streamlit). The input is the long leaderboard frame
(``bench.results.leaderboard.leaderboard_frame``: one row per configuration and metric with mean, std, n and
``higher_is_better``).

Privacy is read on one scale (``bench.results.worst_case``): an attack's advantage over its own random guess,
0 = guessing, 1 = total recovery. The default table of a task ranks each defense setting by its worst case, the
strongest attack's advantage; one table per attack stays beside it.

Ranking (``rank_rows``): utility at a stated worst-case advantage. The settings are grouped into privacy bands of
advantage (``BANDS``: at most 0.05, 0.2, 0.5, then above), most private band first, and ranked by utility within a
band; settings whose utility does not beat the majority class follow all others, and a setting without an advantage
(no random guess recorded) or, in the worst-case table, one not attacked by every attack that applies to it, is
listed last without a rank. A reader thus finds at the top the most useful settings that attacks cannot beat by
more than the first band, and a setting that leaks everything is never first however useful. The Pareto *frontier
layer* on (utility, advantage) is shown beside, computed per encoder, since settings on different encoders do not
share a server and one frontier across them would compare the encoders, not the defenses.
"""

from __future__ import annotations

import math
import re
from typing import Iterator

import pandas as pd

from bench.core.errors import BenchError
from bench.core.registry import DEFENSES, PLUGIN_PACKAGE
from bench.core.releases import ReleaseKind
from bench.results import limits
from bench.results.leaderboard import ci95_half_width
from bench.results.record import current
from bench.results.worst_case import Applicable, declared, worst_case
from bench.results.worst_case import advantage as scaled_advantage

# a configuration: everything but the seed (config_hash already encodes it; the rest is for reading); ``source``
# (your runs or the published board) when a frame holds both
CONFIG = ["source", "encoder", "defense", "defense_args", "server_args", "attack", "attack_args", "mode", "n_train",
          "n_eval", "config_hash"]
SIGNAL = "beats majority"  # the column that says whether a cell's utility beats the majority-class answer
MOCK = re.compile(r"^mock(-\d+)?$")
WORST = "worst case"  # the name of a task's default table: each setting's strongest attack (no attack has a space)
ADVANTAGE = "advantage"  # the column of an attack's advantage on the one scale (``bench.results.worst_case``)
BANDS = (0.05, 0.2, 0.5)  # the stated advantages the ranking groups settings by, most private first


def is_test_encoder(name: str) -> bool:
    """``mock`` and ``mock-<d>``: seeded random encoders for tests, not results to read."""
    return bool(MOCK.match(str(name)))


def varying_args(texts) -> list[str]:
    """Each ``k=v,...`` text with only the arguments whose values differ between the texts (an argument every row
    gives the same value says nothing about the row)."""
    parsed = [parse_args(t) for t in texts]
    keys = dict.fromkeys(k for args in parsed for k in args)
    varying = [k for k in keys if len({args.get(k) for args in parsed}) > 1]
    return [",".join(f"{k}={args[k]}" for k in varying if k in args) for args in parsed]


def parse_args(text) -> dict[str, str]:
    """``"eps=4.0,p=0.3"`` -> ``{"eps": "4.0", "p": "0.3"}`` (a missing value has no arguments)."""
    if not isinstance(text, str):
        return {}
    return dict(part.split("=", 1) for part in text.split(",") if "=" in part)


def number(text) -> float | None:
    """The float a value spells (``inf`` included), else None."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def strongest_label(attack, args) -> str:
    """A worst case's attack as shown: with the traffic it read when that was not the training release (a setting's
    worst case covers every release it sends: training batches and, where a path has them, inference queries)."""
    traffic = parse_args(args).get("traffic")
    return f"{attack} ({traffic} traffic)" if attack and traffic else (attack or "")


def args_sort_key(text) -> tuple:
    """Sort key of an argument string that orders numbers as numbers (eta 3 < 10 < 30 < 100)."""
    return tuple((k, (0, number(v), "") if number(v) is not None else (1, 0.0, v)) for k, v in parse_args(text).items())


def headline_metrics(board: pd.DataFrame) -> dict[str, str]:
    """Each task's headline utility metric: the first utility metric its records list (a task's metrics come
    headline first: MCC for CoLA, F1 for MRPC), else the first in name order."""
    utility = board[board["metric"].str.startswith("utility/")]
    if "order" in utility:
        utility = utility.sort_values("order", kind="stable")
    return {task: group["metric"].iloc[0] for task, group in utility.groupby("task", sort=False)}


def defense_order() -> list[str]:
    """The defenses of the component folders but none (a ``--plugin`` file's are styled by name, so loading one
    changes no other defense's colour), by what they release (the first of their release kinds, token vectors
    first, then in ``ReleaseKind``'s order), then by name: defenses compared on the same attacks sit together. The charts' styles
    follow it. Empty when a component file fails to import (the charts then style every defense by its name)."""
    # token vectors first, then text: d_chi on tokens and on text meet on the same attacks, so they take
    # neighbouring colours (in ReleaseKind's order, a full round of colours apart, they shared one)
    kinds = sorted(ReleaseKind, key=lambda k: k != ReleaseKind.TOKEN_EMBEDDINGS)
    try:
        names = [n for n in DEFENSES.names()
                 if n != "none" and not DEFENSES.get(n).__module__.startswith(PLUGIN_PACKAGE + ".")]
        first = {n: min((kinds.index(ReleaseKind(k)) for k in getattr(DEFENSES.get(n), "releases", ()) or ()),
                        default=len(kinds)) for n in names}
    except BenchError:
        return []
    return sorted(names, key=lambda n: (first[n], n))


def short(metric: str) -> str:
    """``privacy/rss/identity`` -> ``identity``; ``utility/mcc`` -> ``mcc``."""
    return metric.rsplit("/", 1)[-1]


def direction(board: pd.DataFrame) -> dict[str, bool]:
    """metric -> higher_is_better as the records declare it (for attacks: higher = more recovered)."""
    if "higher_is_better" not in board or board.empty:
        return {}
    flags = board[["metric", "higher_is_better"]].drop_duplicates("metric")
    return {m: str(h).strip().lower() not in ("false", "0") for m, h in zip(flags["metric"], flags["higher_is_better"])}


def column_title(metric: str, higher_is_better: bool) -> str:
    """A column title with its direction: ``accuracy ↑`` (better), ``rss identity ↓ safer`` (the attack named, so
    that AIA's accuracy is not read as the task's)."""
    if metric.startswith("utility/"):
        return f"{short(metric)} {'↑' if higher_is_better else '↓'}"
    if metric.startswith("privacy/"):
        return f"{metric.split('/')[1]} {short(metric)} {'↓' if higher_is_better else '↑'} safer"
    return f"random {short(metric)}"


def axis_title(metric: str, higher_is_better: bool) -> str:
    """An axis title that says which way is better for whom."""
    if metric == ADVANTAGE:
        return "worst-case advantage (0 = guessing, 1 = total recovery)"
    if metric.startswith("utility/"):
        return f"{short(metric)} ({'higher' if higher_is_better else 'lower'} = more useful)"
    attack = metric.split("/")[1] if metric.count("/") >= 2 else ""
    return f"{attack} {short(metric)} ({'higher' if higher_is_better else 'lower'} = more recovered)"


def wide(board: pd.DataFrame, task: str, attack: str) -> pd.DataFrame:
    """One row per configuration of ``task`` attacked by ``attack``: ``<metric>`` means, ``<metric> std``,
    ``<metric> n`` (that metric's seeds) and ``n`` (the most seeds of any metric), configuration columns first."""
    rows = board[(board["task"] == task) & (board["attack"].fillna("") == attack)]
    if rows.empty:
        return pd.DataFrame()
    keys = [c for c in CONFIG if c in rows]
    frame = rows.assign(**{c: rows[c].fillna("") for c in keys if rows[c].dtype == object})
    frame = frame.drop_duplicates([*keys, "metric"]).set_index([*keys, "metric"])
    means, stds, counts = (frame[column].unstack("metric") for column in ("mean", "std", "n"))
    seeds = frame["n"].groupby(level=list(range(len(keys)))).max().rename("n")
    out = means.join(stds.add_suffix(" std")).join(counts.add_suffix(" n")).join(seeds).reset_index()
    out.columns.name = None
    order = sorted(range(len(out)), key=lambda i: (out["defense"].iloc[i] != "none", out["defense"].iloc[i],
                                                   args_sort_key(out["defense_args"].iloc[i]),
                                                   args_sort_key(out.get("server_args", pd.Series([""] * len(out)))
                                                                 .iloc[i]), str(out["encoder"].iloc[i])))
    return out.iloc[order].reset_index(drop=True)


def majority_by_config(notes) -> dict[str, dict[str, float]]:
    """config hash -> utility metric (short name) -> the mean over seeds of the records' majority-class note
    (``notes.majority_utility``: the task's metrics for answering the training split's most frequent label).
    ``notes`` holds (config hash, record notes) pairs; records made before the note existed add nothing."""
    values: dict[str, dict[str, list[float]]] = {}
    for config, note in notes:
        for metric, value in ((note or {}).get("majority_utility") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values.setdefault(config, {}).setdefault(metric, []).append(float(value))
    return {config: {m: sum(v) / len(v) for m, v in metrics.items()} for config, metrics in values.items()}


def mark_utility_signal(table: pd.DataFrame, majority: dict[str, dict[str, float]], utility: str,
                        higher_is_better: bool) -> pd.DataFrame:
    """``table`` with ``majority`` (the cell's majority-class ``utility``) and ``beats majority``: "yes", "no
    (<majority>)" when the cell's mean utility is no better than answering the majority class (so it carries no
    utility signal, whatever its rank), "" when the records carry no majority note."""
    floors = [majority.get(h, {}).get(short(utility), math.nan) for h in table["config_hash"]]
    values = table[utility] if utility in table else pd.Series([math.nan] * len(table), index=table.index)
    marks = []
    for value, floor in zip(values, floors):
        if _nan(floor) or value is None or _nan(float(value)):
            marks.append("")
        else:
            beats = value > floor if higher_is_better else value < floor
            marks.append("yes" if beats else f"no ({floor:.3f})")
    return table.assign(majority=floors, **{SIGNAL: marks})


def frontier_layers(utility, leakage, utility_up: bool = True, leakage_up: bool = True) -> list[int]:
    """Pareto layer of each point (1 = frontier): more utility and less leakage are better. ``*_up`` is the
    metric's declared direction (utility: higher = more useful; leakage: higher = more recovered). A point
    with a missing value gets layer 0 (unranked)."""
    u = [(x if utility_up else -x) if x is not None and not _nan(x) else None for x in utility]
    s = [(-y if leakage_up else y) if y is not None and not _nan(y) else None for y in leakage]  # larger = safer
    layer = [0] * len(u)
    left = {i for i in range(len(u)) if u[i] is not None and s[i] is not None}
    depth = 0
    while left:
        depth += 1
        front = {i for i in left if not any(u[j] >= u[i] and s[j] >= s[i] and (u[j] > u[i] or s[j] > s[i])
                                            for j in left)}
        for i in front:
            layer[i] = depth
        left -= front
    return layer


def _nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def band(value) -> int | None:
    """The privacy band of an advantage: 0 for at most ``BANDS[0]``, ..., ``len(BANDS)`` above the last; None
    when undefined."""
    if value is None or _nan(float(value)):
        return None
    return next((i for i, bound in enumerate(BANDS) if value <= bound), len(BANDS))


def band_label(index) -> str:
    """``≤ 0.05``, ..., ``above 0.50`` (empty for no band)."""
    if index is None or pd.isna(index):
        return ""
    index = int(index)
    return f"≤ {BANDS[index]:.2f}" if index < len(BANDS) else f"above {BANDS[-1]:.2f}"


def rank_rows(table: pd.DataFrame, utility: str, utility_up: bool = True) -> pd.DataFrame:
    """``table`` (with ``ADVANTAGE`` and, optionally, ``SIGNAL`` and ``complete``) with ``band``, ``frontier`` (the
    Pareto layer on utility × advantage among the ranked rows of each encoder) and ``rank``, sorted: ranked rows by
    (utility signal first, band, utility), then the unranked (no advantage, or incomplete) with an empty rank."""
    table = table.copy()
    u = table[utility] if utility in table else pd.Series([math.nan] * len(table), index=table.index)
    a = table[ADVANTAGE] if ADVANTAGE in table else pd.Series([math.nan] * len(table), index=table.index)
    bands = [band(v) for v in a]
    table["band"] = pd.array(bands, dtype="Int64")
    complete = table["complete"] if "complete" in table else pd.Series(True, index=table.index)
    signal = table[SIGNAL].astype(str) if SIGNAL in table else pd.Series("", index=table.index)
    scored = ADVANTAGE in table  # a table without an attack is ranked by utility alone
    unranked = [(scored and b is None) or not c for b, c in zip(bands, complete)]
    layers = pd.Series(0, index=table.index)  # an incomplete setting's advantage is a lower bound: off the frontier
    groups = table["encoder"].astype(str) if "encoder" in table else pd.Series("", index=table.index)
    for _, rows in table[[not out for out in unranked]].groupby(groups, sort=False):
        layers[rows.index] = frontier_layers(list(u[rows.index]), list(a[rows.index]), utility_up, True)
    table["frontier"] = layers
    ordered = table.assign(_out=unranked, _no=signal.str.startswith("no"),
                           _band=[len(BANDS) + 1 if b is None else b for b in bands],
                           _u=[(-x if utility_up else x) if x is not None and not _nan(float(x)) else math.inf
                               for x in u])
    ordered = ordered.sort_values(["_out", "_no", "_band", "_u"], kind="stable")
    count = int((~ordered["_out"]).sum())
    ordered.insert(0, "rank", pd.array([*range(1, count + 1), *([None] * (len(ordered) - count))], dtype="Int64"))
    return ordered.drop(columns=["_out", "_no", "_band", "_u"]).reset_index(drop=True)


def ranked(board: pd.DataFrame, task: str, attack: str, utility: str, privacy: str,
           majority: dict[str, dict[str, float]] | None = None, applicable: Applicable | None = None
           ) -> pd.DataFrame:
    """The ``wide`` rows of ``attack`` with ``advantage`` (the attack metric ``privacy`` on the one scale:
    ``bench.results.worst_case.advantage`` against its random guess in the same cells), ``band``, ``frontier`` and
    ``rank`` (``rank_rows``); with ``majority`` (``majority_by_config``), whether the utility beats the majority
    class first. ``attack`` = ``WORST``: the worst-case rows of ``bench.results.worst_case.worst_case`` (with
    ``applicable``, the attacks that apply to a setting: ``bench.engine.applicable.applicable_attacks``).
    ``utility`` and ``privacy`` are full metric keys."""
    up = direction(board)
    if attack == WORST:
        table = worst_case(board, task, utility, applicable)
    else:
        table = wide(board, task, attack)
        if not table.empty:
            reference = "random/" + privacy.split("/", 1)[1] if privacy.startswith("privacy/") else ""
            metric = declared(privacy)
            if privacy in table and reference in table and metric is not None:
                table[ADVANTAGE] = [scaled_advantage(v, r, metric.low, metric.high, metric.higher_is_better)
                                    for v, r in zip(table[privacy], table[reference])]
            elif privacy in table:  # no guess to measure against (or an undeclared metric): no rank
                table[ADVANTAGE] = math.nan
            # cells that recorded no attack metric at all are ranked by utility, as cells without an attack
    if table.empty:
        return table
    if majority is not None and utility:
        table = mark_utility_signal(table, majority, utility, up.get(utility, True))
    return rank_rows(table, utility, up.get(utility, True))


def display_columns(table: pd.DataFrame, board: pd.DataFrame, headline: str | None) -> pd.DataFrame:
    """``ranked`` as a reader sees it: rank, setting, utility (headline first), attack metrics, random guesses,
    with ↑/↓ in each metric's title; std columns only where some cell has more than one seed."""
    if table.empty:
        return table
    up = direction(board)
    metrics = [c for c in table.columns if "/" in c and not c.endswith((" std", " n"))]
    utility = sorted((m for m in metrics if m.startswith("utility/")), key=lambda m: (m != headline, m))
    privacy = sorted(m for m in metrics if m.startswith("privacy/"))
    random = sorted(m for m in metrics if m.startswith("random/"))
    several = bool((table["n"] > 1).any())
    columns, titles = ["rank", "band", "frontier", "defense", "defense_args"], {}
    table = table.assign(band=[band_label(b) for b in table["band"]]) if "band" in table else table
    for extra in ("source", "server_args", "attack_args", "encoder", "mode", "n_train"):
        if extra in table and table[extra].astype(str).nunique() > 1 or extra == "encoder":
            columns.append(extra)
    for metric in [*utility, *privacy]:
        columns.append(metric)
        titles[metric] = column_title(metric, up.get(metric, True))
        if utility and metric == utility[0] and SIGNAL in table:
            columns.append(SIGNAL)
        if several and f"{metric} std" in table and metric in (headline, *privacy[:1]):
            columns.append(f"{metric} std")
            titles[f"{metric} std"] = f"{short(metric)} std"
    if ADVANTAGE in table:
        columns.append(ADVANTAGE)
        titles[ADVANTAGE] = "worst-case advantage ↓ safer" if "strongest" in table else "advantage ↓ safer"
    columns += [c for c in ("strongest", "strongest_args", "attacked", "missing") if c in table]
    titles.update({"strongest": "strongest attack", "strongest_args": "its arguments", "attacked": "attacks run",
                   "missing": "missing attacks (incomplete)", "band": "band"})
    columns += random + ["n", "config_hash"]
    titles.update({m: column_title(m, up.get(m, True)) for m in random})
    titles.update({"n": "seeds", "defense_args": "arguments", "server_args": "server", "attack_args": "attack args"})
    return table[[c for c in columns if c in table]].rename(columns=titles)


def markdown_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub Markdown table of ``frame`` (floats to ``digits`` places, missing values empty). Text is shown
    literally: ``&``, ``<`` and ``>`` as HTML entities (a record's ``<script>`` is never raw HTML in the page),
    ``|`` escaped."""
    import html

    def cell(value) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        if isinstance(value, float):
            return f"{value:.{digits}f}"
        return html.escape(str(value), quote=False).replace("|", "\\|")

    lines = ["| " + " | ".join(cell(c) for c in frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def sizes_differ(table: pd.DataFrame) -> bool:
    """Whether the rows of ``table`` were measured on different numbers of training or evaluation examples."""
    return any(c in table and table[c].astype(str).nunique() > 1 for c in ("n_train", "n_eval"))


def size_labels(table: pd.DataFrame) -> list[str]:
    """``train / eval`` examples of each row (the sizes the cells used), e.g. ``8000 / 872``."""
    def count(value) -> str:
        return "?" if value is None or value != value else f"{int(value)}"

    return [f"{count(a)} / {count(b)}" for a, b in zip(table.get("n_train", [None] * len(table)),
                                                      table.get("n_eval", [None] * len(table)))]


BEGIN, END = "<!-- bench report: begin -->", "<!-- bench report: end -->"


def _mean_std(mean, std, n, row_n=None) -> str:
    """``mean ± std [95% CI of the mean]`` over the metric's ``n`` seeds, the mean alone for one; ``(n = ...)``
    follows when the metric has fewer seeds than its row (``row_n``)."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return ""
    fewer = f" (n = {int(n)})" if row_n is not None and n == n and n < row_n else ""
    if not (n and n > 1 and std == std):
        return f"{mean:.3f}{fewer}"
    half = float(ci95_half_width([std], [n])[0])
    return f"{mean:.3f} ± {std:.3f} [{mean - half:.3f}, {mean + half:.3f}]{fewer}"


LEGEND = ("(means ± sample std over seeds, then the mean's 95% confidence interval, Student's t; a value without ± "
          "is one seed). Advantage puts every attack on one scale: (attack − random guess) / (best possible − random "
          "guess) of its headline metric (the first it declares), mirrored where lower means more recovered, so 0 is "
          "as good as guessing and 1 total recovery; below the guess it is 0 (the attacker can always guess). Rank = "
          "utility at a stated advantage: settings are grouped into bands of advantage (≤ 0.05, ≤ 0.20, ≤ 0.50, "
          "above 0.50), the most private band first, and ranked by headline utility within a band, so the top rows are "
          "the most useful settings no attack beats by more than the band, and one that leaks everything is never "
          "first however useful; settings whose utility does not beat the majority class follow all the others; a "
          "row without a random guess has no advantage and no rank. Frontier = Pareto layer on (utility, advantage) "
          "among the settings of the same encoder (1 = no setting on that encoder is at least as useful and as "
          "private, and better on one); one frontier across encoders would compare the encoders.")
WORST_LEGEND = ("The worst-case table gives each defense setting (the configuration without the attack: defense, "
                "arguments, server, encoder, mode, sizes) its strongest attack's advantage, that attack named. A "
                "setting that some attack applying to its release (bench list: the attacks that accept what it "
                "releases on this task) did not attack is incomplete: the missing attacks are listed, its advantage "
                "is only a lower bound, and it has no rank.")


def task_order(board: pd.DataFrame) -> list[str]:
    """The board's tasks, most configurations first."""
    return list(board.groupby("task")["config_hash"].nunique().sort_values(ascending=False, kind="stable").index)


def ranked_tables(board: pd.DataFrame, task: str, majority: dict[str, dict[str, float]] | None = None,
                  applicable: Applicable | None = None, attacks: list[str] | None = None,
                  metrics: list[str] = (), notes: dict[str, dict[str, str]] | None = None
                  ) -> Iterator[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """The worst case of ``task`` (``WORST``) and then each of its attacks (its name, "" for none), the ranked rows
    (``ranked``) and the table a reader sees: rank, band, frontier, defense and arguments, the settings that vary,
    the sizes where they vary, the headline utility (and, with ``majority`` (``majority_by_config``), whether it
    beats the majority class), the attack's headline metric (mean ± std [95% CI]) and its random guess, or in the
    worst case the strongest attack and the missing ones, the advantage and the seeds.

    ``attacks`` keeps those tables only; ``metrics`` (full keys) adds columns after the headline ones, and ``notes``
    (``config_hash`` -> {title: text}, ``record_notes``) columns before the seeds."""
    up = direction(board)
    utility = headline_metrics(board).get(task)
    on_task = board[board["task"] == task]
    for attack in [WORST, *sorted(on_task["attack"].unique())]:
        if attacks is not None and attack not in attacks:
            continue
        rows = on_task[on_task["attack"] == attack]
        privacy = [m for m in rows.sort_values("order" if "order" in rows else "metric")["metric"].unique()
                   if m.startswith(f"privacy/{attack}/")]
        table = ranked(board, task, attack, utility or "", privacy[0] if privacy else "", majority, applicable)
        if table.empty:
            continue
        out = pd.DataFrame({"rank": ["" if pd.isna(r) else int(r) for r in table["rank"]],
                            "band": [band_label(b) for b in table["band"]],
                            "frontier": table["frontier"].replace(0, ""),
                            "defense": table["defense"], "arguments": table["defense_args"]})
        for extra, title in (("server_args", "server"), ("attack_args", "attack args"), ("encoder", "encoder"),
                             ("mode", "mode")):
            if extra in table and table[extra].astype(str).nunique() > 1:
                out[title] = varying_args(table[extra]) if extra == "attack_args" else table[extra]
        if sizes_differ(table):
            out["train / eval"] = size_labels(table)
        for metric in filter(None, [utility, privacy[0] if privacy else None]):
            if metric in table:
                title = column_title(metric, up.get(metric, True))
                out[title] = [_mean_std(m, s, n, row_n) for m, s, n, row_n in zip(
                    table[metric], table.get(f"{metric} std", pd.Series([0.0] * len(table))),
                    table.get(f"{metric} n", table["n"]), table["n"])]
            if metric == utility and SIGNAL in table:
                out[SIGNAL] = table[SIGNAL]
        for metric in metrics:
            if metric in table:
                out[column_title(metric, up.get(metric, True))] = [
                    _mean_std(m, s, n, row_n) for m, s, n, row_n in zip(
                        table[metric], table.get(f"{metric} std", pd.Series([0.0] * len(table))),
                        table.get(f"{metric} n", table["n"]), table["n"])]
        if privacy:
            reference = "random/" + privacy[0].split("/", 1)[1]
            if reference in table:
                out[f"random {short(reference)}"] = table[reference]
        if ADVANTAGE in table:
            out["worst-case advantage ↓ safer" if attack == WORST else "advantage ↓ safer"] = table[ADVANTAGE]
        if attack == WORST:
            out["strongest attack"] = [strongest_label(a, args) for a, args in
                                       zip(table["strongest"], table.get("strongest_args", [""] * len(table)))]
            out["missing attacks (incomplete)"] = table["missing"]
        for title in next(iter((notes or {}).values()), {}):  # every configuration's notes name the same columns
            out[title] = [(notes or {}).get(h, {}).get(title, "") for h in table["config_hash"]]
        out["seeds"] = table["n"].astype(int)
        yield attack, table, out


def caption(attack: str) -> str:
    """The sentence above a table that says what it ranks by, and why."""
    bands = ", ".join(f"≤ {b:.2f}" for b in BANDS) + f", above {BANDS[-1]:.2f}"
    if attack == WORST:
        return (f"Each defense setting's strongest attack. Rank = utility within bands of worst-case advantage "
                f"({bands}), most private first, so the top rows are the most useful settings no attack beats by more "
                "than their band and a setting that leaks everything is never first; frontier per encoder; a setting "
                "some applicable attack has not reached is incomplete and has no rank. A setting's worst case covers "
                "every release it sends: the strongest attack names the traffic when it read the inference queries.")
    if attack:
        return (f"Rank = utility within bands of this attack's advantage ({bands}), most private first; frontier per "
                "encoder.")
    return "No attack: ranked by utility."


MAJORITY_LEGEND = (" Beats majority: whether the mean utility beats answering the majority class (the records' "
                   "majority-class note, mean over seeds): a \"no\" carries no utility signal, whatever its rank; empty "
                   "where the records have no such note.")


def report(board: pd.DataFrame, source: str, majority: dict[str, dict[str, float]] | None = None,
           applicable: Applicable | None = None, tasks: list[str] | None = None, attacks: list[str] | None = None,
           metrics: list[str] = (), notes: dict[str, dict[str, str]] | None = None,
           defenses: list[str] | None = None) -> str:
    """The Markdown of every task × attack on the board: the ranked settings with the task's headline utility
    and the attack's headline metric (mean ± std over seeds), its random guess and the advantage over it. With
    ``majority`` (``majority_by_config``), the utility is followed by whether it beats the majority class.
    ``tasks`` and ``attacks`` keep those tables only (and leave out the legend), ``defenses`` those rows of them
    (ranked on the whole table); ``metrics`` and ``notes`` add columns (``ranked_tables``)."""
    whole = tasks is None and attacks is None and defenses is None
    lines = [f"Printed by `bench report` from the records in `{source}` {LEGEND} {WORST_LEGEND}"
             + (MAJORITY_LEGEND if majority is not None else ""), ""] if whole else []
    for task in [t for t in task_order(board) if tasks is None or t in tasks]:
        for attack, table, out in ranked_tables(board, task, majority, applicable, attacks, metrics, notes):
            if defenses is not None:
                out = out[table["defense"].isin(defenses).to_numpy()]
            lines += [f"### {task} · {attack or 'no attack'}", "", caption(attack), "", markdown_table(out), ""]
    return "\n".join(lines).rstrip() + "\n"


RECORD_FIELDS = ("runtime_s", "machine")  # read like notes: the run's wall seconds, the machine that ran it


def record_value(record, name: str):
    """A record's note ``name``, or one of ``RECORD_FIELDS`` (None when the record has no such thing)."""
    if name == "runtime_s":
        return round(record.runtime_s)
    if name == "machine":
        hardware = record.hardware
        parts = [hardware.get("cpu_model") or hardware.get("processor"),
                 f"{hardware['cpu_count']} cores" if hardware.get("cpu_count") else None,
                 hardware.get("cpu_capability"), hardware.get("gpu")]
        return ", ".join(str(p) for p in parts if p) or None
    return record.notes.get(name)


def record_notes(records, names: list[str]) -> dict[str, dict[str, str]]:
    """``config_hash`` -> {name: text} of each record note in ``names`` (or ``RECORD_FIELDS``), over the
    configuration's current seeds: one value, or their range when the seeds differ."""
    newest = {(r.config_hash, r.seed): r for r in current([r for r in records if not r.at_smoke_budget])}
    values: dict[str, dict[str, list]] = {}
    for record in newest.values():  # a cell re-run with the same seed counts once, as on the board
        for name in names:
            value = record_value(record, name)
            if value is not None:
                values.setdefault(record.config_hash, {}).setdefault(name, []).append(value)

    def text(found: list) -> str:
        numbers = [v for v in found if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) == len(found) and len(set(numbers)) > 1:
            return f"{_number(min(numbers))}–{_number(max(numbers))}"
        return _number(found[0]) if len(set(map(str, found))) == 1 else ", ".join(dict.fromkeys(map(str, found)))
    return {config: {name: text(by_name[name]) if name in by_name else "" for name in names}
            for config, by_name in values.items()}


def _number(value) -> str:
    """A note's value as a reader sees it: floats to three significant digits, the rest as written."""
    if isinstance(value, float) and not isinstance(value, bool):
        return "∞" if math.isinf(value) else f"{value:.3g}"
    return str(value)


GENERATED = "<!-- printed by bench report: edits are overwritten -->"


def report_pages(board: pd.DataFrame, source: str, command: str,
                 majority: dict[str, dict[str, float]] | None = None,
                 known_limits: dict[str, list[str]] | None = None, applicable: Applicable | None = None
                 ) -> dict[str, str]:
    """The board as pages (``{file name: Markdown}``): ``index.md``, the tasks with their attacks and counts, and
    one ``<task>.md`` per task with each attack's ranked table, its sizes and ``command`` (which regenerates the
    pages) above it, and below it the links to the known limits (``bench.results.limits``) of its components."""
    pages, index = {}, []
    for task in task_order(board):
        on_task = board[board["task"] == task]
        lines = [GENERATED, f"# {task}", "",
                 f"Ranked settings of every attack on `{task}`, printed by `{command}` from the records in `{source}` "
                 f"{LEGEND} {WORST_LEGEND}" + (MAJORITY_LEGEND if majority is not None else ""), ""]
        attacks = []
        for attack, table, out in ranked_tables(board, task, majority, applicable):
            attacks.append(attack or "no attack")
            lines += [f"## {task} · {attack or 'no attack'}", "",
                      f"{caption(attack)} {_sizes_sentence(table)} Regenerate: `{command}`.", "", markdown_table(out),
                      ""]
            named = dict.fromkeys(a for a in table["strongest"] if a) if attack == WORST else [attack] if attack else []
            shown = [("task", task), *(("attack", a) for a in named),
                     *(("defense", d) for d in dict.fromkeys(table["defense"]))]
            if known_limits is not None and (linked := limits.links(shown, known_limits)):
                lines += [linked, ""]
        pages[f"{task}.md"] = "\n".join(lines).rstrip() + "\n"
        index.append(f"| [{task}]({task}.md) | {', '.join(attacks)} | {on_task['config_hash'].nunique()} |")
    pages["index.md"] = "\n".join([
        GENERATED, "# Results", "",
        f"Printed by `{command}` from the records in `{source}`: one page per task, its worst case first, then one "
        f"ranked table per attack {LEGEND} {WORST_LEGEND}", "",
        "| task | attacks | configurations |", "|---|---|---:|", *index, ""])
    return pages


def _sizes_sentence(table: pd.DataFrame) -> str:
    """How many examples the cells of a table used: one sentence when they agree, a pointer to the column when not."""
    if sizes_differ(table):
        return "Cells of different sizes: the train / eval column gives each row's."
    label = size_labels(table.iloc[:1])[0].split(" / ")
    return f"Cells of {label[0]} training and {label[1]} evaluation examples."


def splice(document: str, generated: str) -> str:
    """``document`` with the text between the report markers replaced by ``generated`` (markers appended at the
    end when missing); everything outside the markers is kept."""
    block = f"{BEGIN}\n{generated}{END}"
    if BEGIN in document and END in document:
        head, rest = document.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    return document.rstrip() + ("\n\n" if document.strip() else "") + block + "\n"
