"""Every defense family on one scale: utility against membership inference, the board's worst case and formal ε.

A *family* is a defense with everything fixed but the argument it sweeps (``eta`` for d_chi, ``eps`` for SanText,
``dp_epsilon`` of the server for DP-SGD), on one encoder, mode and size. Its settings are the worst-case rows of
``bench.results.worst_case`` with, beside each:

- ``membership``: membership inference's TPR at 1% FPR (its headline; the strongest membership cell);
- ``formal ε``: the ε of a guarantee with the membership attack's meaning, record-level (ε, δ)-DP of the training
  set. Only DP-SGD has one. The ε of d_chi and SanText is metric DP per token (ε·d between two tokens at embedding
  distance d), which bounds no membership test on the server's training set, so it is left blank; that guarantee
  is audited instead (``audits``: the published ``bench audit`` files beside their claims). DP-MLM's is pure DP per
  token (n·eps for a sentence of n tokens), but its release keeps each sentence's length, which separates two
  sentences of different lengths outright: blank as well;
- ``ε lower`` and ``one-run ε``: the empirical ε lower bounds the membership attack records (Clopper-Pearson at its
  best threshold; one-run auditing with canaries).

Utility at matched attack success: along a family's curve (its settings sorted by a privacy axis), utility is
interpolated linearly at fixed levels of attack success between the two settings that bracket each level
(``bench.results.curves.bracketing``, as ``bench reproduce`` reads utility at a paper's privacy level). A
level outside the family's curve is left blank: never extrapolated.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from bench.results.curves import bracketing
from bench.results.store import AUDITS
from bench.results.views import (
    GENERATED,
    args_sort_key,
    markdown_table,
    number,
    parse_args,
    strongest_label,
    task_order,
)
from bench.results.worst_case import SETTING, Applicable, worst_case

MEMBERSHIP = "privacy/membership/tpr_at_fpr_1pct"
EMPIRICAL = {"ε lower": "privacy/membership/epsilon_lower", "one-run ε": "privacy/membership/epsilon_one_run"}
DP = "dp_epsilon"  # the server argument of DP-SGD (``bench.models.dp_sgd``)
AXES = {"worst-case advantage": "advantage", "membership TPR at 1% FPR": "membership"}  # the matched tables'
LEVELS = (0.1, 0.25, 0.5)
PAGE = "one-scale.md"  # its page among the results pages
SIDES = ["source", "encoder", "mode", "n_train", "n_eval"]  # a family's fixed context, named when a task has several
# (sizes as train/eval)


def _membership_cells(board: pd.DataFrame, task: str) -> dict[tuple, dict[str, float]]:
    """setting -> the membership metrics of its strongest membership cell (largest TPR at 1% FPR)."""
    rows = board[(board["task"] == task) & (board["attack"].fillna("") == "membership")]
    keys = [c for c in SETTING if c in rows]
    rows = rows.assign(**{c: rows[c].fillna("") for c in keys if rows[c].dtype == object})
    found: dict[tuple, dict[str, float]] = {}
    for _, cell in rows.groupby("config_hash", sort=False):
        means = dict(zip(cell["metric"], cell["mean"]))
        if MEMBERSHIP not in means:
            continue
        key = tuple(cell.iloc[0][c] for c in keys)
        if key not in found or means[MEMBERSHIP] > found[key][MEMBERSHIP]:
            found[key] = {m: float(v) for m, v in means.items()}
    return found


def _swept(rows: pd.DataFrame) -> dict[str, str]:
    """defense -> the numeric argument it sweeps on the task (most distinct values; ``dp_epsilon`` for DP-SGD)."""
    out = {}
    for defense, group in rows.groupby("defense"):
        counts: dict[str, set] = {}
        for text in group["arguments"]:
            for key, value in parse_args(text).items():
                if number(value) is not None:
                    counts.setdefault(key, set()).add(value)
        ranked = sorted(counts, key=lambda k: (-len(counts[k]), k))
        out[defense] = ranked[0] if ranked else ""
    return out


def settings(board: pd.DataFrame, task: str, utility: str | None, applicable: Applicable | None = None
             ) -> pd.DataFrame:
    """One row per attacked defense setting of ``task``: ``family``, ``swept``, ``value`` (the swept argument's),
    ``utility``, ``membership``, ``advantage`` (the worst case), ``strongest``, ``complete``, ``formal ε`` and the
    empirical ε columns (``EMPIRICAL``); sorted by family, then value."""
    table = worst_case(board, task, utility, applicable)
    if table.empty:
        return pd.DataFrame()
    keys = [c for c in SETTING if c in table]
    member = _membership_cells(board, task)
    rows = []
    for _, row in table.iterrows():
        server = parse_args(row.get("server_args", ""))
        dp = server.pop(DP, None)
        defense = "dp-sgd" if dp is not None and row["defense"] == "none" else row["defense"]
        arguments = f"{DP}={dp}" if defense == "dp-sgd" else row.get("defense_args", "")
        found = member.get(tuple(row[c] for c in keys), {})
        rows.append({"defense": defense, "arguments": arguments,
                     "server": ",".join(f"{k}={v}" for k, v in server.items()),
                     **{c: row[c] for c in SIDES if c in row},
                     "utility": row.get(utility, math.nan) if utility else math.nan,
                     "membership": found.get(MEMBERSHIP, math.nan), "advantage": row["advantage"],
                     "strongest": strongest_label(row["strongest"], row.get("strongest_args", "")),
                     "complete": bool(row["complete"]),
                     "formal ε": number(dp) if defense == "dp-sgd" else math.nan,
                     **{name: found.get(metric, math.nan) for name, metric in EMPIRICAL.items()}})
    frame = pd.DataFrame(rows)
    swept = _swept(frame)
    named = [c for c in SIDES if c in frame and frame[c].astype(str).nunique() > 1]
    families, values = [], []
    for _, row in frame.iterrows():
        args = parse_args(row["arguments"])
        over = swept.get(row["defense"], "")
        fixed = ",".join(f"{k}={v}" for k, v in args.items() if k != over)
        context = " ".join(f"{row['n_train']}/{row['n_eval']}" if c == "n_train" else str(row[c])
                           for c in named if c != "n_eval" or "n_train" not in named)
        label = " · ".join(part for part in (row["defense"], fixed, row["server"], context) if part)
        families.append(label)
        values.append(number(args.get(over)) if over in args else math.nan)
    frame = frame.assign(family=families, swept=[swept.get(d, "") for d in frame["defense"]], value=values)
    frame = frame.assign(_key=[args_sort_key(a) for a in frame["arguments"]]).sort_values(
        ["family", "value", "_key"], kind="stable").drop(columns="_key")
    return frame.reset_index(drop=True)


def matched(table: pd.DataFrame, axis: str = "advantage", levels: tuple[float, ...] = LEVELS) -> pd.DataFrame:
    """Utility at matched attack success: per family, utility interpolated at each level of ``axis`` along the
    family's settings sorted by ``axis`` (blank when the curve does not span the level). Columns: ``family``,
    ``swept``, ``settings`` (those with both numbers), ``span`` of ``axis``, then one per level."""
    out = []
    if table.empty:
        return pd.DataFrame(columns=["family", "swept", "settings", "span", *map(str, levels)])
    for family, group in table.groupby("family", sort=False):
        group = group.dropna(subset=[axis, "utility"])
        # one utility per point: settings at the same privacy and swept value (seeds of a repeated cell) are averaged
        utility = group.assign(_v=group["value"].fillna(-math.inf)).groupby([axis, "_v"])["utility"].mean()
        points = sorted((key[0], key) for key in utility.index)  # (privacy, its point)
        row = {"family": family, "swept": group["swept"].iloc[0] if len(group) else "", "settings": len(points),
               "span": f"{points[0][0]:.3f} to {points[-1][0]:.3f}" if points else ""}
        for level in levels:
            bracket = bracketing(points, level)
            if bracket is None:
                row[str(level)] = math.nan
                continue
            (_, a), (_, b), weight = bracket
            low, high = utility[a], utility[b]
            row[str(level)] = low + weight * (high - low)
        out.append(row)
    return pd.DataFrame(out)


def matched_shown(table: pd.DataFrame, axis: str, name: str) -> pd.DataFrame:
    """``matched`` as shown (page and dashboard): families with a point, level columns named after ``name``."""
    found = matched(table, axis)
    return found[found["settings"] > 0].rename(columns={str(level): f"{name} at {level:g}" for level in LEVELS})


SETTINGS_COLUMNS = ["family", "arguments", "utility", "membership", "advantage", "strongest", "complete",
                    "formal ε", *EMPIRICAL]
LEGEND = (
    "Each defense setting that an attack measured, grouped by family (a defense with all but its swept argument "
    "fixed). *membership*: membership inference's TPR at 1% FPR (blank: not run on the setting); *advantage*: the "
    "worst case of the board on the one scale (0 = the random guess, 1 = total recovery; *strongest* names the "
    "attack, and an incomplete setting's worst case is a lower bound); *formal ε*: DP-SGD's (ε, δ = 1/n) on the "
    "training set, the only guarantee here with membership's meaning (the ε or η of d_chi and SanText is metric DP "
    "per token, left blank here and audited at the end of the page; DP-MLM's eps is pure DP per token, n·eps for a "
    "sentence of n tokens, and its release keeps the sentence's length, so no ε covers two training sentences of "
    "different lengths: left blank too); *ε lower* and *one-run ε*: the empirical lower "
    "bounds the membership attack certifies (Clopper-Pearson at its best threshold; one-run auditing with canaries), "
    "at most about 3.3 at 100 members and 100 non-members whatever the defense.")
MATCHED_LEGEND = (
    "Utility at matched attack success: per family, utility interpolated linearly at each level of the axis between "
    "the two settings that bracket it, along the family's settings sorted by the axis; blank where the family's "
    "curve (*span*) does not reach the level: never extrapolated. A family whose curve is not monotone is read on "
    "its first bracketing pair.")


AUDIT_LEGEND = (
    "The local token mechanisms' own guarantee, audited (`bench audit`, the files in `{source}audits/`; "
    "[how](../audit.md)): for pairs of tokens at embedding distance d, the loss their releases show, a lower bound "
    "at 95% confidence over all pairs at once, against the ε·d the mechanism claims. *largest audited*: the largest "
    "bound over the pairs, beside *its claim*; *audited / claim*: the largest ratio over the pairs (above 1 is a "
    "bug); *trials' ceiling*: the largest bound the trials can show, so a claim above it cannot be caught.")


def read_audits(root) -> list[dict]:
    """The published audits of a results folder (``<root>/audits/*.json``, ``bench audit --json``), by file name."""
    import json

    folder = Path(root) / AUDITS
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.json"))]


def audits(reports: list[dict]) -> pd.DataFrame:
    """One row per published audit of a real mechanism (a planted leak is a check of the audit, left out): the
    defense, its arguments, the encoder, pairs and trials, the largest audited bound and its pair's claim, the
    largest audited / claim ratio, the pairs above their claim and the trials' ceiling."""
    rows = []
    for report in reports:
        if report.get("leak"):
            continue
        pairs = [{k: float(p[k]) for k in ("lower", "claim", "ceiling")} for p in report["pairs"]]
        top = max(pairs, key=lambda p: p["lower"])
        rows.append({"defense": report["defense"],
                     "arguments": ",".join(f"{k}={v}" for k, v in report["args"].items()),
                     "encoder": report["encoder"], "pairs": len(pairs), "trials": report["trials"],
                     "largest audited": top["lower"], "its claim": top["claim"],
                     "audited / claim": max(p["lower"] / p["claim"] for p in pairs if p["claim"] > 0),
                     "pairs above claim": report["exceeded"],
                     "trials' ceiling": max(p["ceiling"] for p in pairs)})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.assign(_key=[args_sort_key(a) for a in frame["arguments"]])
    return frame.sort_values(["defense", "_key"], kind="stable").drop(columns="_key").reset_index(drop=True)


def page(board: pd.DataFrame, source: str, command: str, headline: dict[str, str],
         applicable: Applicable | None = None, audit_reports: list[dict] = ()) -> str | None:
    """The one-scale page (Markdown) of every task with an attacked setting, then the token mechanisms' audits
    (``audits``); None when there is neither."""
    lines = [GENERATED, "# One scale", "",
             f"Every defense family side by side, printed by `{command}` from the records in `{source}`. {LEGEND}",
             "", MATCHED_LEGEND, ""]
    audited = audits(list(audit_reports))
    shown = not audited.empty
    for task in task_order(board):
        utility = headline.get(task)
        table = settings(board, task, utility, applicable)
        if table.empty:
            continue
        shown = True
        name = utility.rsplit("/", 1)[-1] if utility else "utility"
        out = table[SETTINGS_COLUMNS].rename(columns={"utility": name, "membership": "membership TPR@1%"})
        lines += [f"## {task}", "", f"Utility: {name}. Regenerate: `{command}`.", "", markdown_table(out), ""]
        for title, axis in AXES.items():
            found = matched_shown(table, axis, name)
            if found.empty:
                continue
            lines += [f"### {task} · {name} at matched {title}", "", markdown_table(found), ""]
    if not audited.empty:
        lines += ["## The token mechanisms' own guarantee, audited", "", AUDIT_LEGEND.format(source=source), "",
                  markdown_table(audited, digits=2), ""]
    return "\n".join(lines).rstrip() + "\n" if shown else None
