"""What a reader ranks by: per task and attack, one row per configuration with numeric columns, each metric's
direction, the Pareto frontier of utility against attack success, and the references of the same cells.

Shared by the dashboard and ``bench report`` (no torch, no Streamlit). The input is the long leaderboard frame
(``bench.results.leaderboard.leaderboard_frame``: one row per configuration and metric with mean, std, n and
``higher_is_better``).

Ranking: the *frontier layer* of a configuration on (headline utility, chosen attack metric). Layer 1 is the
Pareto frontier: no other configuration is at least as useful and at least as private, and better on one of
the two. Layer 2 is the frontier once layer 1 is removed, and so on; ties within a layer are broken by utility.
It needs no weight between utility and privacy and no interpolation to a matched utility, which a handful of
recorded settings per defense could not support.
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

# a configuration: everything but the seed (config_hash already encodes it; the rest is for reading); ``source``
# (your runs or the published board) when a frame holds both
CONFIG = ["source", "encoder", "defense", "defense_args", "server_args", "attack", "attack_args", "mode", "n_train",
          "n_eval", "config_hash"]
SIGNAL = "beats majority"  # the column that says whether a cell's utility beats the majority-class answer
MOCK = re.compile(r"^mock(-\d+)?$")


def is_test_encoder(name: str) -> bool:
    """``mock`` and ``mock-<d>``: seeded random encoders for tests, not results to read."""
    return bool(MOCK.match(str(name)))


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


def ranked(board: pd.DataFrame, task: str, attack: str, utility: str, privacy: str) -> pd.DataFrame:
    """The ``wide`` rows with ``frontier`` (layer on utility × the attack metric), ``advantage`` (attack success
    minus its random guess in the same cells, oriented so positive = the attack beats a guess) and ``rank``,
    sorted by rank. ``utility`` and ``privacy`` are full metric keys."""
    table = wide(board, task, attack)
    if table.empty:
        return table
    up = direction(board)
    u = table[utility] if utility in table else pd.Series([None] * len(table))
    p = table[privacy] if privacy in table else pd.Series([None] * len(table))
    table["frontier"] = frontier_layers(list(u), list(p), up.get(utility, True), up.get(privacy, True))
    reference = "random/" + privacy.split("/", 1)[1] if privacy.startswith("privacy/") else ""
    if privacy in table and reference in table:
        sign = 1.0 if up.get(privacy, True) else -1.0
        table["advantage"] = sign * (table[privacy] - table[reference])
    ranked_rows = table.assign(_layer=table["frontier"].replace(0, 10**6),
                               _u=(u if up.get(utility, True) else -u) if utility in table else 0.0)
    ranked_rows = ranked_rows.sort_values(["_layer", "_u"], ascending=[True, False], kind="stable")
    ranked_rows.insert(0, "rank", range(1, len(ranked_rows) + 1))
    return ranked_rows.drop(columns=["_layer", "_u"]).reset_index(drop=True)


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
    columns, titles = ["rank", "frontier", "defense", "defense_args"], {}
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
    if "advantage" in table:
        columns.append("advantage")
        titles["advantage"] = "advantage over random ↓ safer"
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
          "is one seed). Rank = frontier layer on (headline utility, the attack's headline metric: the first it "
          "declares), then utility; layer 1 is the Pareto frontier. Advantage = attack success minus the random guess "
          "scored in the same cells, oriented so that positive means the attack beats a guess.")


def task_order(board: pd.DataFrame) -> list[str]:
    """The board's tasks, most configurations first."""
    return list(board.groupby("task")["config_hash"].nunique().sort_values(ascending=False, kind="stable").index)


def ranked_tables(board: pd.DataFrame, task: str, majority: dict[str, dict[str, float]] | None = None
                  ) -> Iterator[tuple[str, pd.DataFrame, pd.DataFrame]]:
    """Each attack of ``task`` (its name, "" for none), the ranked rows (``ranked``) and the table a reader sees:
    rank, frontier, defense and arguments, the settings that vary, the sizes where they vary, the headline utility
    (and, with ``majority`` (``majority_by_config``), whether it beats the majority class) and the attack's headline
    metric (mean ± std [95% CI]), its random guess, the advantage and the seeds."""
    up = direction(board)
    utility = headline_metrics(board).get(task)
    on_task = board[board["task"] == task]
    for attack in sorted(on_task["attack"].unique()):
        rows = on_task[on_task["attack"] == attack]
        privacy = [m for m in rows.sort_values("order" if "order" in rows else "metric")["metric"].unique()
                   if m.startswith(f"privacy/{attack}/")]
        table = ranked(board, task, attack, utility or "", privacy[0] if privacy else "")
        if table.empty:
            continue
        if majority is not None and utility:
            table = mark_utility_signal(table, majority, utility, up.get(utility, True))
        out = pd.DataFrame({"rank": table["rank"], "frontier": table["frontier"].replace(0, ""),
                            "defense": table["defense"], "arguments": table["defense_args"]})
        for extra, title in (("server_args", "server"), ("attack_args", "attack args"), ("encoder", "encoder"),
                             ("mode", "mode")):
            if extra in table and table[extra].astype(str).nunique() > 1:
                out[title] = table[extra]
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
        if privacy:
            reference = "random/" + privacy[0].split("/", 1)[1]
            if reference in table:
                out[f"random {short(reference)}"] = table[reference]
            if "advantage" in table:
                out["advantage"] = table["advantage"]
        out["seeds"] = table["n"].astype(int)
        yield attack, table, out


MAJORITY_LEGEND = (" Beats majority: whether the mean utility beats answering the majority class (the records' "
                   "majority-class note, mean over seeds): a \"no\" carries no utility signal, whatever its rank; empty "
                   "where the records have no such note.")


def report(board: pd.DataFrame, source: str, majority: dict[str, dict[str, float]] | None = None) -> str:
    """The Markdown of every task × attack on the board: the ranked settings with the task's headline utility
    and the attack's headline metric (mean ± std over seeds), its random guess and the advantage over it. With
    ``majority`` (``majority_by_config``), the utility is followed by whether it beats the majority class."""
    lines = [f"Printed by `bench report` from the records in `{source}` {LEGEND}"
             + (MAJORITY_LEGEND if majority is not None else ""), ""]
    for task in task_order(board):
        for attack, _, out in ranked_tables(board, task, majority):
            lines += [f"### {task} · {attack or 'no attack'}", "", markdown_table(out), ""]
    return "\n".join(lines).rstrip() + "\n"


GENERATED = "<!-- printed by bench report: edits are overwritten -->"


def report_pages(board: pd.DataFrame, source: str, command: str,
                 majority: dict[str, dict[str, float]] | None = None,
                 known_limits: dict[str, list[str]] | None = None) -> dict[str, str]:
    """The board as pages (``{file name: Markdown}``): ``index.md``, the tasks with their attacks and counts, and
    one ``<task>.md`` per task with each attack's ranked table, its sizes and ``command`` (which regenerates the
    pages) above it, and below it the links to the known limits (``bench.results.limits``) of its components."""
    pages, index = {}, []
    for task in task_order(board):
        on_task = board[board["task"] == task]
        lines = [GENERATED, f"# {task}", "",
                 f"Ranked settings of every attack on `{task}`, printed by `{command}` from the records in `{source}` "
                 f"{LEGEND}" + (MAJORITY_LEGEND if majority is not None else ""), ""]
        attacks = []
        for attack, table, out in ranked_tables(board, task, majority):
            attacks.append(attack or "no attack")
            lines += [f"## {task} · {attack or 'no attack'}", "",
                      f"{_sizes_sentence(table)} Regenerate: `{command}`.", "", markdown_table(out), ""]
            shown = [("task", task), *([("attack", attack)] if attack else []),
                     *(("defense", d) for d in dict.fromkeys(table["defense"]))]
            if known_limits is not None and (linked := limits.links(shown, known_limits)):
                lines += [linked, ""]
        pages[f"{task}.md"] = "\n".join(lines).rstrip() + "\n"
        index.append(f"| [{task}]({task}.md) | {', '.join(attacks)} | {on_task['config_hash'].nunique()} |")
    pages["index.md"] = "\n".join([
        GENERATED, "# Results", "",
        f"Printed by `{command}` from the records in `{source}`: one page per task, one ranked table per attack "
        f"{LEGEND}", "",
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
