"""What the registered components declare about a cell: the release kind an attack gets, and the versions of the
task, defense and attack that records keep."""

from __future__ import annotations

import functools
import inspect
import json

from bench.core.components import RepresentationDefense, SpanDefense, TokenDefense
from bench.core.errors import BenchError
from bench.core.public import IdentityTokens
from bench.core.registry import ATTACKS, DEFENSES, TASKS
from bench.core.releases import ReleaseKind
from bench.core.spec import RunSpec


def rewrites_text(defense_cls: type) -> bool:
    """Whether a defense's release is text a client can pretrain on: a span defense's rewrite, or the text as it
    is (a token defense whose mechanism is the identity, ``none``); token-level perturbations are not."""
    if issubclass(defense_cls, SpanDefense):
        return True
    try:
        return issubclass(defense_cls, TokenDefense) and isinstance(defense_cls().token_mechanism(), IdentityTokens)
    except BenchError:
        return False


def released_kinds(defense_cls: type) -> tuple[ReleaseKind, ...]:
    """The release kinds a defense can yield: its own, and for a text defense also the predictions of a prediction
    API whose victim trained on its release (it acts there as a data defense); for a text or representation defense
    also the model of the server trained on its release (membership inference attacks it)."""
    kinds = tuple(defense_cls.releases)
    if issubclass(defense_cls, TokenDefense) and ReleaseKind.PREDICTIONS not in kinds:
        kinds += (ReleaseKind.PREDICTIONS,)
    if issubclass(defense_cls, (TokenDefense, RepresentationDefense)) and ReleaseKind.MODEL not in kinds:
        kinds += (ReleaseKind.MODEL,)
    return kinds


def compatible_kind(defense_cls: type, attack_cls: type, task_cls: type | None = None) -> ReleaseKind:
    """The first release kind the defense produces and the attack accepts, else a BenchError. For a task that
    pretrains on the client's data, a text defense's release is the pretrained model's weights; a text defense
    also guards a prediction API's training data (its release kinds include predictions)."""
    pretraining = task_cls is not None and "pretraining" in task_cls.protocols
    if pretraining:  # the pretrained MLM's weights, for text a client can pretrain on; no server trains otherwise
        produced_kinds = (ReleaseKind.MODEL,) if rewrites_text(defense_cls) else \
            tuple(kind for kind in released_kinds(defense_cls) if kind is not ReleaseKind.MODEL)
    else:
        produced_kinds = released_kinds(defense_cls)
    for kind in produced_kinds:
        if kind in attack_cls.accepts:
            return kind
    produced = ", ".join(str(k) for k in produced_kinds) or "nothing"
    accepted = ", ".join(str(k) for k in attack_cls.accepts) or "nothing"
    raise BenchError(
        f"defense '{defense_cls.registry_name}' releases {produced} but attack "
        f"'{attack_cls.registry_name}' accepts {accepted}, so they cannot be paired."
    )


def component_versions(spec: RunSpec) -> str:
    """``task@v defense@v attack@v`` for a spec, in the form records keep."""
    defense_cls = DEFENSES.get(spec.defense)
    if len(inspect.signature(defense_cls.version_for).parameters) >= 2:
        defense = defense_cls.version_for(spec.defense_args, TASKS.get(spec.task))
    else:  # a plugin written before version_for took the task
        defense = defense_cls.version_for(spec.defense_args)
    parts = [f"{spec.task}@{TASKS.get(spec.task).version}", f"{spec.defense}@{defense}"]
    if spec.attack:
        attack_cls = ATTACKS.get(spec.attack)
        kind = compatible_kind(DEFENSES.get(spec.defense), attack_cls, TASKS.get(spec.task))
        parts.append(f"{spec.attack}@{attack_cls.version_for(spec.attack_args, kind)}")
    else:
        parts.append("")
    return " ".join(parts)


def version_numbers(versions) -> tuple[int, ...]:
    """The numbers of ``name@N`` versions, in order (0 for one that names no number)."""
    return tuple(int(n) if (n := v.rpartition("@")[2]).isdigit() else 0 for v in versions)


@functools.lru_cache(maxsize=4096)
def code_version_numbers(spec_json: str, registered: tuple = ()) -> tuple[int, ...] | None:
    """The task's, defense's and attack's version numbers the code records for a spec (its JSON), None when a
    component is not registered or the spec no longer builds (``registered``: the registries' sizes, so that a
    component registered later is seen)."""
    try:
        versions = component_versions(RunSpec.from_dict(json.loads(spec_json))).split(" ")
    except (BenchError, TypeError, ValueError, KeyError):
        return None
    return version_numbers(versions)
