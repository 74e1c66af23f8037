"""`bench reproduce`: a paper's table beside our records, with a verdict on each of the table's claims.

Every reference table ``<results>/reference/<table>.json`` has a mapping ``<results>/reproduction/<table>.yaml``.
The mapping says which records stand for each paper cell: ``select`` names RunSpec fields that must equal the
record's, ``metric`` the record's metric key. It also lists the paper's claims to check on our records. A table the
harness cannot express yet has a mapping with only ``not_mapped: <reason>``. The report is written atomically to
``<results>/reproduction/<table>.json`` for the dashboard.

Mapping format (YAML)::

    title: "TextHide Table 3: RSS similarity scores"
    paper_setting: {encoder: ..., n_train: ..., budget: ..., seeds: ...}   # printed beside ours
    defaults: {encoder: minilm, training.mode: frozen, server: {}}         # every row's records must match
    schemes: {baseline: {select: {defense: none, defense_args: {}}}, ...}  # named selections (and metric)
    rows:
      - for: {task: [cola, sst2], scheme: [baseline, texthide]}           # one row per combination
        id: "{task} {scheme}"
        paper: "{task}.{scheme}.identity"          # dotted path into the reference's values (divided by scale)
        scheme: "{scheme}"
        select: {task: "{task}", attack: rss}
        metric: privacy/rss/identity
        ours_scale: 1                              # optional: our metric is divided by it (one recorded x 100)
        chance: privacy/rss/identity_chance        # optional: the metric of the same records that is the chance level
        match: {by: privacy/inversion/token_accuracy, over: eta, paper_at: "table3.sst2.{eta}",
                run: [10.0, 60.0, 120.0, 1000.0]}          # optional
    claims:
      - id: "T3: TextHide at the random guess"
        text: "..."
        checks: [{left: "cola texthide", op: within, right: "cola rand", margin: 0.03}]
    run: {seeds: [0, 1, 2]}                        # what --run runs for a row without records

A ``match`` row compares at matched privacy. Ours is our metric at the privacy level the paper reports for that
cell, over the sweep of defense argument ``over``. It is interpolated linearly between the two recorded settings
that bracket that level. Its std is the spread over seeds of each seed's interpolated value; one seed has no std.
``select`` inside ``match`` overrides the selection of the privacy curve. ``paper_at: "<table>:<path>"`` reads the
privacy level from another reference file. ``run`` lists the values of ``over`` that ``--run`` runs for the row;
without it ``--run`` skips the row.

Claim operands are row ids (our mean), lists of row ids (the mean of their means) or numbers. The ops are:

- ``gt``: left > right + margin (beats it by more than margin);
- ``lt``: left < right - margin;
- ``ge``: left >= right - margin (not below it by more than margin);
- ``le``: left <= right + margin;
- ``within``: |left - right| <= margin;
- ``increasing`` / ``decreasing``: ``rows``, each above / below the previous by more than margin.

The rows of one comparison may have been recorded on different seeds. Then ours are compared on the seeds they
share, and the check says so. This is a paired comparison: the same data sample and initialisation on both sides.
With no seed in common, the rows' own means are compared. The same checks also run on the paper's own numbers, so a
claim's wording can be checked against the table it comes from.

An ordering is only informative where the row expected to score higher beats its chance level. A head that answers
the majority class, or an attack no better than a random guess, orders rows by noise. A utility metric's chance
level is the majority answer's score: the records' ``majority_utility`` note, the same metric on the same data. An
attack metric's chance level, where higher means more leakage, is the random guess scored in the same cells (the
records' ``random/<attack>/<name>``). The expected-higher row is the left one for ``gt`` / ``ge``, the right one
for ``lt`` / ``le``, and the last / first for ``increasing`` / ``decreasing``. Where it has a chance level and
does not beat it by more than ``CHANCE_MARGIN``, the check is *not applicable* on our side. A claim whose every
check is not applicable is not applicable; one with some applicable checks is judged on those. The rule applies
to every table alike, and never to the paper's side.

An ordering is also only a finding where the seeds resolve it. The rows of a comparison (each one row of ours) may
share at least two seeds. Then the per-seed paired differences give a mean and its 95% confidence interval
(Student's t). They are oriented so that the claim reads "difference > threshold"; the threshold is the check's
margin, negated for ``ge`` / ``le``. An interval that straddles the threshold makes the check *unresolved*, rather
than holding or failing on the mean's sign. ``increasing`` / ``decreasing`` are judged step by step, and a step
resolved the wrong way still fails. A claim fails if any check fails, else it is unresolved if any applicable check
is. One seed has no spread and is judged on its numbers. The paper's side is never unresolved.

This module reads records and files only (no torch): the dashboard and tests use it offline.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean, stdev
from typing import Any, Iterable

from bench.core.errors import BenchError
from bench.core.files import atomic_writer
from bench.results.curves import bracketing
from bench.results.leaderboard import ci95_half_width
from bench.results.record import ResultRecord, current
from bench.results.store import published_results_dir
from bench.results.views import GENERATED

SCHEMA_VERSION = 1
HOLDS, FAILS, NO_RECORDS, NOT_APPLICABLE = "holds", "fails", "no records", "not applicable"
UNRESOLVED = "unresolved"
VERDICTS = (HOLDS, FAILS, UNRESOLVED, NOT_APPLICABLE, NO_RECORDS)
CHANCE_MARGIN = 0.02  # how far the expected-higher row must beat its chance level for an ordering to count
OPS = {"gt", "lt", "ge", "le", "within", "increasing", "decreasing"}
ROW_KEYS = {"for", "id", "paper", "scheme", "select", "metric", "match", "note", "paper_std", "ours_scale", "chance"}
SPEC_FIELDS = {"task", "defense", "attack", "encoder", "defense_args", "attack_args", "training", "server",
               "n_train", "n_eval", "pooling", "max_length", "device"}


@dataclass
class Cell:
    """Our side of one row: mean, std and n over seeds, with the setting of the records."""

    mean: float | None = None
    std: float | None = None
    n: int = 0
    seeds: list[int] = field(default_factory=list)
    setting: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    by_seed: dict[int, float] = field(default_factory=dict)  # the finite value of each seed (paired claims)
    chance: float | None = None  # the chance level (majority answer, or an attack's random guess), mean over seeds

    def as_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "n": self.n, "seeds": self.seeds, "setting": self.setting,
                "note": self.note, "chance": self.chance}


# ----------------------------------------------------------------------------------------------------------------
# files


def reference_dir(root: Path) -> Path:
    return Path(root) / "reference"


def reproduction_dir(root: Path) -> Path:
    return Path(root) / "reproduction"


def definitions(root: Path) -> Path:
    """Where the reference tables and their mappings are read.

    That is ``root`` when it has ``reference/``, else this checkout's published results folder, beside the
    ``bench`` package wherever the command runs. So records kept elsewhere (``BENCH_RESULTS_DIR``) are still held
    against them.
    """
    return Path(root) if reference_dir(root).is_dir() else published_results_dir()


def tables(root: Path) -> list[str]:
    """The reference tables (file stems of ``reference/*.json`` in ``definitions(root)``), sorted."""
    folder = reference_dir(definitions(root))
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def load_reference(root: Path, table: str) -> dict[str, Any]:
    """The paper's values of ``table``; a BenchError (one sentence) for an unknown or unreadable table."""
    path = reference_dir(definitions(root)) / f"{table}.json"
    if not path.is_file():
        known = ", ".join(tables(root)) or "none"
        raise BenchError(f"no reference table '{table}' in {reference_dir(definitions(root))} (known: {known}).")
    try:
        reference = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BenchError(f"reference table {path} is not valid JSON ({exc}).") from None
    if not isinstance(reference, dict):
        raise BenchError(f"reference table {path} must hold a JSON object, not {type(reference).__name__}.")
    return reference


def load_mapping(root: Path, table: str) -> dict[str, Any]:
    """The mapping of ``table``; a BenchError (one sentence) for an unknown table or a table without one."""
    import yaml

    load_reference(root, table)  # an unknown table is named with the known ones
    path = reproduction_dir(definitions(root)) / f"{table}.yaml"
    if not path.is_file():
        raise BenchError(f"reference table '{table}' has no mapping {path}; write one (see bench/reproduction/"
                         "reproduce.py) or one with 'not_mapped: <reason>'.")
    try:
        mapping = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise BenchError(f"mapping {path} is not valid YAML ({exc.__class__.__name__}).") from None
    if not isinstance(mapping, dict):
        raise BenchError(f"mapping {path} must be a YAML mapping.")
    return mapping


def report_path(root: Path, table: str) -> Path:
    """``<root>/reproduction/<table>.json``.

    A table name that is not a plain file stem (a ``/``, ``..``, a leading dot) is refused. So no report is written
    outside ``reproduction/``.
    """
    if not table or Path(table).name != table or table.startswith(".") or "\\" in table:
        raise BenchError(f"table {table!r} is not a reference table name (a file stem under reference/, without "
                         "folders); run bench reproduce without a table to list them.")
    return reproduction_dir(root) / f"{table}.json"


def write_report(root: Path, report: dict[str, Any]) -> Path:
    """Write ``<root>/reproduction/<table>.json`` atomically (a reader sees the old or the new file)."""
    path = report_path(root, report["table"])
    with atomic_writer(path) as stream:
        json.dump(report, stream, indent=1, allow_nan=False, default=_no_nan)
        stream.write("\n")
    return path


def _no_nan(value: Any) -> Any:
    raise TypeError(f"cannot write {value!r}")


# ----------------------------------------------------------------------------------------------------------------
# rows


def _substitute(value: Any, names: dict[str, Any]) -> Any:
    """``"{task}"`` -> the raw value (keeps numbers numbers); other strings are formatted; recurse into containers."""
    if isinstance(value, str):
        whole = re.fullmatch(r"\{(\w+)\}", value)
        if whole and whole.group(1) in names:
            return names[whole.group(1)]
        return value.format(**names) if "{" in value else value
    if isinstance(value, dict):
        return {k: _substitute(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, names) for v in value]
    return value


def expand_rows(mapping: dict[str, Any], table: str = "") -> list[dict[str, Any]]:
    """Every row of a mapping, templates expanded, schemes and defaults merged into ``select``."""
    defaults = dict(mapping.get("defaults") or {})
    schemes = mapping.get("schemes") or {}
    rows: list[dict[str, Any]] = []
    for template in mapping.get("rows") or []:
        unknown = set(template) - ROW_KEYS
        if unknown:
            raise BenchError(f"mapping of '{table}': a row has unknown keys {', '.join(sorted(unknown))}.")
        loops = template.get("for") or {}
        names = list(loops)
        for combination in itertools.product(*(loops[n] for n in names)) if names else [()]:
            values = dict(zip(names, combination))
            row = _substitute({k: v for k, v in template.items() if k != "for"}, values)
            select = dict(defaults)
            if row.get("scheme") is not None:
                if row["scheme"] not in schemes:
                    raise BenchError(f"mapping of '{table}': row uses unknown scheme '{row['scheme']}'.")
                scheme = _substitute(schemes[row["scheme"]], values)
                select.update(scheme.get("select") or {})
                row.update({k: v for k, v in scheme.items() if k != "select"})
            select.update(row.get("select") or {})
            row["select"] = select
            if "id" not in row or "metric" not in row:
                raise BenchError(f"mapping of '{table}': every row needs an id and a metric.")
            rows.append(row)
    ids = [r["id"] for r in rows]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise BenchError(f"mapping of '{table}': duplicate row ids {', '.join(duplicates)}.")
    return rows


def paper_value(reference: dict[str, Any], path: str | None) -> tuple[float | None, float | None]:
    """(value, std) at a dotted path of the reference's values, as fractions (divided by ``scale``)."""
    if not path:
        return None, None
    node: Any = reference.get("values", {})
    for part in str(path).split("."):
        if not isinstance(node, dict) or part not in node:
            raise BenchError(f"reference '{reference.get('source', {}).get('table', '?')}' has no value at '{path}'.")
        node = node[part]
    scale = float(reference.get("scale", 1))
    if node is None:
        return None, None
    if isinstance(node, dict):
        std = node.get("std")
        return round(float(node["mean"]) / scale, 10), (None if std is None else round(float(std) / scale, 10))
    return round(float(node) / scale, 10), None


# ----------------------------------------------------------------------------------------------------------------
# records


def _field(spec: dict[str, Any], key: str) -> Any:
    node: Any = spec
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


def matches(record: ResultRecord, select: dict[str, Any], ignore_arg: str | None = None) -> bool:
    """Every selected field (dotted paths reach into dicts) equals the record's; ``ignore_arg`` is a defense
    argument left out of the comparison (the sweep of a matched-privacy row)."""
    for key, wanted in select.items():
        have = _field(record.spec, key)
        if key == "defense_args" and ignore_arg is not None and isinstance(have, dict):
            have = {k: v for k, v in have.items() if k != ignore_arg}
            wanted = {k: v for k, v in (wanted or {}).items() if k != ignore_arg}
        if have is _MISSING or have != wanted:
            if not (have is _MISSING and key == "server" and wanted == {}):
                return False
    return True


def _latest_per_seed(records: Iterable[ResultRecord]) -> dict[str, dict[int, ResultRecord]]:
    """config_hash -> seed -> the newest record of that cell (of the configuration's newest component versions)."""
    groups: dict[str, dict[int, ResultRecord]] = {}
    for record in current(list(records)):
        seeds = groups.setdefault(record.config_hash, {})
        if record.seed not in seeds or record.created_at > seeds[record.seed].created_at:
            seeds[record.seed] = record
    return groups


def _setting(record: ResultRecord) -> dict[str, Any]:
    training = record.spec.get("training") or {}
    return {"encoder": record.spec["encoder"], "n_train": record.sizes.get("n_train", record.spec.get("n_train")),
            "n_eval": record.sizes.get("n_eval"), "mode": training.get("mode"), "epochs": training.get("epochs"),
            "config_hash": record.config_hash}


def summarize_cell(records: list[ResultRecord], metric: str, chance_metric: str | None = None) -> Cell:
    """Mean ± std (ddof 1, as the leaderboard) over the seeds of the best-covered matching configuration;
    ``chance_metric``: the metric of the same records that holds the row's chance level (see ``_chance``)."""
    # only the seeds that report the metric: a configuration is as well covered as its seeds with a value
    groups = {h: {seed: r for seed, r in s.items() if metric in r.metrics}
              for h, s in _latest_per_seed(records).items()}
    groups = {h: s for h, s in groups.items() if s}
    if not groups:
        return Cell(note="no records" if not records else f"records lack {metric}")
    chosen = max(groups, key=lambda h: (len(groups[h]), h))
    seeds = groups[chosen]
    values = [(s, seeds[s].metrics[metric]) for s in sorted(seeds)]
    finite = [v for _, v in values if v is not None and math.isfinite(v)]
    note = f"{len(groups) - 1} other matching configuration(s) ignored" if len(groups) > 1 else ""
    if not finite:
        return Cell(n=0, seeds=[s for s, _ in values], setting=_setting(next(iter(seeds.values()))),
                    note="metric is NaN in every seed")
    if len(finite) < len(values):  # as the leaderboard: a failed seed is never averaged away, so no verdict is drawn
        failed = [str(s) for s, v in values if v is None or not math.isfinite(v)]
        return Cell(n=len(values), seeds=[s for s, _ in values], setting=_setting(next(iter(seeds.values()))),
                    note=f"metric is NaN in seed(s) {', '.join(failed)} of {len(values)}")
    return Cell(mean=mean(finite), std=stdev(finite) if len(finite) > 1 else None, n=len(finite),
                seeds=[s for s, _ in values], setting=_setting(next(iter(seeds.values()))), note=note,
                by_seed={s: v for s, v in values if v is not None and math.isfinite(v)},
                chance=_chance(list(seeds.values()), metric, chance_metric))


def _chance(records: list[ResultRecord], metric: str, chance_metric: str | None = None) -> float | None:
    """Mean over the records of the chance level of ``metric``; None unless every record has it.

    The chance level is ``chance_metric`` of the same records when the mapping's row names one. That is an attack
    that measures its own chance level, as name-generation's ``em_chance``. Else, for a utility metric, it is the
    majority answer's score (the ``majority_utility`` note); the convex probe's ``probe_<metric>`` takes that of
    ``<metric>``. For an attack's metric where higher means more leakage, it is the random guess scored in the same
    cells (``random/<attack>/<name>``). Other metrics have none.
    """
    if chance_metric:
        values = [r.metrics.get(chance_metric) for r in records]
    elif metric.startswith("privacy/"):
        guess = "random/" + metric.removeprefix("privacy/")
        if not records or any(r.higher_is_better.get(metric) is not True for r in records):
            return None
        values = [r.metrics.get(guess) for r in records]
    elif metric.startswith("utility/"):
        # the convex probe's metric (probe_accuracy, ...) is the task's metric of another predictor: same majority
        name = metric.rsplit("/", 1)[-1].removeprefix("probe_")
        values = [(r.notes.get("majority_utility") or {}).get(name) for r in records]
    else:
        return None
    if not values or any(not isinstance(v, (int, float)) or not math.isfinite(v) for v in values):
        return None
    return mean(values)


def _curve(records: list[ResultRecord], select: dict[str, Any], over: str, metric: str) -> dict[float, Cell]:
    """sweep value -> our cell, over the records matching ``select`` but for defense argument ``over``."""
    by_value: dict[float, list[ResultRecord]] = {}
    for record in records:
        value = (record.spec.get("defense_args") or {}).get(over)
        if isinstance(value, (int, float)) and matches(record, select, ignore_arg=over):
            by_value.setdefault(float(value), []).append(record)
    cells = {v: summarize_cell(rs, metric) for v, rs in by_value.items()}
    return {v: c for v, c in cells.items() if c.mean is not None}


def matched_cell(records: list[ResultRecord], row: dict[str, Any], target: float | None) -> Cell:
    """Our metric interpolated at the paper's privacy level ``target`` along our sweep of ``match.over``."""
    match = row["match"]
    over, by = match["over"], match["by"]
    if target is None:
        return Cell(note="the paper gives no privacy level for this cell")
    utility = _curve(records, row["select"], over, row["metric"])
    privacy = _curve(records, {**row["select"], **(match.get("select") or {})}, over, by)
    points = sorted((privacy[v].mean, v) for v in utility if v in privacy)
    if not points:
        return Cell(note=f"no records of the {over} sweep")
    bracket = bracketing(points, target)
    if bracket is None:
        low, high = points[0][0], points[-1][0]
        return Cell(note=f"{by.rsplit('/', 1)[-1]} {target:.3f} outside our range [{low:.3f}, {high:.3f}] "
                         f"({over} {', '.join(f'{v:g}' for _, v in sorted(points, key=lambda p: p[1]))})")
    (p0, v0), (p1, v1), weight = bracket
    a, b = utility[v0], utility[v1]
    seeds = sorted(set(a.seeds) & set(b.seeds))
    setting = {**a.setting, "config_hash": sorted({a.setting["config_hash"], b.setting["config_hash"]}), over: [v0, v1]}
    where = (f"at {by.rsplit('/', 1)[-1]} {target:.3f}: interpolated between {over} {v0:g} ({p0:.3f}) and "
             f"{v1:g} ({p1:.3f})") if v0 != v1 else f"at {over} {v0:g} ({p0:.3f})"
    by_seed = {s: a.by_seed[s] + weight * (b.by_seed[s] - a.by_seed[s]) for s in seeds
               if s in a.by_seed and s in b.by_seed}
    chance = None if a.chance is None or b.chance is None else (a.chance + b.chance) / 2  # same data
    spread = stdev(by_seed.values()) if len(by_seed) > 1 else None  # over the seeds both endpoints have
    if by_seed:  # mean, std and n over the same seeds: an endpoint's extra seeds would move the mean alone
        centre, n, seeds = mean(by_seed.values()), len(by_seed), sorted(by_seed)
    else:
        centre, n = a.mean + weight * (b.mean - a.mean), min(a.n, b.n)
    return Cell(mean=centre, std=spread, n=n, seeds=seeds, setting=setting, note=where, by_seed=by_seed,
                chance=chance)


# ----------------------------------------------------------------------------------------------------------------
# claims


def _operand(value: Any, means: dict[str, float | None], table: str) -> tuple[float | None, str]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), f"{value:g}"
    names = value if isinstance(value, list) else [value]
    for name in names:
        if name not in means:
            raise BenchError(f"mapping of '{table}': a claim names unknown row '{name}'.")
    found = [means[n] for n in names]
    label = names[0] if len(names) == 1 else f"mean of {len(names)} rows"
    if any(v is None for v in found):
        return None, label
    return mean(found), label


def _shared_seeds(operands: list[Any], by_seed: dict[str, dict[int, float]] | None) -> list[int] | None:
    """The seeds that every operand (each one row) was recorded on, when they are not all recorded on the same
    seeds; None where no pairing applies (the paper's side, a number or a list of rows, or seeds already equal)."""
    if by_seed is None or not all(isinstance(o, str) and by_seed.get(o) for o in operands):
        return None
    sets = [set(by_seed[o]) for o in operands]
    if all(x == sets[0] for x in sets):
        return None
    shared = sorted(set.intersection(*sets))
    return shared or None


def _seed_list(seeds: list[int]) -> str:
    return f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2 \
        else ", ".join(map(str, seeds))


def _expected_higher(spec: dict[str, Any]) -> Any:
    """The operand a comparison expects to score higher (None for ``within``)."""
    op = spec.get("op")
    if op in ("increasing", "decreasing"):
        rows = list(spec.get("rows") or [])
        return (rows[-1] if op == "increasing" else rows[0]) if rows else None
    return {"gt": spec.get("left"), "ge": spec.get("left"), "lt": spec.get("right"), "le": spec.get("right")}.get(op)


def _at_chance(spec: dict[str, Any], means: dict[str, float | None],
               chance: dict[str, float | None] | None) -> str | None:
    """Why the comparison is not applicable on our side, or None.

    It is not applicable when its expected-higher row does not beat its chance level by more than CHANCE_MARGIN.
    """
    row = _expected_higher(spec)
    if chance is None or not isinstance(row, str):
        return None
    value, floor = means.get(row), chance.get(row)
    if value is None or floor is None or value > floor + CHANCE_MARGIN:
        return None
    return (f"not applicable: {row} {value:.3f} does not beat its chance level {floor:.3f} (the majority answer, "
            f"or for an attack the random guess) by more than {CHANCE_MARGIN:g}, so the ordering would compare noise")


def check(spec: dict[str, Any], means: dict[str, float | None], table: str,
          by_seed: dict[str, dict[int, float]] | None = None,
          chance: dict[str, float | None] | None = None) -> dict[str, Any]:
    """One comparison on one side (ours or the paper's): verdict, the numbers and a sentence. ``by_seed`` (ours
    only) holds each row's per-seed values: rows recorded on different seeds are compared on the seeds they share.
    ``chance`` (ours only) holds each row's chance level: an ordering whose expected-higher row does not
    beat it is not applicable."""
    op, margin = spec.get("op"), float(spec.get("margin", 0.0))
    if op not in OPS:
        raise BenchError(f"mapping of '{table}': claim op '{op}' is not one of {', '.join(sorted(OPS))}.")
    judged = _compare(spec, op, margin, means, table, by_seed)
    if judged["verdict"] in (HOLDS, FAILS, UNRESOLVED) and (why := _at_chance(spec, means, chance)):
        judged = {**judged, "verdict": NOT_APPLICABLE, "detail": f"{judged['detail']}; {why}"}
    return judged


def _compare(spec: dict[str, Any], op: str, margin: float, means: dict[str, float | None], table: str,
             by_seed: dict[str, dict[int, float]] | None) -> dict[str, Any]:
    """The comparison itself: verdict (holds, fails, unresolved or no records), numbers and detail."""
    if op in ("increasing", "decreasing"):
        values = [_operand(r, means, table) for r in spec["rows"]]
        if any(v is None for v, _ in values):
            return {"verdict": NO_RECORDS, "detail": "missing: " + ", ".join(n for v, n in values if v is None)}
        numbers = [v for v, _ in values]
        shared = _shared_seeds(list(spec["rows"]), by_seed)
        if shared:
            numbers = [mean(by_seed[r][s] for s in shared) for r in spec["rows"]]
        sign = 1 if op == "increasing" else -1
        ok = all(sign * (b - a) > margin for a, b in zip(numbers, numbers[1:]))
        joint = " < " if op == "increasing" else " > "
        steps = f" (steps > {margin:g})" if margin else ""
        detail = f"{op}? " + joint.join(f"{v:.3f}" for v in numbers) + steps + _paired_note(shared)
        seeds = _common_seeds(list(spec["rows"]), by_seed)
        if seeds:  # each step's paired differences over the seeds: a step whose interval straddles margin is open
            pairs = zip(zip(spec["rows"], spec["rows"][1:]), zip(numbers, numbers[1:]))
            verdicts = [_resolved(sign * (b - a) > margin, [sign * (by_seed[y][s] - by_seed[x][s]) for s in seeds],
                                  margin) for (x, y), (a, b) in pairs]
            if FAILS not in verdicts and UNRESOLVED in verdicts:
                return {"verdict": UNRESOLVED, "values": numbers,
                        "detail": f"{detail}; {_unresolved_note(seeds)}"}
        return {"verdict": HOLDS if ok else FAILS, "values": numbers, "detail": detail}
    (left, left_name), (right, right_name) = _operand(spec["left"], means, table), _operand(spec["right"], means, table)
    if left is None or right is None:
        missing = [n for v, n in ((left, left_name), (right, right_name)) if v is None]
        return {"verdict": NO_RECORDS, "detail": "missing: " + ", ".join(missing)}
    shared = _shared_seeds([spec["left"], spec["right"]], by_seed)
    if shared:
        left, right = (mean(by_seed[spec[side]][s] for s in shared) for side in ("left", "right"))
    ok = {"gt": left > right + margin, "ge": left >= right - margin, "lt": left < right - margin,
          "le": left <= right + margin, "within": abs(left - right) <= margin}[op]
    symbol = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "within": "within"}[op]
    tail = {"gt": f" + {margin:g}", "ge": f" - {margin:g}", "lt": f" - {margin:g}", "le": f" + {margin:g}",
            "within": f" ± {margin:g}"}[op] if margin or op == "within" else ""
    if ok or op == "within":
        detail = f"{left_name} {left:.3f} {symbol} {right_name} {right:.3f}{tail}"
    else:  # the relation the numbers have, and the one claimed
        actual = ">" if left > right else "<" if left < right else "="
        detail = f"{left_name} {left:.3f} {actual} {right_name} {right:.3f} (claimed {symbol}{tail})"
    detail += _paired_note(shared)
    seeds = _common_seeds([spec["left"], spec["right"]], by_seed)
    if seeds and op == "within":  # an equivalence: the paired differences' interval inside ±margin, or outside it
        differences = [by_seed[spec["left"]][s] - by_seed[spec["right"]][s] for s in seeds]
        centre, half = _interval(differences)
        inside, outside = -margin <= centre - half and centre + half <= margin, \
            centre - half > margin or centre + half < -margin
        if not (inside or outside):
            return {"verdict": UNRESOLVED, "left": left, "right": right,
                    "detail": f"{detail}; unresolved: the paired difference (left - right) over seeds "
                              f"{_seed_list(seeds)} is {centre:+.3f} ± {half:.3f} (95% CI), which is neither "
                              f"inside nor outside ±{margin:g}"}
    elif seeds:  # the left-minus-right differences, oriented so that the claim says "> threshold"
        orient, threshold = {"gt": (1, margin), "ge": (1, -margin), "lt": (-1, margin), "le": (-1, -margin)}[op]
        raw = [by_seed[spec["left"]][s] - by_seed[spec["right"]][s] for s in seeds]
        if _resolved(ok, [orient * d for d in raw], threshold, strict=op in ("gt", "lt")) == UNRESOLVED:
            # printed as left minus right against the claim's own bound, the way its numbers read just before
            note = _unresolved_note(seeds, raw, orient * threshold)
            return {"verdict": UNRESOLVED, "left": left, "right": right, "detail": f"{detail}; {note}"}
    return {"verdict": HOLDS if ok else FAILS, "left": left, "right": right, "detail": detail}


def _common_seeds(operands: list[Any], by_seed: dict[str, dict[int, float]] | None) -> list[int] | None:
    """The seeds every operand (each one row of ours) was recorded on, when there are at least two: the seeds
    whose paired differences measure the comparison's spread; None otherwise (one seed says nothing of it)."""
    if by_seed is None or not all(isinstance(o, str) and by_seed.get(o) for o in operands):
        return None
    shared = sorted(set.intersection(*(set(by_seed[o]) for o in operands)))
    return shared if len(shared) >= 2 else None


def _interval(differences: list[float]) -> tuple[float, float]:
    """The mean paired difference and the half-width of its 95% confidence interval (Student's t)."""
    return mean(differences), float(ci95_half_width([stdev(differences)], [len(differences)])[0])


def _resolved(ok: bool, differences: list[float], threshold: float, strict: bool = True) -> str:
    """HOLDS, FAILS or UNRESOLVED for a claim that reads "difference > threshold".

    When the 95% confidence interval of the mean paired difference lies on one side of ``threshold``, the check
    holds or fails, as ``ok`` says. Else it is UNRESOLVED: the seeds do not tell the ordering from their spread.
    """
    centre, half = _interval(differences)
    low, high = centre - half, centre + half
    if (low > threshold if strict else low >= threshold) or (high <= threshold if strict else high < threshold):
        return HOLDS if ok else FAILS
    return UNRESOLVED


def _unresolved_note(seeds: list[int], differences: list[float] | None = None, threshold: float = 0.0) -> str:
    """Why a check is unresolved.

    The left-minus-right paired ``differences`` over ``seeds`` (mean and 95% interval) straddle the claim's bound
    ``threshold``. Without differences, a step of an ordering did.
    """
    if differences is None:
        return f"unresolved: a step's 95% confidence interval over seeds {_seed_list(seeds)} straddles its threshold"
    centre, half = _interval(differences)
    return (f"unresolved: the paired difference (left - right) over seeds {_seed_list(seeds)} is {centre:+.3f} ± "
            f"{half:.3f} (95% CI), which straddles {f'{threshold:+g}' if threshold else '0'}")


def _paired_note(shared: list[int] | None) -> str:
    if not shared:
        return ""
    return f" (paired on seed {shared[0]})" if len(shared) == 1 else f" (paired on seeds {_seed_list(shared)})"


def combine(verdicts: list[str]) -> str:
    """A claim's verdict from its checks' verdicts.

    A claim fails if any check fails. Else it has no records if any check lacks them. Else it is not applicable if
    no check is applicable. Else it is unresolved if any check is. Else it holds. Not-applicable checks are left
    out.
    """
    if FAILS in verdicts:
        return FAILS
    if NO_RECORDS in verdicts or not verdicts:
        return NO_RECORDS
    if all(v == NOT_APPLICABLE for v in verdicts):
        return NOT_APPLICABLE
    return UNRESOLVED if UNRESOLVED in verdicts else HOLDS


def judge(claims: list[dict[str, Any]], ours: dict[str, float | None], paper: dict[str, float | None],
          table: str, by_seed: dict[str, dict[int, float]] | None = None,
          chance: dict[str, float | None] | None = None) -> list[dict[str, Any]]:
    """Each claim's verdict on our records and on the paper's numbers, with every check's detail."""
    judged = []
    for claim in claims:
        if not claim.get("id") or not claim.get("checks"):
            raise BenchError(f"mapping of '{table}': every claim needs an id and checks.")
        our_checks = [check(c, ours, table, by_seed, chance) for c in claim["checks"]]
        paper_checks = [check(c, paper, table) for c in claim["checks"]]
        judged.append({"id": claim["id"], "text": claim.get("text", ""), "paper_says": claim.get("paper_says", ""),
                       "verdict": combine([c["verdict"] for c in our_checks]),
                       "paper_verdict": combine([c["verdict"] for c in paper_checks]),
                       "checks": our_checks, "paper_checks": paper_checks})
    return judged


# ----------------------------------------------------------------------------------------------------------------
# the report


def reproduce(root: Path, table: str, records: list[ResultRecord]) -> dict[str, Any]:
    """The report of one table: paper beside ours per row, and the claims' verdicts (nothing is written)."""
    reference = load_reference(root, table)
    mapping = load_mapping(root, table)
    if mapping.get("not_mapped"):
        raise BenchError(f"table '{table}' is not mapped to harness cells: {mapping['not_mapped']}")
    rows_out, ours, paper, by_seed, chance = [], {}, {}, {}, {}
    for row in expand_rows(mapping, table):
        value, std = paper_value(reference, row.get("paper"))
        if row.get("match"):
            where = str(row["match"].get("paper_at") or "")
            other, _, where = where.rpartition(":")  # "<table>:<path>" reads another reference file
            target, _ = paper_value(load_reference(root, other) if other else reference, where)
            cell = matched_cell(records, row, target)
        else:
            cell = summarize_cell([r for r in records if matches(r, row["select"])], row["metric"], row.get("chance"))
        if row.get("ours_scale") and cell.mean is not None:  # a metric recorded in the paper's unit (e.g. x 100)
            scale = float(row["ours_scale"])
            cell.mean, cell.std = cell.mean / scale, None if cell.std is None else cell.std / scale
            cell.by_seed = {seed: v / scale for seed, v in cell.by_seed.items()}
            cell.chance = None if cell.chance is None else cell.chance / scale
        if row.get("note"):
            cell.note = "; ".join(filter(None, [row["note"], cell.note]))
        ours[row["id"]], paper[row["id"]], by_seed[row["id"]] = cell.mean, value, cell.by_seed
        chance[row["id"]] = cell.chance
        rows_out.append({
            "id": row["id"], "metric": row["metric"], "select": row["select"],
            "paper": {"value": value, "std": std, "path": row.get("paper")},
            "ours": cell.as_dict(),
            "difference": None if value is None or cell.mean is None else cell.mean - value,
            **({"match": row["match"]} if row.get("match") else {}),
        })
    claims = judge(mapping.get("claims") or [], ours, paper, table, by_seed, chance)
    source = reference.get("source", {})
    return {
        "schema_version": SCHEMA_VERSION,
        "table": table,
        "title": mapping.get("title", table),
        "reference": f"reference/{table}.json",
        "paper": source.get("paper", ""),
        "paper_table": source.get("table") or ", ".join(t.get("table", "") for t in source.get("tables", {}).values()),
        "paper_setting": mapping.get("paper_setting") or {},
        "our_setting": mapping.get("our_setting") or {},
        "deviations": mapping.get("deviations") or [],
        "rows": rows_out,
        "claims": claims,
        "summary": {"rows": len(rows_out), "rows_with_records": sum(r["ours"]["mean"] is not None for r in rows_out),
                    "claims": {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}},
        "command": f"bench reproduce {table}",
    }


def coverage(root: Path, records: list[ResultRecord]) -> list[dict[str, Any]]:
    """Per reference table: mapped or why not, its rows and how many of them our records cover."""
    found = []
    for table in tables(root):
        path = reproduction_dir(definitions(root)) / f"{table}.yaml"
        if not path.is_file():
            found.append({"table": table, "status": "no mapping"})
            continue
        mapping = load_mapping(root, table)
        if mapping.get("not_mapped"):
            found.append({"table": table, "status": "not mapped", "reason": str(mapping["not_mapped"])})
            continue
        report = reproduce(root, table, records)
        used = {(h, s) for r in report["rows"] if r["ours"]["mean"] is not None
                for h in _hashes(r["ours"]["setting"].get("config_hash")) for s in r["ours"]["seeds"]}
        found.append({"table": table, "status": "mapped", "title": report["title"], **report["summary"],
                      "cells": len(used)})
    return found


def _hashes(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _spec_kwargs(select: dict[str, Any]) -> dict[str, Any]:
    """make_spec keyword arguments from a row's selection (dotted paths set one key of a dict field)."""
    kwargs: dict[str, Any] = {}
    renamed = {"server": "server_args", "training": "training_args"}
    for key, value in select.items():
        head, _, rest = key.partition(".")
        if head not in SPEC_FIELDS:
            continue
        name = renamed.get(head, head)
        if rest:
            kwargs[name] = {**kwargs.get(name, {}), rest: value}
        elif isinstance(value, dict) and isinstance(kwargs.get(name), dict):
            kwargs[name] = {**value, **kwargs[name]}
        else:
            kwargs[name] = value
    training = dict(kwargs.pop("training_args", {}))
    if "mode" in training:
        kwargs["mode"] = training.pop("mode")
    if training:
        kwargs["training_args"] = training
    return kwargs


def missing_cells(root: Path, table: str, records: list[ResultRecord]) -> list[dict[str, Any]]:
    """make_spec keyword arguments of every (row, seed) without a record, for ``--run``.

    A matched-privacy row needs a sweep, not one cell: its ``match.run`` lists the values of ``match.over`` to
    run (without it the row is skipped). Rows that select no defense (no harness counterpart) are skipped."""
    mapping = load_mapping(root, table)
    if mapping.get("not_mapped"):
        raise BenchError(f"table '{table}' is not mapped to harness cells: {mapping['not_mapped']}")
    seeds = (mapping.get("run") or {}).get("seeds") or [0, 1, 2]
    cells, seen = [], set()
    for row in expand_rows(mapping, table):
        if row["select"].get("defense") is None:
            continue
        selections = [row["select"]]
        if row.get("match"):
            over = row["match"]["over"]
            selections = [{**row["select"], "defense_args": {**(row["select"].get("defense_args") or {}), over: value}}
                          for value in row["match"].get("run") or []]
        for select in selections:
            kwargs = _spec_kwargs(select)
            for seed in seeds:
                if any(r.seed == seed and row["metric"] in r.metrics and matches(r, select) for r in records):
                    continue
                key = json.dumps({**kwargs, "seed": seed}, sort_keys=True, default=str)
                if key not in seen:
                    seen.add(key)
                    cells.append({**kwargs, "seed": seed})
    return cells


def markdown(report: dict[str, Any], recorded: bool = True) -> str:
    """The report as Markdown, for the README and docs.

    One table of rows (paper, ours, difference) comes first. Then the claims, with their verdicts on our records
    and on the paper's numbers.
    """
    def number(value: float | None, std: float | None = None, n: int | None = None) -> str:
        if value is None:
            return "–"
        return f"{value:.3f}" + (f" ± {std:.3f}" if std is not None else "") + (f" (n={n})" if n else "")

    lines = [f"**{report['title']}** (`{report['command']}`)", "",
             "| row | metric | paper | ours | ours − paper |", "|---|---|---:|---:|---:|"]
    for row in report["rows"]:
        ours = row["ours"]
        if recorded and ours["mean"] is None:
            continue
        difference = "" if row["difference"] is None else f"{row['difference']:+.3f}"
        lines.append(f"| {row['id']} | {row['metric'].rsplit('/', 1)[-1]} | "
                     f"{number(row['paper']['value'], row['paper']['std'])} | "
                     f"{number(ours['mean'], ours['std'], ours['n']) if ours['mean'] is not None else 'no records'} | "
                     f"{difference} |")
    lines += ["", "| claim | ours | paper |", "|---|---|---|"]
    lines += [f"| {claim['id']} | {claim['verdict']}{_at_chance_count(claim)} | {claim['paper_verdict']} |"
              for claim in report["claims"]]
    return "\n".join(lines) + "\n"


def check_counts(claim: dict[str, Any]) -> tuple[int, int]:
    """How many of a judged claim's checks were decided on our records, and how many were at chance.

    Decided means held or failed; at chance means not applicable.
    """
    verdicts = [c["verdict"] for c in claim["checks"]]
    return sum(v in (HOLDS, FAILS) for v in verdicts), verdicts.count(NOT_APPLICABLE)


def _at_chance_count(claim: dict[str, Any]) -> str:
    _, idle = check_counts(claim)
    if not idle or claim["verdict"] == NOT_APPLICABLE:
        return ""
    return f" ({idle} of {len(claim['checks'])} checks at chance)"


VERDICTS_MARKER = "<!-- reproduction-verdicts -->"


def reproduction_pages(reports: list[dict[str, Any]], source: str, command: str,
                       unmapped: dict[str, str] | None = None) -> dict[str, str]:
    """The reproduction reports as pages, by file name.

    The reports are ``<results>/reproduction/*.json``, as ``bench reproduce TABLE`` writes them. ``index.md`` gives
    every table's coverage and verdicts, and the tables not mapped with why (``unmapped``). ``<table>.md`` gives the
    paper's setting and ours, the deviations, the rows beside the paper's, and each claim with the checks that did
    not hold.
    """
    pages, index = {}, []
    for report in sorted(reports, key=lambda r: r["table"]):
        table, summary, claims = report["table"], report["summary"], report["claims"]
        failing = "; ".join(c["id"] for c in claims if c["verdict"] == FAILS) or "-"
        index.append(f"| [`{table}`]({table}.md) | {summary['rows_with_records']} / {summary['rows']} | "
                     + " | ".join(str(summary["claims"][v]) for v in VERDICTS) + f" | {failing} |")
        lines = [GENERATED, f"# {report['title']}", "",
                 f"{report['paper']} {report['paper_table']}. Printed by `{command}` from "
                 f"`{source}reproduction/{table}.json`, which `{report['command']} --results-dir "
                 f"{source.rstrip('/')}` writes from the records.", ""]
        paper, ours = report["paper_setting"], report["our_setting"]
        settings = list(dict.fromkeys([*paper, *ours]))
        if settings:
            lines += ["| setting | paper | ours |", "|---|---|---|"]
            lines += [f"| {k} | {_cell(paper.get(k, ''))} | {_cell(ours.get(k, ''))} |" for k in settings]
            lines.append("")
        if report["deviations"]:
            lines += ["Deviations:", "", *(f"- {d}" for d in report["deviations"]), ""]
        lines += ["## Rows", "", markdown(report, recorded=False).split("\n", 2)[2], "## Claims", ""]
        for claim in claims:
            lines.append(f"- **{claim['id']}**: {claim.get('text', '')} Ours: *{claim['verdict']}*; the paper's "
                         f"numbers: *{claim['paper_verdict']}*.")
            for check in claim["checks"]:
                if check["verdict"] in (FAILS, UNRESOLVED):
                    lines.append(f"    - {check['verdict']}: {_cell(check['detail'])}")
        pages[f"{table}.md"] = "\n".join(lines).rstrip() + "\n"
    pages["index.md"] = "\n".join([
        GENERATED, "# Reproduction of the papers' tables", "",
        f"Printed by `{command}` from the reports in `{source}reproduction/` (`bench reproduce TABLE --results-dir "
        f"{source.rstrip('/')}` writes each from the records; `bench reproduce --results-dir {source.rstrip('/')}` "
        "lists them). A claim *holds* or *fails* on our records, is *unresolved* where the paired 95% interval over "
        "the seeds straddles its bound, *not applicable* where the rows it orders sit at the majority answer, and "
        "has *no records* where a row it needs was not run.", "",
        VERDICTS_MARKER,
        "| table | rows with records | holds | fails | unresolved | not applicable | no records | failing claims |",
        "|---|---:|---:|---:|---:|---:|---:|---|", *index, "",
        *([("Not mapped: " + "; ".join(f"`{t}`: {_cell(why)}" for t, why in sorted(unmapped.items())))]
          if unmapped else [])])
    return pages


def _cell(text: Any) -> str:
    """Text for one Markdown table cell or list line (no pipes or line breaks)."""
    return " ".join(str(text).split()).replace("|", "\\|")

