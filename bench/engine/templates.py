"""One-file templates of a new defense, attack or task (``bench new``), one per family; each passes the contract.

A defense's family is the base class it extends (``bench.core.components``); an attack's template follows the
release kind it reads (``bench.core.releases.ReleaseKind``); a task's follows the server family it trains. A new
defense comes with a reference test: its mechanism against the paper's equation, computed the slow, obvious way.
The template text lives in ``bench.engine.template_text``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bench.core.errors import BenchError
from bench.core.registry import ATTACKS, DEFENSES, NAME, TASKS
from bench.engine import template_text as text

FOLDERS = {"defense": "defenses", "attack": "attacks", "task": "tasks"}
KINDS = tuple(FOLDERS)

# family or release kind -> (component template, reference test template or None); the first is the default
DEFENSE_FAMILIES = {
    "representation": (text.REPRESENTATION_DEFENSE, text.REPRESENTATION_REFERENCE),
    "token": (text.TOKEN_DEFENSE, text.TOKEN_REFERENCE),
    "span": (text.SPAN_DEFENSE, text.SPAN_REFERENCE),
    "output": (text.OUTPUT_DEFENSE, text.OUTPUT_REFERENCE),
}
ATTACK_RELEASES = {
    "sentence_embeddings": (text.SENTENCE_ATTACK, None),
    "text": (text.TEXT_ATTACK, None),
    "token_embeddings": (text.TOKEN_VECTOR_ATTACK, None),
    "rewritten_text": (text.SPAN_ATTACK, None),
    "predictions": (text.PREDICTION_ATTACK, None),
    "gradients": (text.GRADIENT_ATTACK, None),
}
TASK_FAMILIES = {
    "classification": (text.CLASSIFICATION_TASK, None),
    "tagging": (text.TAGGING_TASK, None),
    "attribute": (text.ATTRIBUTE_TASK, None),
}
TEMPLATES = {"defense": DEFENSE_FAMILIES, "attack": ATTACK_RELEASES, "task": TASK_FAMILIES}
CHOICE = {"defense": "--family", "attack": "--release", "task": "--family"}

# what exists but has no template yet: the sentence that says so names where to start instead
NOT_YET = {
    "defense": {
        "training": "the training family (a defense that changes how the server trains, such as DP-SGD) does "
                    "not exist yet",
    },
    "attack": {
        "model": "no template reads a model release yet: start from attacks/name_generation.py",
    },
    "task": {
        "parsing": "no template for a parsing task yet: start from tasks/ptb.py",
        "reading": "no template for a reading-comprehension task yet: start from tasks/squad.py",
        "pretraining": "no template for a pretraining task yet: start from tasks/clinical.py",
    },
}


@dataclass(frozen=True)
class Written:
    """What ``write_template`` wrote: the component and, for a defense, its reference test."""

    component: Path
    reference: Path | None
    choice: str  # the family or release kind used


def choices(kind: str) -> list[str]:
    """The families (or release kinds) ``kind`` has a template for, the default first."""
    return list(TEMPLATES[kind])


def _choose(kind: str, choice: str | None) -> str:
    """The template key for ``choice`` (the default when None), or one sentence saying why not."""
    if kind not in TEMPLATES:
        raise BenchError(f"bench new makes a defense, an attack or a task, not '{kind}'.")
    options = TEMPLATES[kind]
    if choice is None:
        return next(iter(options))
    key = choice.strip().lower().replace("-", "_")
    if key in options:
        return key
    flag, known = CHOICE[kind], ", ".join(options)
    if key in NOT_YET[kind]:
        raise BenchError(f"{NOT_YET[kind][key]}; {flag} takes {known}.")
    raise BenchError(f"a new {kind} has no {flag} '{choice}'; {flag} takes {known}.")


def _reference_path(kind: str, stem: str, folder: Path, default_folder: bool) -> Path:
    """Where a defense's reference test goes: tests/unit/ of a checkout, else beside the component (a file in
    defenses/ itself would be imported as a component by discovery)."""
    if default_folder and Path("tests", "unit").is_dir():
        return Path("tests", "unit") / f"test_{stem}_reference.py"
    return folder / f"test_{stem}_reference.py"


def write_template(kind: str, name: str, folder: Path | None = None, choice: str | None = None) -> Written:
    """Write the template of a new ``kind`` component named ``name`` of family (or release kind) ``choice``.

    Nothing is written when any check fails."""
    key = _choose(kind, choice)
    if not NAME.match(name):
        raise BenchError(f"{kind} name '{name}' must be lower-case letters and digits joined by '-' or '_' "
                         "(as in santext-plus).")
    registry = {"defense": DEFENSES, "attack": ATTACKS, "task": TASKS}[kind]
    if name in registry.names():
        raise BenchError(f"a {kind} named '{name}' is registered already; choose another name.")
    stem = name.replace("-", "_")
    default_folder = folder is None
    folder = Path(FOLDERS[kind]) if folder is None else Path(folder)
    path = folder / f"{stem}.py"
    component, reference = TEMPLATES[kind][key]
    test_path = _reference_path(kind, stem, folder, default_folder) if reference else None
    for target in (path, test_path):
        if target is not None and target.exists():
            raise BenchError(f"{target} already exists; choose another name or remove that file.")
    words = stem.split("_")
    fill = {"__NAME__": name, "__CLS__": "".join(w.capitalize() for w in words),
            "__TITLE__": " ".join(words).capitalize(), "__STEM__": stem}
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(_fill(component, fill), encoding="utf-8")
    if test_path is not None:
        relative = Path(os.path.relpath(path.resolve(), test_path.parent.resolve())).as_posix()
        test_path.parent.mkdir(parents=True, exist_ok=True)
        test_path.write_text(_fill(reference, {**fill, "__COMPONENT__": relative}), encoding="utf-8")
    return Written(path, test_path, key)


def _fill(template: str, values: dict[str, str]) -> str:
    for placeholder, value in values.items():
        template = template.replace(placeholder, value)
    return template
