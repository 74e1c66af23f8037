"""Grids: a YAML file expands to cells; the local executor runs them and skips finished ones.

Example::

    tasks: [sst2, cola]
    encoders: [minilm]
    defenses:
      - none
      - {name: texthide, args: {m: 256, k: 4}}
      - {name: dchi-text, args: {eps: 10}, tasks: [sst2]}   # only on these of the grid's tasks
      - {name: ndd, args: {k: 8}, seeds: [0]}                # only these of the grid's seeds (a costly cell)
    attacks: [rss]
    seeds: [0, 1, 2]
    settings: {n_train: 8000, mode: frozen}   # GRID_SETTINGS (make_spec keywords), applied to every cell
                                              # (traffic: inference attacks the inference queries instead)
    resources: {num_cpus: 1, num_gpus: 0, memory_gb: 4}   # what one cell needs (the Ray executor schedules by it)
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from bench.core.errors import BenchError
from bench.core.registry import plugin_fault
from bench.core.spec import RunSpec
from bench.core.versions import component_versions
from bench.engine.runner import make_spec, run_cell
from bench.models.encoders import require_device
from bench.models.loading import check_encoder
from bench.results.record import ResultRecord
from bench.results.store import ResultStore

GRID_KEYS = {"tasks", "encoders", "defenses", "servers", "attacks", "seeds", "settings", "resources"}
# make_spec's keywords a grid sets for every cell under settings: (the rest come from the grid's own keys)
GRID_SETTINGS = (
    "mode", "training_args", "attack_args", "n_train", "n_eval", "pooling", "max_length", "device", "precision",
    "traffic")
DEFENSE_KEYS = {"name", "args", "server", "tasks", "seeds"}  # a defense entry; tasks / seeds: a subset of the grid's
RESOURCE_KEYS = {"num_cpus": 1.0, "num_gpus": 0.0, "memory_gb": 0.0}  # per cell; memory 0: not declared


def _as_list(value: Any, key: str, kind: type | tuple[type, ...] = str) -> list:
    """A grid entry as a list whose items all have the expected type."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise BenchError(f"grid key '{key}' has {item!r}, which is not a valid entry.")
    return items


class _DefenseEntry(NamedTuple):
    """One entry of a grid's ``defenses``; ``tasks`` / ``seeds`` None = every one of the grid's."""

    name: str
    args: dict
    server: dict
    tasks: list | None = None
    seeds: list | None = None

    def runs(self, task: str, seed: int) -> bool:
        """Whether the entry has a cell for this task and seed of the grid."""
        return (self.tasks is None or task in self.tasks) and (self.seeds is None or seed in self.seeds)


def _subset(item: dict, key: str, grid_values: list, kind: type, path: Path) -> list | None:
    """A defense entry's ``tasks`` or ``seeds``: None when absent, else a non-empty subset of the grid's own."""
    if key not in item:
        return None
    only = _as_list(item[key], key, kind)
    if not only or set(only) - set(grid_values):
        raise BenchError(f"grid defense {item['name']!r} of {path} names {key} {only!r}; list some of the "
                         f"grid's {key} ({', '.join(map(str, grid_values))}).")
    return only


class DuplicateKey(Exception):
    """A key given twice in one mapping of a YAML file (line: where the second is)."""

    def __init__(self, key: object, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


def _unique_keys_loader():
    """A safe YAML loader that raises ``DuplicateKey`` where the standard one keeps the last of two equal keys."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise DuplicateKey(key, key_node.start_mark.line + 1)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeys


def _read_grid(path: Path) -> dict:
    """The grid file's mapping, or one sentence on why it is not one."""
    import yaml

    if path.is_dir():
        raise BenchError(f"grid file {path} is a folder; name a .yaml file in it.")
    if not path.is_file():
        raise BenchError(f"grid file {path} does not exist.")
    try:
        grid = yaml.load(path.read_text(encoding="utf-8"), Loader=_unique_keys_loader()) or {}
    except DuplicateKey as exc:
        raise BenchError(f"grid file {path}:{exc.line} gives key {exc.key!r} twice in one mapping; give it once "
                         "(YAML would keep only the second).") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise BenchError(f"grid file {path} is not UTF-8 text (line {line}); save it as UTF-8.") from None
    except yaml.YAMLError as exc:
        raise BenchError(f"grid file {path} is not valid YAML ({exc.__class__.__name__}).") from exc
    if not isinstance(grid, dict) or not grid:
        raise BenchError(f"grid file {path} must be a mapping with keys {', '.join(sorted(GRID_KEYS))}.")
    unknown = {str(k) for k in grid} - GRID_KEYS
    if unknown:
        raise BenchError(f"grid file {path} has unknown keys {', '.join(sorted(unknown))}.")
    return grid


def grid_resources(path: str | Path) -> dict[str, float]:
    """What one cell of the grid needs (``resources:``; defaults: one CPU, no GPU, memory not declared)."""
    path = Path(path)
    given = _read_grid(path).get("resources") or {}
    if not isinstance(given, dict) or set(map(str, given)) - set(RESOURCE_KEYS):
        raise BenchError(f"grid key 'resources' of {path} must be a mapping with keys "
                         f"{', '.join(sorted(RESOURCE_KEYS))}.")
    resources = dict(RESOURCE_KEYS)
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise BenchError(f"grid resource '{key}' of {path} must be a number of at least 0, got {value!r}.")
        resources[str(key)] = float(value)
    if resources["num_cpus"] <= 0:
        raise BenchError(f"grid resource 'num_cpus' of {path} must be more than 0.")
    return resources


def load_grid(path: str | Path, device: str | None = None, here: bool = True,
              precision: str | None = None) -> list[RunSpec]:
    """Every cell of a grid file, validated and resolved (nothing runs on a bad grid).

    ``device`` (``--device``) replaces the grid's ``settings: {device: ...}`` unless it is None or "auto";
    ``precision`` (``--precision``) replaces ``settings: {precision: ...}`` unless it is None.
    ``here=False``: the cells run elsewhere (Ray workers), so a CUDA device is not checked on this machine, and
    "auto" means cuda when the grid declares ``resources: {num_gpus: ...}`` and cpu otherwise.
    """
    path = Path(path)
    grid = _read_grid(path)
    if not grid.get("defenses"):
        raise BenchError(f"grid file {path} lists no defenses.")
    for key in ("tasks", "encoders", "servers", "attacks", "seeds"):
        if key in grid and grid[key] in (None, [], {}):  # left out = the default; written down empty = a mistake
            raise BenchError(f"grid file {path} has an empty '{key}'; list at least one entry or leave the key out "
                             "for the default.")
    settings = grid.get("settings") or {}
    if not isinstance(settings, dict):
        raise BenchError("grid key 'settings' must be a mapping of make_spec keywords.")
    settings = dict(settings)
    if "device_here" in settings:
        raise BenchError(f"grid file {path} sets 'device_here', which is not a setting; choose the executor instead.")
    unknown = sorted(str(k) for k in settings if k not in GRID_SETTINGS)
    if unknown:
        raise BenchError(f"grid file {path} has unknown setting '{unknown[0]}'; settings are "
                         f"{', '.join(GRID_SETTINGS)} (tasks, encoders, defenses, attacks, servers and seeds are "
                         "grid keys of their own).")
    if device not in (None, "auto"):
        settings["device"] = device
    if precision is not None:
        settings["precision"] = precision
    if not here and settings.get("device", "auto") == "auto":
        settings["device"] = "cuda" if grid_resources(path)["num_gpus"] > 0 else "cpu"
    if here and grid_resources(path)["num_gpus"] > 0 and str(settings.get("device", "auto")) != "cpu":
        require_device("cuda", f" for grid file {path}, which asks for num_gpus per cell")
    tasks = _as_list(grid.get("tasks"), "tasks") or ["sst2"]
    seeds = _as_list(grid.get("seeds"), "seeds", int) or [0]
    encoders = _as_list(grid.get("encoders"), "encoders") or ["minilm"]
    defenses = []
    for item in _as_list(grid.get("defenses"), "defenses", (str, dict)):
        if isinstance(item, str):
            defenses.append(_DefenseEntry(item, {}, {}))
        elif (isinstance(item.get("name"), str) and isinstance(item.get("args") or {}, dict)
              and isinstance(item.get("server") or {}, dict) and not set(item) - DEFENSE_KEYS):
            defenses.append(_DefenseEntry(item["name"], {str(k): v for k, v in (item.get("args") or {}).items()},
                                          {str(k): v for k, v in (item.get("server") or {}).items()},
                                          _subset(item, "tasks", tasks, str, path),
                                          _subset(item, "seeds", seeds, int, path)))
        else:
            raise BenchError(f"grid defense {item!r} must be a name or {{name: ..., args: {{...}}, server: {{...}}, "
                             "tasks: [...], seeds: [...]}}.")
    servers = [{str(k): v for k, v in item.items()} for item in _as_list(grid.get("servers"), "servers", dict)]
    cells = itertools.product(
        tasks, encoders, defenses, servers or [{}], _as_list(grid.get("attacks"), "attacks") or [None], seeds)

    for encoder in dict.fromkeys(encoders):  # named with the file
        check_encoder(encoder, f"grid file {path}")
    specs = []
    for task, encoder, defense, server, attack, seed in cells:
        if not defense.runs(task, seed):
            continue
        try:
            specs.append(
                make_spec(
                    task=task, encoder=encoder, defense=defense.name, defense_args=defense.args, attack=attack,
                    seed=seed, server_args={**server, **defense.server}, device_here=here, **settings,
                )
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise BenchError(f"grid file {path} has invalid settings ({exc}).") from exc
    return specs


def shard_of(specs: list[RunSpec], shard: str) -> list[RunSpec]:
    """The cells of shard ``"i/n"`` (1-based), so n processes split a grid.

    Shards take every n-th configuration from the i-th with all of its seeds, because a configuration's
    seeds share cached work (encoder features, an adapted checkpoint) that two processes would otherwise
    both compute. A grid with fewer configurations than shards is split by cell instead.
    """
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", shard)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise BenchError(f"--shard must be i/n with 1 <= i <= n (e.g. 1/2), got '{shard}'.")
    index, count = int(match.group(1)), int(match.group(2))
    configurations = list(dict.fromkeys(spec.config_hash() for spec in specs))
    if len(configurations) < count:
        return specs[index - 1 :: count]
    mine = set(configurations[index - 1 :: count])
    return [spec for spec in specs if spec.config_hash() in mine]


def cell_key(spec: RunSpec) -> tuple[str, int, str]:
    """What identifies a finished cell: config hash, seed and the versions of its components."""
    return spec.config_hash(), spec.seed, component_versions(spec)


def run_grid(
    specs: Iterable[RunSpec],
    store: ResultStore,
    on_cell: Callable[[RunSpec, str], None] | None = None,
    on_record: Callable[[RunSpec, ResultRecord], None] | None = None,
    cell_timeout: float | None = None,
    claim_wait: float | None = None,
    on_failure: Callable[[RunSpec, str], None] | None = None,
) -> tuple[int, int]:
    """Run every cell without a stored record, appending each as it finishes (``on_record`` is shown it, then
    ``on_cell`` is told each cell's status).

    Returns (cells run, cells skipped). An interrupted grid resumes where it stopped. Processes sharing a
    store (``--shard``, or two copies of the same grid) never run a cell twice: a cell is claimed
    (``ResultStore.claim``) and the store read again before it runs. A cell another process holds is put
    off (status "claimed") and, after every other cell, waited for: skipped if that process recorded it,
    run here if it died first. A cell that fails (bad input, a plugin's fault, a bug) is not recorded
    (status "failed") and the grid goes on; after the last cell, ``BenchError`` names the failures and how
    many cells were recorded, and running the grid again retries only those. A store that cannot be written
    still stops the grid at once. Bounds the user sets: ``cell_timeout`` seconds for each cell's run (then it
    fails), ``claim_wait`` seconds of waiting for a cell another process holds (a stopped process keeps its
    claim: then it fails here, and a later run takes it up); None waits without bound. ``on_failure`` is told
    each failed cell's reason as it fails.
    """
    specs = list(specs)
    store.check_writable({s.defense for s in specs})  # before the first cell, so no finished cell is lost
    done = store.completed()
    counts = {"done": 0, "skipped": 0, "failed": 0}
    deferred, failures = [], []
    for wait, cells in ((False, specs), (True, deferred)):  # held by another process at first: waited for after
        for spec in cells:
            try:
                status = _claim_and_run(spec, store, done, wait=(claim_wait if claim_wait is not None else True)
                                        if wait else False, on_record=on_record, cell_timeout=cell_timeout)
            except _CellFailed as failure:
                status = "failed"
                failures.append(f"{spec.label()}: {failure.reason.rstrip('.')}")
            if status == "claimed":
                deferred.append(spec)
            else:
                counts[status] += 1
            if on_cell:
                on_cell(spec, status)
            if status == "failed" and on_failure:
                on_failure(spec, failures[-1].split(": ", 1)[1])
    if failures:
        more = f" and {len(failures) - 1} more" if len(failures) > 1 else ""
        raise BenchError(f"{len(failures)} of {len(specs)} cells failed and were not recorded (first: {failures[0]}"
                         f"{more}); {counts['done']} ran and {counts['skipped']} were already recorded in "
                         f"{store.records_dir}; fix the cause and run the grid again to retry only the failed cells.")
    return counts["done"], counts["skipped"]


class CellTimeout(BenchError):
    """A cell ran longer than the grid's ``--cell-timeout``."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise ``CellTimeout`` in the block once ``seconds`` of wall-clock time pass (None: no limit). A real-time
    timer's signal interrupts the cell between Python steps (a long native call finishes its step first); only the
    main thread can set it, so elsewhere the block runs without a limit."""
    import signal
    import threading

    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise CellTimeout(f"it ran longer than --cell-timeout {seconds:g} s and was stopped")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _CellFailed(Exception):
    """A cell's own run failed; ``reason`` is one sentence (the grid records the others and reports it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _cell_failure(exc: Exception) -> str:
    """One sentence for why a cell failed: the user error's, the plugin's file and line, else the exception."""
    if isinstance(exc, BenchError):
        return str(exc)
    fault = plugin_fault(exc)
    return str(fault) if fault is not None else f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _claim_and_run(spec: RunSpec, store: ResultStore, done: set, wait: bool | float, on_record=None,
                   cell_timeout: float | None = None) -> str:
    """Run one cell unless it is recorded ("skipped") or another process holds it ("claimed"); "done" after.
    A failure of the cell's own run (or its timeout, or a wait for its claim that ran out) raises ``_CellFailed``;
    one of the store is raised as it is."""
    key = cell_key(spec)
    if key not in done:
        done |= store.completed()
    if key in done:
        return "skipped"
    with store.claim(key, wait=wait) as held:
        if not held and wait is not False:
            raise _CellFailed(f"another process still held it after {wait:g} s of waiting (--claim-wait); if that "
                              "process is stopped, resume or end it")
        if not held:
            return "claimed"
        done |= store.completed()  # the previous holder may have finished it
        if key in done:
            return "skipped"
        try:
            with time_limit(cell_timeout):
                record = run_cell(spec)
        except Exception as exc:  # noqa: BLE001 - any failure of one cell; Ctrl-C (KeyboardInterrupt) still stops
            raise _CellFailed(_cell_failure(exc)) from exc
        store.append(record)
        store.finish_claim(key)
        if on_record is not None:
            on_record(spec, record)
    done.add(key)
    return "done"


@dataclass
class CellEstimate:
    """A cell of a dry run: recorded or to run, and its expected time from past records."""

    spec: RunSpec
    status: str  # "recorded" or "to run"
    seconds: float | None  # median runtime of the past records it is estimated from; None: none to go by
    device: str  # the device those records ran on (cpu, cuda)
    basis: str  # which records: this configuration, or its task and defense
    reuse: str = ""  # what a cell to run reuses (bench.engine.reuse.plan: it runs the attack only), or "" (in full)


def estimate_cells(specs: Iterable[RunSpec], records: Iterable,
                   reuse: Callable[[RunSpec], str] | None = None) -> list[CellEstimate]:
    """Each cell's status and time estimate, read from stored ``records`` (``ResultStore.read()``); nothing runs.

    The estimate is the median ``runtime_s`` of the stored records of the same configuration (config hash, any
    seed) on the cell's device; for a cell with server options (a pretraining budget, an adaptation, DP-SGD), else
    of the same task, defense, server options and attack (membership inference retrains a DP-SGD server per
    shadow), else of the same task, defense and server options, else of the same task and server options (they set
    the server's main work: 6,400 pretraining steps take dozens of times as long as 200, whatever the defense), else
    of the same task, defense and attack with the same options at other values (another DP-SGD ε); else of the same
    task, defense, server options and attack at other sizes, each scaled by the ratio of training sizes (membership
    inference retrains the server per shadow, so its cells cost many times the defense's others); else of the same
    task and defense on that device, else on any device (labelled with that device), else unknown. Records that reused
    another run's server part (``notes.reused_from``) count only for cells that ``reuse`` says will reuse one: those
    are estimated from such records of the same task, defense and attack, else of the same task and attack, else
    by the attack's own time in past records of the same task, defense and attack (``notes.attack_s``).
    """
    import statistics

    def server_key(server: dict | None) -> str:
        return json.dumps(server or {}, sort_keys=True, default=str)

    def server_kind(server: dict | None) -> str:  # which options, not their values
        return ",".join(sorted(server or {}))

    records = list(records)
    done = {(r.config_hash, r.seed, r.component_versions()) for r in records}
    pools: dict[tuple, list] = {}
    for r in records:
        device = str(r.hardware.get("device", r.spec.get("device", "cpu"))).split(":")[0]
        task, defense, server, attack = r.spec["task"], r.spec["defense"], server_key(r.spec.get("server")), \
            r.spec.get("attack")
        notes = getattr(r, "notes", {}) or {}
        if "reused_from" in notes:
            keys = (("reuse", task, defense, attack), ("reuse-attack", task, attack))
        else:
            keys = (("config", r.config_hash), ("pair", task, defense), ("server", task, defense, server),
                    ("server-attack", task, defense, server, attack), ("task-server", task, server),
                    ("kind-attack", task, defense, server_kind(r.spec.get("server")), attack))
        for key in keys:
            pools.setdefault(key, []).append((device, r.runtime_s))
        if "reused_from" not in notes and attack and r.spec.get("n_train"):  # seconds per training example
            pools.setdefault(("sized", task, defense, server, attack), []).append(
                (device, r.runtime_s / r.spec["n_train"]))
        if isinstance(notes.get("attack_s"), (int, float)):
            pools.setdefault(("attack", task, defense, attack), []).append((device, notes["attack_s"]))
    rows = []
    for spec in specs:
        device = spec.device.split(":")[0]
        status = "recorded" if cell_key(spec) in done else "to run"
        seconds, used, basis = None, device, "no past record"
        server = server_key(spec.to_dict()["server"])
        reused = reuse(spec) if reuse is not None and status == "to run" else ""
        if reused:
            basis = "no past record of the attack alone"
            levels = [(("reuse", spec.task, spec.defense, spec.attack), "attack-only runs of its task, defense and "
                       "attack", False),
                      (("reuse-attack", spec.task, spec.attack), "attack-only runs of its task and attack", False),
                      (("attack", spec.task, spec.defense, spec.attack), "the attack's time in runs of its task, "
                       "defense and attack", False)]
            levels.append((levels[-1][0], levels[-1][1], True))
        else:
            levels = [(("config", spec.config_hash()), "this configuration", False)]
            if spec.server:
                kind = server_kind(spec.to_dict()["server"])
                levels += [(("server-attack", spec.task, spec.defense, server, spec.attack),
                            "its task, defense, server options and attack", False),
                           (("server", spec.task, spec.defense, server), "its task, defense and server options",
                            False), (("task-server", spec.task, server), "its task and server options", False),
                           (("kind-attack", spec.task, spec.defense, kind, spec.attack),
                            "its task, defense and attack with other values of its server options", False)]
            if spec.attack and spec.n_train:
                levels.append((("sized", spec.task, spec.defense, server, spec.attack),
                               "its task, defense and attack at other sizes, scaled by training size", False))
            levels += [(("pair", spec.task, spec.defense), "its task and defense", False),
                       (("pair", spec.task, spec.defense), "its task and defense", True)]
        for key, label, any_device in levels:
            times = [(d, t) for d, t in pools.get(key, []) if any_device or d == device]
            if times:
                used = device if not any_device else max({d for d, _ in times}, key=[d for d, _ in times].count)
                seconds = statistics.median(t for d, t in times if d == used)
                if key[0] == "sized":  # the median time per training example, times the cell's
                    seconds *= spec.n_train
                basis = f"{label} ({sum(1 for d, _ in times if d == used)} records)"
                break
        rows.append(CellEstimate(spec, status, seconds, used, basis, reused))
    return rows
