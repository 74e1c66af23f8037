"""What cells build once before they run, then share from the cache: adapted server checkpoints, offline MLMs.

No record's runtime holds them, so a grid's dry run counts those the cache lacks, each timed at the rate of the
builds of its kind cached on this machine, and a running grid adds them to its time left until they are cached.
Components declare the offline MLMs they load (``offline_mlms``); the server options, the adaptation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from bench.core.files import Build
from bench.core.params import build_component
from bench.core.registry import ATTACKS, DEFENSES
from bench.core.spec import RunSpec
from bench.engine.paths.tokens import adaptation_build
from bench.models.offline_mlm import INFO_FILE, offline_seconds, offline_target


def pending_builds(specs: Iterable[RunSpec], plan: Callable[[RunSpec], str] = lambda spec: "") -> list[Build]:
    """What the cells of ``specs`` would build first, each once, because the cache lacks it. ``plan`` says what a cell
    reuses (``bench.engine.reuse.plan``): a cell on a stored release runs neither its defense nor its server.
    Nothing is trained or removed."""
    found: dict[Path, Build] = {}
    targets: dict[tuple[str, str], Build | None] = {}
    for spec in specs:
        reused = plan(spec)
        builds = [adaptation_build(spec, attack_only=bool(reused))]
        for name in _offline_mlms(spec, defense_runs=reused != "stored release"):
            if (name, spec.task) not in targets:
                target = offline_target(name, spec.task)
                targets[name, spec.task] = None if target is None else \
                    Build("offline MLM", target[0], INFO_FILE, offline_seconds(target[1]))
            builds.append(targets[name, spec.task])
        for build in builds:
            if build is not None and build.folder not in found and not build.done():
                found[build.folder] = build
    return list(found.values())


def _offline_mlms(spec: RunSpec, defense_runs: bool) -> tuple[str, ...]:
    """The MLMs the cell's defense (where it runs) and attack load by name."""
    defense = build_component(DEFENSES.get(spec.defense), spec.defense_args)
    names = defense.offline_mlms()
    if spec.attack is not None:
        attack = build_component(ATTACKS.get(spec.attack), spec.attack_args)
        return (names if defense_runs else ()) + attack.offline_mlms(names)
    return names if defense_runs else ()
