"""Privacy on one scale: each attack's advantage over its own random guess, and each defense setting's worst case.

The scale. An attack's headline metric (the first it declares) is mapped to

    advantage = (attack − reference) / (best − reference)

where ``reference`` is the random guess scored in the same cells and ``best`` the metric's bound on the attacker's
side (``Metric.high``, or ``Metric.low`` for a metric where lower means more recovered, such as an MSE: the formula
is then mirrored). 0 is as good as guessing, 1 is total recovery, whatever the metric.

- An attack below its reference is clipped to 0: the adversary holds the guess too (it is drawn from public
  knowledge) and can always fall back on it, so what it achieves is never worse than guessing. The raw difference
  stays in the per-attack tables.
- A reference that already reaches the best value leaves no room to measure a leak: the advantage is undefined
  (NaN) and the cell counts as not measured.
- A missing reference, or an unbounded best value, is likewise undefined.

A defense setting is the configuration without the attack: task, defense and its arguments, server options,
encoder, mode and sizes. Its privacy is the largest advantage of any attack on it (the attack named), over the
attacks that apply to what it releases on that task: those whose ``accepts`` meets a kind the defense yields on the
task's release path, and whose task checks pass (``bench.engine.applicable.applicable_attacks``, passed in by the
readers above the engine). A setting that some of them did not
attack is incomplete, its worst case only a lower bound, and it is never ranked as safe.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import pandas as pd

from bench.core.errors import BenchError
from bench.core.metrics import Metric
from bench.core.registry import ATTACKS, DEFENSES, TASKS
from bench.core.versions import compatible_kind

# the configuration columns of a defense setting (``views.CONFIG`` without the attack and the cell's hash)
SETTING = ["source", "task", "encoder", "defense", "defense_args", "server_args", "mode", "n_train", "n_eval"]


def advantage(value: float, reference: float, low: float, high: float, higher_is_better: bool = True) -> float:
    """``value``'s advantage over ``reference`` on a metric bounded by [``low``, ``high``]: 0 = the guess, 1 = the
    best value; clipped at 0; NaN when the reference is missing or already best, or the best value unbounded."""
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (value, reference)):
        return math.nan
    best = high if higher_is_better else low
    room = (best - reference) if higher_is_better else (reference - best)
    if not math.isfinite(best) or not math.isfinite(reference) or room <= 0:
        return math.nan
    gained = (value - reference) if higher_is_better else (reference - value)
    return max(0.0, gained / room)


def headline(attack: str) -> Metric | None:
    """The attack's headline metric (its first declared), None when the attack is not registered here."""
    try:
        return ATTACKS.get(attack).metrics[0]
    except BenchError:
        return None


def declared(key: str) -> Metric | None:
    """The declaration of a ``privacy/<attack>/<metric>`` key, None when the attack or metric is not registered."""
    parts = key.split("/")
    if len(parts) != 3 or parts[0] != "privacy":
        return None
    try:
        return next((m for m in ATTACKS.get(parts[1]).metrics if m.name == parts[2]), None)
    except BenchError:
        return None


Applicable = Callable[[str, str, str], "tuple[str, ...] | None"]  # (task, defense, its arguments) -> attacks


def attacks_run(board: pd.DataFrame) -> Applicable:
    """A stand-in for ``bench.engine.applicable.applicable_attacks`` for readers below the engine: the attacks run
    on the task that accept a kind the defense releases. It misses an attack never run on the task; ``bench
    report`` and the dashboard pass the engine's, which asks the registry."""
    ran = {task: sorted(set(rows["attack"].fillna("")) - {""}) for task, rows in board.groupby("task")}

    @functools.lru_cache(maxsize=1024)
    def applicable(task: str, defense: str, defense_args: str = "") -> tuple[str, ...] | None:
        try:
            task_cls, defense_cls = TASKS.get(task), DEFENSES.get(defense)
        except BenchError:
            return None
        found = []
        for name in ran.get(task, []):
            try:
                compatible_kind(defense_cls, ATTACKS.get(name), task_cls)
            except BenchError:
                continue
            found.append(name)
        return tuple(found)

    return applicable


def attack_cells(board: pd.DataFrame, task: str) -> pd.DataFrame:
    """One row per attacked configuration of ``task``: its setting, ``attack``, ``attack_args``, the headline
    metric's mean (``value``), its random guess (``reference``) and ``advantage``."""
    rows = board[(board["task"] == task) & (board["attack"].fillna("") != "")]
    out = []
    for attack, cells in rows.groupby("attack", sort=True):
        metric = headline(attack)
        if metric is None:
            continue
        key, reference = f"privacy/{attack}/{metric.name}", f"random/{attack}/{metric.name}"
        keys = [c for c in (*SETTING, "attack_args", "config_hash") if c in cells]
        for _, cell in cells.groupby("config_hash", sort=False):
            means = dict(zip(cell["metric"], cell["mean"]))
            if key not in means:
                continue
            value, guess = float(means[key]), float(means.get(reference, math.nan))
            first = cell.iloc[0]
            out.append({**{c: first[c] for c in keys}, "attack": attack, "value": value, "reference": guess,
                        "advantage": advantage(value, guess, metric.low, metric.high, metric.higher_is_better)})
    return pd.DataFrame(out)


def worst_case(board: pd.DataFrame, task: str, utility: str | None, applicable: Applicable | None = None
               ) -> pd.DataFrame:
    """One row per defense setting of ``task`` that any attack measured.

    Columns: the setting; its ``utility`` (mean, std and seeds of the setting's cell with the most seeds, the
    unattacked one first); ``advantage`` (the worst case); ``strongest`` and ``strongest_args`` (that attack and its
    arguments); ``attacked``; ``missing`` (the applicable attacks not run, and those run without a defined
    advantage, marked so); ``complete``; ``n`` and ``config_hash`` (the cell the utility comes from).
    ``applicable`` names the attacks that apply to a setting (``bench.engine.applicable.applicable_attacks``;
    default ``attacks_run``).
    """
    applicable = applicable or attacks_run(board)
    cells = attack_cells(board, task)
    if cells.empty:
        return pd.DataFrame()
    keys = [c for c in SETTING if c in cells]
    on_task = board[board["task"] == task]
    keyed = on_task.assign(**{c: on_task[c].fillna("") for c in keys if on_task[c].dtype == object})
    utilities = {}
    if utility:
        rows = keyed[keyed["metric"] == utility]
        for values, group in rows.groupby(keys, sort=False, dropna=False):
            group = group.assign(_plain=(group["attack"].fillna("") != "")).sort_values(
                ["_plain", "n"], ascending=[True, False], kind="stable")
            utilities[values if isinstance(values, tuple) else (values,)] = group.iloc[0]
    out = []
    cells = cells.assign(**{c: cells[c].fillna("") for c in keys if cells[c].dtype == object})
    for values, group in cells.groupby(keys, sort=False, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        setting = dict(zip(keys, values))
        measured = group.dropna(subset=["advantage"])
        applies = applicable(task, setting["defense"], setting.get("defense_args", ""))
        attacked = sorted(set(measured["attack"]))
        unscored = set(group["attack"]) - set(attacked)  # run, but without a defined advantage (no random guess)
        missing = [f"{a} (no advantage)" if a in unscored else a
                   for a in sorted(set(applies or ()) | unscored) if a not in attacked]
        row = {**setting, "attacked": ", ".join(attacked), "missing": ", ".join(missing),
               "complete": not missing and bool(attacked)}
        if len(measured):
            top = measured.sort_values("advantage", ascending=False, kind="stable").iloc[0]
            row.update(advantage=float(top["advantage"]), strongest=top["attack"],
                       strongest_args=top.get("attack_args", ""))
        else:
            row.update(advantage=math.nan, strongest="", strongest_args="")
        chosen = utilities.get(values)
        if chosen is not None:
            row.update({utility: chosen["mean"], f"{utility} std": chosen["std"], f"{utility} n": chosen["n"],
                        "n": int(chosen["n"]), "config_hash": chosen["config_hash"]})
        else:
            row.update(n=0, config_hash=group["config_hash"].iloc[0])
        out.append(row)
    return pd.DataFrame(out)
