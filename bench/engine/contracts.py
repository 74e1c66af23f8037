"""The automatic contract every registered component meets, checked without data, models or a cell.

``check_component(kind, cls)`` lists what is wrong with one task, defense or attack class (empty =
it passes): it is a dataclass whose parameters have defaults and one-line comments; its module
docstring has a summary line (and, for defenses and attacks, ``Paper:`` and ``Threat model:``); its
declarations hold; what a defense describes for a record's notes is declared in the notes schema on every
release path that drives it (``bench.results.notes``); a defense built twice from its defaults describes the
same public mechanism and releases the same output from the same seed, of the type, rows and finite numbers
the engine checks (``bench.engine.sanity.guard``); bad numeric values are refused with ``BenchError``.
Findings that may be intended (no invalid value refused at all) go to ``warnings`` instead.
``check_file(path)`` loads a plugin file and checks each component it registers (``bench check-plugin``).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import typing
from pathlib import Path
from typing import Any

import numpy as np

from bench.core.components import OutputDefense, RepresentationDefense, TokenDefense
from bench.core.errors import BenchError
from bench.core.params import build_component, describe_parameters
from bench.core.registry import ATTACKS, DEFENSES, TASKS, load_plugin
from bench.core.smoke import smoke_budget
from bench.engine.paths import PATHS
from bench.engine.sanity import guard
from bench.results.notes import problems as note_problems

KINDS = ("defense", "attack", "task")
DOC_FIELDS = {"defense": ("Paper:", "Threat model:"), "attack": ("Paper:", "Threat model:"), "task": ()}
BAD_VALUES = (-1, 0, float("nan"), float("inf"))
FIXED_IDS = (np.array([5, 6, 7, 8, 9, 10]), np.array([11, 20, 30, 49, 5]))


@dataclasses.dataclass
class FakeSpace:
    """A tiny public token space: 50 seeded float32 vectors of size 8, regular tokens 5..49."""

    table: np.ndarray = dataclasses.field(
        default_factory=lambda: np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32))
    candidates: np.ndarray = dataclasses.field(default_factory=lambda: np.arange(5, 50))
    format: str = "wordpiece"


def check_component(kind: str, cls: type, warnings: list[str] | None = None) -> list[str]:
    """Problems of component class ``cls`` of ``kind`` (defense, attack or task); empty = it passes.

    Findings that may be intended are appended to ``warnings`` when a list is given.
    """
    if kind not in KINDS:
        raise BenchError(f"component kind must be one of {', '.join(KINDS)}, got '{kind}'.")
    warnings = [] if warnings is None else warnings
    problems: list[str] = []
    problems += _check_docstring(kind, cls)
    problems += _check_declarations(cls)
    fields_ok = _check_fields(cls, problems)
    if not fields_ok:
        return problems  # nothing can be built from defaults
    if kind == "defense":
        problems += _check_defense_determinism(cls)
        problems += _check_described_notes(cls)
    if kind != "task":
        problems += _check_loadable_defaults(cls)
    problems += _check_bad_values(cls, warnings)
    return problems


def _check_loadable_defaults(cls: type) -> list[str]:
    """``check()`` (the names a component's arguments hold, resolved before anything runs) passes on defaults."""
    try:
        cls().check()
    except Exception as exc:  # noqa: BLE001 - any failure is the finding
        return [f"check() fails on the default parameters ({type(exc).__name__}: {exc}); the defaults must name "
                "things that load"]
    return []


def _check_docstring(kind: str, cls: type) -> list[str]:
    module = sys.modules.get(cls.__module__)
    doc = (getattr(module, "__doc__", None) or "").strip()
    if not doc:
        return [f"module {cls.__module__} has no docstring (a one-line summary first)"]
    problems = []
    lines = doc.splitlines()
    if len(lines) > 1 and lines[1].strip():
        problems.append(f"module {cls.__module__} docstring must start with a one-line summary and a blank line")
    starts = [line.strip() for line in lines]
    for name in DOC_FIELDS[kind]:
        if not any(line.startswith(name) for line in starts):
            problems.append(f"module {cls.__module__} docstring lacks the field '{name}'")
    return problems


def _check_declarations(cls: type) -> list[str]:
    check = getattr(cls, "check_declarations", None)
    if check is None:
        return ["class has no check_declarations (is it a Task, Defense or Attack?)"]
    try:
        check()
    except BenchError as exc:
        return [str(exc)]
    return []


def _check_fields(cls: type, problems: list[str]) -> bool:
    """Dataclass, defaults and comments; False when instances cannot be built from defaults."""
    if "__dataclass_fields__" not in vars(cls):
        problems.append(f"{cls.__name__} is not a dataclass (decorate it with @dataclass)")
        return False
    comments = {name: comment for name, _, _, comment in describe_parameters(cls)}
    ok = True
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(f"parameter '{f.name}' has no default")
            ok = False
        if not comments.get(f.name):
            problems.append(f"parameter '{f.name}' has no one-line comment after its declaration")
    if ok:
        try:
            cls()
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            problems.append(f"building from defaults fails ({type(exc).__name__}: {exc})")
            ok = False
    return ok


def _check_defense_determinism(cls: type) -> list[str]:
    problems = []
    first, second = guard(cls()), guard(cls())  # what each method returns is checked as the engine checks it
    if issubclass(cls, OutputDefense):
        try:
            if first.output_mechanism().describe() != second.output_mechanism().describe():
                problems.append("output_mechanism().describe() differs between two builds from defaults")
            logits = np.linspace(-3, 3, 24).reshape(6, 4)
            answers = [d.answer(logits.copy(), np.random.default_rng(0)) for d in (first, second)]
            if not _same(answers[0], answers[1]):
                problems.append("the API's answers differ between two runs from the same seed")
            elif not np.allclose(np.asarray(answers[0]).sum(axis=1), 1.0) or np.asarray(answers[0]).min() < 0:
                problems.append("answer() must return probability vectors (non-negative rows summing to 1)")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"answer() fails on a fixed batch of logits ({type(exc).__name__}: {exc})")
    if issubclass(cls, TokenDefense):
        try:
            m1, m2 = first.token_mechanism(), second.token_mechanism()
            if m1.describe() != m2.describe():
                problems.append("token_mechanism().describe() differs between two builds from defaults")
            outputs = []
            for mechanism in (m1, m2):
                space, ids = FakeSpace(), [x.copy() for x in FIXED_IDS]
                with smoke_budget():  # a model the mechanism runs (DP-MLM's MLM) at the smoke budget, in seconds
                    mechanism.fit(ids, space)
                    outputs.append(mechanism.privatize(ids, space, np.random.default_rng(0)))
            if not _same(outputs[0], outputs[1]):
                problems.append("the token release differs between two runs from the same seed")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"token mechanism fails on a fixed input ({type(exc).__name__}: {exc})")
    if issubclass(cls, RepresentationDefense):
        try:
            if first.representation_mechanism().describe() != second.representation_mechanism().describe():
                problems.append("representation_mechanism().describe() differs between two builds from defaults")
            outputs = [_hide_once(guard(cls())) for _ in range(2)]
            if not _same(outputs[0], outputs[1]):
                problems.append("hide_batch differs between two runs from the same seed")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"hide_batch fails on a fixed batch ({type(exc).__name__}: {exc})")
    return problems


def _check_described_notes(cls: type) -> list[str]:
    """What a defense built from defaults describes (its record notes) is declared on every path that drives it."""
    try:
        with smoke_budget():  # a model describe() reads (NDD's MLM) is built at the smoke budget, in seconds
            described = guard(cls()).describe(8)
    except Exception:  # noqa: BLE001 - describe may need what a cell sets up; the engine checks the notes then
        return []
    found = [f"describe() on the {path.name} path: {problem} (declare it with bench.results.notes.declare)"
             for path in PATHS.values() if path.drives(cls) for problem in note_problems(described, path.name)]
    return list(dict.fromkeys(found))


def _hide_once(defense) -> Any:
    import torch

    defense.setup(8, torch.Generator().manual_seed(0))
    reps = torch.linspace(-1, 1, 48, dtype=torch.float32).reshape(6, 8)
    targets = torch.nn.functional.one_hot(torch.tensor([0, 1, 0, 1, 1, 0]), 2).float()
    hidden = defense.hide_batch(reps, targets, torch.Generator().manual_seed(0))
    return hidden, defense.hide_inference(reps, torch.Generator().manual_seed(1))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    if hasattr(b, "detach"):
        b = b.detach().cpu().numpy()
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=np.asarray(a).dtype.kind == "f")


def _numeric(annotation: Any) -> type | None:
    """int or float when the parameter takes numbers (``int | str`` counts as int), else None."""
    options = typing.get_args(annotation) if typing.get_origin(annotation) is not None else (annotation,)
    for option in options:
        if option in (int, float):
            return option
    return None


def _check_bad_values(cls: type, warnings: list[str]) -> list[str]:
    """Each numeric parameter with each clearly invalid value: accepted or a BenchError, nothing else."""
    hints = typing.get_type_hints(cls)
    problems, tried, refused = [], 0, 0
    for name, _, _, comment in describe_parameters(cls):
        kind = _numeric(hints[name])
        if kind is None or hints[name] is bool:
            continue
        values = [v for v in BAD_VALUES if kind is float or not isinstance(v, float)]
        field_refused = 0
        for value in values:
            tried += 1
            try:
                build_component(cls, {name: value})
            except BenchError as exc:
                # NaN and inf are refused by build_component for every float field; only the component's own
                # checks of finite values count as validation
                field_refused += not (isinstance(value, float) and not math.isfinite(value))
                if "\n" in str(exc).strip():
                    problems.append(f"{name}={value!r} is refused with a message of several lines")
            except Exception as exc:  # noqa: BLE001
                problems.append(f"{name}={value!r} raises {type(exc).__name__} instead of BenchError ({exc})")
        refused += field_refused
        if not field_refused and "any" not in comment.lower():
            finite = [v for v in values if not (isinstance(v, float) and not math.isfinite(v))]
            warnings.append(f"parameter '{name}' accepts every value tried ({', '.join(map(repr, finite))})")
    if tried and not refused:
        warnings.append("no invalid numeric value is refused; does __post_init__ validate with require()?")
    return problems


def registered() -> dict[str, dict[str, type]]:
    """kind -> {name: class} of every registered component (discovers the shipped ones first)."""
    return {r.kind: {n: r.get(n) for n in r.names()} for r in (DEFENSES, ATTACKS, TASKS)}


def check_file(path: str | Path, warnings: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """Load plugin file ``path`` and check each component it registers: ``"kind name" -> problems``."""
    path = Path(path)
    before = registered()
    module = load_plugin(path)
    results: dict[str, list[str]] = {}
    for kind, items in registered().items():
        for name, cls in items.items():
            if name not in before[kind] or cls.__module__ == module:
                found: list[str] = []
                results[f"{kind} {name}"] = check_component(kind, cls, found)
                if warnings is not None:
                    warnings[f"{kind} {name}"] = found
    return results
