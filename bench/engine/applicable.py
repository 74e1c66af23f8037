"""Which attacks apply to a defense on a task: the ones a cell of the pair could run.

An attack applies when it accepts a kind the defense releases on the task, the task's server takes a release path
that yields that kind, and the attack's and the spans' checks against the task pass: the checks ``make_spec``
makes before a cell runs, without building anything heavy. The board's worst case (``bench.results.worst_case``)
marks a defense setting incomplete when one of these has not attacked it.
"""

from __future__ import annotations

import functools

from bench.core.errors import BenchError
from bench.core.params import build_component, parse_arg_string
from bench.core.registry import ATTACKS, DEFENSES, TASKS
from bench.core.versions import compatible_kind
from bench.engine.paths import choose_path
from bench.engine.runner import check_spans


@functools.lru_cache(maxsize=1024)
def applicable_attacks(task: str, defense: str, defense_args: str = "") -> tuple[str, ...] | None:
    """The registered attacks a cell of ``defense`` (with ``defense_args``, as the board spells them) on ``task``
    could run, in name order; None when the task or the defense is not registered (a plugin's, not loaded)."""
    try:
        task_cls, defense_cls = TASKS.get(task), DEFENSES.get(defense)
    except BenchError:
        return None
    found = []
    for name in ATTACKS.names():
        attack_cls = ATTACKS.get(name)
        try:
            kind = compatible_kind(defense_cls, attack_cls, task_cls)
            choose_path(defense_cls, task_cls.protocols, kind)
            build_component(attack_cls, {}).check_task(task_cls)
            check_spans(task_cls, defense_cls, attack_cls, parse_arg_string(defense_args or None))
        except BenchError:
            continue
        found.append(name)
    return tuple(found)
