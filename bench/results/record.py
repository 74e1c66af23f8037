"""ResultRecord: one measured cell, as stored in ``results/records/<defense>.jsonl``."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bench.core.errors import BenchError
from bench.core.registry import ATTACKS, DEFENSES, NAME, TASKS
from bench.core.smoke import NOTE as SMOKE_NOTE
from bench.core.spec import RunSpec
from bench.core.versions import code_version_numbers, version_numbers
from bench.results.migrations import SCHEMA_VERSION, migrate

VERSION = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*@[0-9]+$")  # a component's version as records keep it


def _spec_field_types() -> dict[str, tuple[type, ...]]:
    """RunSpec's fields and the types a record stores each as, read from its annotations (``str | None``: both; a
    typed setting, a dataclass or none of them, is stored as a dictionary)."""
    import dataclasses
    import types
    import typing

    kinds = {}
    for name, hint in typing.get_type_hints(RunSpec).items():
        union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        options = typing.get_args(hint) if union else (hint,)
        if any(dataclasses.is_dataclass(option) for option in options):
            options = (dict,)
        kinds[name] = tuple(typing.get_origin(option) or option for option in options)
    return kinds


SPEC_FIELD_TYPES = _spec_field_types()


def _is_of(value: Any, kinds: tuple) -> bool:
    """Whether ``value`` is one of ``kinds`` (a bool is not an int here)."""
    return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)


class ResultRecord(BaseModel):
    """Everything needed to trust, compare and re-run one cell."""

    # newer fields survive a round trip; a NaN metric (e.g. Pearson of constant predictions) stays NaN; strict: a
    # boolean is no number (a metric of true), a number no boolean, a string no number
    model_config = ConfigDict(extra="allow", ser_json_inf_nan="constants", strict=True)

    schema_version: int = SCHEMA_VERSION
    run_id: str
    config_hash: str
    seed: int
    spec: dict[str, Any]
    versions: dict[str, str]
    data_hash: str
    data_source: str
    sizes: dict[str, int]
    metrics: dict[str, float]
    higher_is_better: dict[str, bool]
    notes: dict[str, Any] = Field(default_factory=dict)
    runtime_s: float
    hardware: dict[str, Any]
    created_at: str

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        return migrate(data) if isinstance(data, dict) else data

    @field_validator("schema_version")
    @classmethod
    def _known_schema(cls, value: int) -> int:
        if not 1 <= value <= SCHEMA_VERSION:
            raise ValueError(f"schema_version {value} is not supported (newest: {SCHEMA_VERSION})")
        return value

    @field_validator("metrics")
    @classmethod
    def _metric_keys(cls, value: dict[str, float]) -> dict[str, float]:
        for key in value:
            if key.split("/", 1)[0] not in ("utility", "privacy", "random"):
                raise ValueError(f"metric key '{key}' must start with utility/, privacy/ or random/")
        return value

    @field_validator("spec")
    @classmethod
    def _spec_names_components(cls, value: dict[str, Any]) -> dict[str, Any]:
        missing = [k for k in ("task", "defense", "encoder") if not isinstance(value.get(k), str)]
        if missing:
            raise ValueError(f"spec lacks {', '.join(missing)}")
        wrong = [k for k, kinds in SPEC_FIELD_TYPES.items() if k in value and not _is_of(value[k], kinds)]
        if wrong:  # readers take these fields as they are typed (a mapping's items, an integer's value)
            raise ValueError(f"spec field {', '.join(wrong)} has the wrong type")
        return value

    @field_validator("versions")
    @classmethod
    def _component_versions(cls, value: dict[str, str]) -> dict[str, str]:
        for key in ("task", "defense", "attack"):
            if key in value and not (VERSION.match(value[key]) or (key == "attack" and value[key] == "")):
                raise ValueError(f"versions.{key} must be name@number, got {value[key]!r}")
        return value

    @model_validator(mode="after")
    def _spec_rebuilds(self) -> "ResultRecord":
        """The spec names components by registry names, rebuilds as a RunSpec, and holds the record's seed."""
        for key in ("task", "defense", "attack"):
            name = self.spec.get(key)
            if not (isinstance(name, str) and NAME.match(name)) and not (key == "attack" and name is None):
                raise ValueError(f"spec.{key} {name!r} is not a component name")
        try:
            RunSpec.from_dict(self.spec)
        except (TypeError, BenchError) as exc:  # a field without a default is missing (a schema-1 record without
            raise ValueError(f"spec cannot be rebuilt ({exc})") from None  # attack), or a setting is out of range
        if self.spec.get("seed", self.seed) != self.seed:
            raise ValueError(f"seed {self.seed} is not its spec's ({self.spec.get('seed')})")
        return self

    def component_versions(self) -> str:
        """``task@v defense@v attack@v`` as recorded (a changed component invalidates old cells)."""
        return " ".join(self.versions.get(k, "") for k in ("task", "defense", "attack"))

    def version_numbers(self) -> tuple[int, ...]:
        """The task's, defense's and attack's version numbers, for ordering (0 where none is recorded)."""
        return version_numbers(self.versions.get(key, "") for key in ("task", "defense", "attack"))

    @property
    def run_spec(self) -> RunSpec:
        """The stored spec, typed (its training and server settings too); ``spec`` keeps the stored dictionary."""
        return RunSpec.from_dict(self.spec)

    @property
    def defense(self) -> str:
        """The defense's registry name."""
        return self.spec["defense"]

    @property
    def at_smoke_budget(self) -> bool:
        """Whether the cell ran under ``--check`` (``bench.core.smoke``): its numbers test plumbing, never the board."""
        return bool(self.spec.get("smoke")) or SMOKE_NOTE in self.notes


def current(records: list[ResultRecord]) -> list[ResultRecord]:
    """The records of each configuration's newest component versions, in their order, as far as the code still
    stands behind them (``superseded``): a record whose task or defense runs at a newer version now is left out, and
    one whose attack alone does keeps its utility but loses its attack's metrics.

    A changed task, defense or attack invalidates the cells recorded before it (a grid re-runs them), so an older
    version's seeds must never join the newer version's mean, nor its metrics outlive it.
    """
    kept = []
    for record in records:
        stale = superseded(record)
        if stale & {"task", "defense"}:
            continue
        if stale:
            record = record.model_copy(update={"metrics": {k: v for k, v in record.metrics.items()
                                                           if k.startswith("utility/") or still_valid(record, k)}})
        kept.append(record)
    newest: dict[str, tuple[int, ...]] = {}
    for record in kept:
        numbers = record.version_numbers()
        if numbers > newest.get(record.config_hash, ()):
            newest[record.config_hash] = numbers
    return [r for r in kept if r.version_numbers() == newest[r.config_hash]]


def superseded(record: ResultRecord) -> set[str]:
    """The components (``task``, ``defense``, ``attack``) that a registered component now runs at a newer version
    than the record's: the cell awaits a re-run, and no figure of those parts is shown. A component that is not
    registered, or whose version the record does not name, supersedes nothing."""
    registered = tuple(len(r._items) for r in (TASKS, DEFENSES, ATTACKS))  # a later registration is a new answer
    code = code_version_numbers(json.dumps(record.spec, sort_keys=True, default=str), registered)
    if code is None:
        return set()
    return {part for part, old, new in zip(("task", "defense", "attack"), record.version_numbers(), code)
            if 0 < old < new}  # a record that names no version of a part (0) is not judged on it


def still_valid(record: ResultRecord, metric: str) -> bool:
    """Whether the attack's current version declares ``metric`` (``privacy/<attack>/<name>`` or ``random/...``)
    unchanged since the record's version (``Attack.stable``)."""
    prefix, _, rest = metric.partition("/")
    attack, _, name = rest.partition("/")
    try:
        since = ATTACKS.get(attack).stable.get(f"{prefix}/{name}")
    except BenchError:
        return False
    return since is not None and record.version_numbers()[2] >= since
