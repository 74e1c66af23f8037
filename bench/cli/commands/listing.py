"""``bench list``: the components, their parameters and the pairs that can run."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from rich.markup import escape
from rich.table import Table

from bench.cli.common import PluginOption, load_plugins, out, user_errors
from bench.core.components import span_kinds
from bench.core.errors import BenchError
from bench.core.params import build_component, describe_parameters
from bench.core.registry import ATTACKS, DEFENSES, TASKS
from bench.core.releases import ReleaseKind
from bench.core.versions import compatible_kind, released_kinds, rewrites_text
from bench.engine.paths import choose_path
from bench.models.encoders import ENCODER_NAMES


@user_errors
def list_components(plugin: Optional[List[Path]] = PluginOption) -> None:
    """Show tasks, defenses and attacks with their parameters, and the pairs that can run."""
    load_plugins(plugin)
    encoders = Table(title="encoders (--encoder NAME)", title_justify="left")
    for column in ("name", "where from", "what"):
        encoders.add_column(column, style="bold" if column == "name" else None)
    for row in ENCODER_NAMES:
        encoders.add_row(*(escape(c) for c in row))
    out.print(encoders)
    for title, registry in (("tasks", TASKS), ("defenses", DEFENSES), ("attacks", ATTACKS)):
        table = Table(title=title, title_justify="left")
        table.add_column("name", style="bold")
        table.add_column("kinds" if registry is not TASKS else "metrics (server protocols)")
        table.add_column("parameters (default)" if registry is not TASKS else "settings (default)")
        for name in registry.names():
            cls = registry.get(name)
            if registry is TASKS:
                kinds = f"{', '.join(m.name for m in cls.metrics)} ({', '.join(cls.protocols)})"
                params = _task_settings(cls)
            else:
                kinds = _defense_kinds(cls) if registry is DEFENSES else (
                    ", ".join(str(k) for k in cls.accepts) + "\nmetrics: " + ", ".join(m.name for m in cls.metrics))
                params = "\n".join(
                    f"{p}={d!r}" + (f"  # {c}" if c else "") for p, _, d, c in describe_parameters(cls)
                )
            table.add_row(*(escape(c) for c in (name, kinds, params or "-")))  # a plugin's text is printed literally
        out.print(table)
    pairs = Table(title="compatible defense / attack pairs", title_justify="left")
    pairs.add_column("defense")
    pairs.add_column("attacks")
    for name in DEFENSES.names():
        ok, on_weights = [], []
        for attack in ATTACKS.names():
            tasks = pairing_tasks(DEFENSES.get(name), ATTACKS.get(attack))
            if any("pretraining" not in TASKS.get(t).protocols for t in tasks):
                ok.append(attack)
            elif tasks:  # only the weights a pretraining task releases
                on_weights.append(attack)
        if on_weights:
            ok.append(f"({', '.join(on_weights)} on pretraining tasks)")
        pairs.add_row(escape(name), escape(", ".join(ok) or "-"))
    out.print(pairs)


def pairing_tasks(defense_cls: type, attack_cls: type) -> list[str]:
    """The tasks on which a defense and an attack pair: a kind in common, the attack's checks of the task and a
    path that yields the kind (what ``make_spec`` checks, without parameters)."""
    try:
        attack = build_component(attack_cls, {})
    except BenchError:
        attack = None
    found = []
    for task in TASKS.names():
        task_cls = TASKS.get(task)
        try:
            kind = compatible_kind(defense_cls, attack_cls, task_cls)
            if attack is not None:
                attack.check_task(task_cls)
            choose_path(defense_cls, task_cls.protocols, kind)
        except BenchError:
            continue
        found.append(task)
    return found


def _task_settings(cls: type) -> str:
    """What a task fixes for its cells, one setting per line.

    The lines give its sizes (--n-train, --n-eval) and whether its server predicts original evaluation data. Then
    its sensitive span kinds, the task that scores a released model, and its server's training defaults
    (--train-args overrides them).
    """
    def kinds(names) -> str:
        return "+".join(names) if len(names) <= 6 else "+".join(names[:5]) + f"+... ({len(names)} kinds)"

    lines = [f"n_train={cls.default_n_train}, n_eval={cls.default_n_eval}  # examples, up to (--n-train, --n-eval)"]
    if getattr(cls, "evaluate_on", "released") == "original":  # a TokenTask's
        lines.append("evaluate_on='original'  # only the training split is privatized")
    if span_kinds(cls):
        lines.append(f"spans: {kinds(span_kinds(cls))}  # what span defenses rewrite (kinds=)")
    if getattr(cls, "utility_task", ""):  # a PretrainingTask's
        lines.append(f"utility_task={cls.utility_task!r}  # scores the released model")
    if getattr(cls, "attributes", ()):  # an ApiTask's
        lines.append(f"attributes: {'+'.join(cls.attributes)}  # what attribute inference targets")
    if cls.training_defaults:
        lines.append("training: " + ",".join(f"{k}={v}" for k, v in cls.training_defaults.items()))
    return "\n".join(lines)


def _defense_kinds(cls: type) -> str:
    """A defense's release kinds as pairing sees them: its own, then those it yields through another protocol."""
    own = ", ".join(str(k) for k in cls.releases)
    why = {ReleaseKind.PREDICTIONS: "a prediction API's training data", ReleaseKind.MODEL: "a trained server's model"}
    extra = [f"{k} ({why.get(k, 'another protocol')})" for k in released_kinds(cls) if k not in cls.releases]
    lines = [own, *(f"+ {e}" for e in extra)]
    if rewrites_text(cls):
        lines.append(f"on pretraining tasks: {ReleaseKind.MODEL} only")
    return "\n".join(lines)

