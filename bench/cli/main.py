"""The ``bench`` command line: parse, call the library, print. Bad input exits 2 with one sentence."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from bench.core.errors import BenchError
from bench.core.files import output_file
from bench.core.jsontext import strict_json
from bench.core.smoke import describe as smoke_line
from bench.core.progress import reporting
from bench.models.offline_mlm import MLMRecipe

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Privacy-utility benchmark for text-privacy defenses."
)
out = Console()
err = Console(stderr=True)

PluginOption = typer.Option(None, "--plugin", help="Extra component file to load (repeatable).")
# one rule for every command: --results-dir, else $BENCH_RESULTS_DIR, else ./bench-results
def _folder_argument(value: str) -> Path | str:
    """A folder option's value as a path; an empty one is kept as "" (``Path("")`` would be the working folder),
    which ``ResultStore`` refuses in one sentence."""
    return value if not value.strip() else Path(value)


ResultsOption = typer.Option(None, "--results-dir", parser=_folder_argument,
                             help="Results folder (default: $BENCH_RESULTS_DIR, else "
                             "./bench-results); the published board is results/, read or changed only with "
                             "--results-dir results.")


def plain(value: object) -> str:
    """Text from users or files as rich prints it literally, on one line: markup escaped (``[/x]`` would raise,
    ``[bold]`` vanish), characters that are not printable (newline, ESC, a bidi override, a zero-width space)
    shown as their escapes."""
    from rich.markup import escape

    return escape("".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(value)))


def user_errors(command):
    """Turn ``BenchError``, and an exception raised in a plugin's code, into one red sentence and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except BenchError as exc:
            err.print(f"[red]error:[/red] {plain(exc)}", highlight=False, soft_wrap=True)
            raise typer.Exit(2)
        except Exception as exc:
            from bench.core.registry import plugin_fault

            fault = plugin_fault(exc)  # a plugin's own code failed: its file and line, not a traceback
            if fault is None:
                raise
            err.print(f"[red]error:[/red] {plain(fault)}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


def _load_plugins(plugins: Optional[List[Path]]) -> None:
    from bench.core.registry import load_plugin

    for path in plugins or []:
        load_plugin(path)


@app.command()
@user_errors
def run(
    task: str = typer.Option("sst2", help="Task name (bench list shows them)."),
    defense: str = typer.Option("none", help="Defense name."),
    defense_args: str = typer.Option("", "--defense-args", help="Defense parameters, e.g. m=256,k=4."),
    attack: Optional[str] = typer.Option(None, help="Attack name; omit for utility only."),
    attack_args: str = typer.Option("", "--attack-args", help="Attack parameters, key=value,..."),
    encoder: str = typer.Option("minilm", help="minilm (offline), mock or mock-<d> (tests) or a hub id."),
    mode: str = typer.Option("frozen", help="frozen: cached features, head only; finetune: the encoder trains too."),
    train_args: str = typer.Option("", "--train-args", help="Server training overrides, e.g. epochs=10,lr=0.001."),
    server_args: str = typer.Option("", "--server-args", help="Server options, e.g. adapt=denoising (privacy-adaptive "
                                    "pretraining of the server's encoder; adapt_steps, adapt_lr, ...)."),
    n_train: Optional[int] = typer.Option(None, "--n-train", help="Training examples (default: the task's)."),
    n_eval: Optional[int] = typer.Option(None, "--n-eval", help="Evaluation examples (default: the task's)."),
    pooling: str = typer.Option("mean", help="Sentence representation: mean, cls or pooler."),
    seed: int = typer.Option(0, help="Seed of data sampling, mechanism randomness and training."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    precision: Optional[str] = typer.Option(None, help="fp32 (default) or bf16: mixed precision (torch.autocast) "
                                            "in the encoder's and MLMs' forward passes; with --grid it replaces the "
                                            "grid's setting. On a GPU with bf16; this CPU runs it slower."),
    grid: Optional[Path] = typer.Option(None, help="Run every cell of a grid YAML file (resumable)."),
    shard: str = typer.Option("", help="With --grid: run only shard i/n (every n-th cell from the i-th), so n "
                              "processes sharing one results folder split the grid."),
    executor: str = typer.Option("local", help="With --grid: local (this process) or ray (each cell a Ray task; "
                                 "see --address)."),
    address: Optional[str] = typer.Option(None, help="With --executor ray: auto (the cluster started on this "
                                          "machine) or HOST:PORT; left out, a small local Ray instance is started."),
    retries: int = typer.Option(2, help="With --executor ray: how many more times a failed cell is tried."),
    cell_timeout: Optional[float] = typer.Option(None, "--cell-timeout", help="With --grid: seconds after which a "
                                                 "running cell is stopped and counts as failed; the grid goes on "
                                                 "(default: no limit)."),
    claim_wait: Optional[float] = typer.Option(None, "--claim-wait", help="With --grid (local): seconds to wait for "
                                               "a cell another process is running before it counts as failed here "
                                               "(a stopped process keeps its claim; default: no limit)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --grid: list the cells, which are recorded, and an "
                                 "estimate of each one's time from past records; nothing runs."),
    check: bool = typer.Option(False, "--check", help="Smoke run in seconds: a few examples, one epoch, and what "
                               "the cell builds once (the offline MLM, pretraining, rewrites) at a smoke budget, "
                               "never used by a real run; nothing saved."),
    as_json: bool = typer.Option(False, "--json", help="Print the record as JSON instead of a table."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Report each long step (rate, "
                                            "time left) on stderr; default: on, off under --json or BENCH_QUIET."),
    save: bool = typer.Option(True, "--save/--no-save", help="Append the record to the results store."),
    reuse: bool = typer.Option(True, "--reuse/--no-reuse", help="An attack on a configuration already run reuses its "
                               "release and utility and runs the attack only (docs/release-store.md); --no-reuse "
                               "runs it in full."),
    plugin: Optional[List[Path]] = PluginOption,
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """Run one cell (or a grid) and append its record to <results>/records/<defense>.jsonl (./bench-results unless
    --results-dir or $BENCH_RESULTS_DIR says otherwise; --results-dir results adds it to the published board)."""
    from bench.core.params import parse_arg_string
    from bench.engine.reuse import reusing
    from bench.engine.provenance import check_publishable
    from bench.engine.runner import CHECK_SIZES, make_spec, run_cell
    from bench.results.release_store import ReleaseStore
    from bench.results.store import ResultStore

    _load_plugins(plugin)
    store = ResultStore(results_dir)
    releases = ReleaseStore.configured()  # a bad size limit, or a file where the store goes, is refused here
    if executor not in ("local", "ray"):
        raise BenchError(f"--executor must be local or ray, got '{executor}'.")
    if grid is None and (executor != "local" or address or dry_run or cell_timeout is not None
                         or claim_wait is not None):
        raise BenchError("--executor, --address, --cell-timeout, --claim-wait and --dry-run apply to grids; use them "
                         "with --grid.")
    if executor != "ray" and address:
        raise BenchError("--address applies to the Ray executor; add --executor ray.")
    if executor == "ray" and claim_wait is not None:
        raise BenchError("--claim-wait applies to the local executor; Ray schedules each cell once.")
    if claim_wait is not None and not claim_wait >= 0:  # also refuses nan
        raise BenchError(f"--claim-wait must be a number of seconds (0 or more), got {claim_wait}.")
    if retries < 0:
        raise BenchError(f"--retries must be at least 0, got {retries}.")
    if cell_timeout is not None and not cell_timeout > 0:  # also refuses nan
        raise BenchError(f"--cell-timeout must be a positive number of seconds, got {cell_timeout}.")
    if executor == "ray" and shard:
        raise BenchError("--shard splits a grid between local processes; the Ray executor schedules every cell "
                         "itself, so drop --shard.")
    if save and not check and not dry_run:
        store.check_writable([defense] if grid is None else [])  # before the cell runs: no result is lost
        check_publishable(store)
    reported = reporting(progress if progress is not None else False if as_json else None)
    if grid is not None:
        if check or as_json or not save:
            raise BenchError("--grid runs and saves every cell of the file; drop --check, --json and --no-save.")
        if dry_run:
            _dry_run(grid, store, shard, device, executor, precision, releases if reuse else None)
        elif executor == "ray":  # each worker runs its cells in full
            _run_grid_ray(grid, store, device, address, retries, cell_timeout, plugin, precision)
        else:
            with reusing(store, reuse, releases), reported:
                _run_grid(grid, store, shard, device, precision, cell_timeout, claim_wait)
        return
    if shard:
        raise BenchError("--shard splits a grid; use it with --grid.")
    if check:
        n_train = CHECK_SIZES["n_train"] if n_train is None else n_train
        n_eval = CHECK_SIZES["n_eval"] if n_eval is None else n_eval
        if "epochs" not in parse_arg_string(train_args):  # one epoch unless the user chose the epochs
            train_args = ",".join(filter(None, ["epochs=1", train_args]))
        server_args = _check_server_args(task, server_args)
        attack_args = _check_attack_args(attack, attack_args)
        save = False
    spec = make_spec(
        task=task, defense=defense, attack=attack, encoder=encoder, defense_args=defense_args,
        attack_args=attack_args, training_args=train_args, mode=mode, n_train=n_train, n_eval=n_eval,
        pooling=pooling, device=device, seed=seed, server_args=server_args, precision=precision or "fp32",
        smoke=check,
    )
    with reusing(store, reuse, releases), reported:
        record = run_cell(spec)
    path = store.append(record) if save else None
    try:
        if as_json:
            print(strict_json(record.model_dump(mode="json"), indent=2))  # NaN and infinity as null
            if smoke_line(record.notes) is not None:  # stdout holds the JSON alone
                err.print(plain(smoke_line(record.notes)), highlight=False, soft_wrap=True)
        else:
            _print_record(record, path)
    except Exception as exc:  # noqa: BLE001 - the record is stored: showing it must not make the user run it again
        if path is None:
            raise
        err.print(f"[yellow]warning:[/yellow] the record was appended to {plain(path)}, but printing it failed "
                  f"({plain(exc)})", highlight=False, soft_wrap=True)


def _check_server_args(task: str, server_args: str) -> str:
    """``--check``'s server options: a few steps of privacy-adaptive pretraining, or of a pretraining task's further
    pretraining (its utility task at --check's sizes), unless the user chose them (as it takes one epoch unless the
    user chose the epochs)."""
    from bench.core.params import parse_arg_string
    from bench.core.registry import TASKS
    from bench.engine.runner import CHECK_SIZES, CHECK_STEPS

    given = parse_arg_string(server_args)
    if "pretraining" in TASKS.get(task).protocols:  # and the utility task at --check's sizes
        chosen = {"pretrain_steps": CHECK_STEPS, "utility_n_train": CHECK_SIZES["n_train"],
                  "utility_n_eval": CHECK_SIZES["n_eval"]}
    else:
        chosen = {"adapt_steps": CHECK_STEPS} if given.get("adapt") else {}
    return ",".join(filter(None, [server_args, *(f"{k}={v}" for k, v in chosen.items() if k not in given)]))


def _check_attack_args(attack: str | None, attack_args: str) -> str:
    """``--check``'s attack arguments: the attack's ``check_args`` (its smoke budget), unless the user chose them."""
    from bench.core.params import parse_arg_string
    from bench.core.registry import ATTACKS

    if attack is None:
        return attack_args
    given = parse_arg_string(attack_args)
    chosen = [f"{k}={v}" for k, v in ATTACKS.get(attack).check_args.items() if k not in given]
    return ",".join(filter(None, [attack_args, *chosen]))


def _run_grid(grid: Path, store, shard: str = "", device: str = "auto", precision: str | None = None,
              cell_timeout: float | None = None, claim_wait: float | None = None) -> None:
    from bench.engine.grid import load_grid, run_grid, shard_of

    specs = load_grid(grid, device=device, precision=precision)
    if shard:
        total, specs = len(specs), shard_of(specs, shard)
        err.print(f"grid {plain(grid)}: shard {plain(shard.strip())}, {len(specs)} of {total} cells", highlight=False)
    else:
        err.print(f"grid {plain(grid)}: {len(specs)} cells", highlight=False)

    progress = _GridProgress(len(specs))

    def report(spec, status: str) -> None:
        why = " (another process is running it; looked at again after the other cells)" if status == "claimed" else ""
        err.print(f"  {status:8} {plain(spec.label())}{why}{progress.after(status)}", highlight=False, soft_wrap=True)

    def failed(spec, reason: str) -> None:
        err.print(f"           {plain(reason)}", highlight=False, soft_wrap=True)

    ran, skipped = run_grid(specs, store, report, progress.record, cell_timeout, claim_wait, failed)
    _, problems = store.read()
    for problem in problems:  # e.g. a line edited by hand while the grid ran: skipped, every other record kept
        err.print(f"[yellow]warning:[/yellow] {plain(problem)}; fix or delete that line", highlight=False,
                  soft_wrap=True)
    out.print(f"ran {ran} cells, skipped {skipped} already recorded; records in {plain(store.records_dir)}",
              highlight=False)


class _GridProgress:
    """The figures of a grid's cell lines: the cell's headline metrics and time, the cells left and the time left at
    the rate of the cells run so far (recorded cells are skipped in no time)."""

    def __init__(self, cells: int) -> None:
        self.cells, self.seen, self.ran, self.started, self.figures = cells, 0, 0, time.monotonic(), ""

    def record(self, spec, record) -> None:
        """Keep the finished cell's figures for its line: the task's headline metric and the attack's, beside its
        random guess."""
        from bench.results.views import short

        shown = []
        for key, value in record.metrics.items():
            if key.startswith("utility/") and not any(s.startswith("utility/") for s, _ in shown):
                shown.append((key, f"{short(key)} {value:.3f}"))
            elif key.startswith("privacy/") and not any(s.startswith("privacy/") for s, _ in shown):
                guess = record.metrics.get("random/" + key.split("/", 1)[1])
                shown.append((key, f"{key.split('/')[1]} {short(key)} {value:.3f}"
                                   + ("" if guess is None else f" (random {guess:.3f})")))
        self.figures = ", ".join(text for _, text in shown) + f", {record.runtime_s:.0f} s"
        self.ran += 1

    def after(self, status: str) -> str:
        """The end of a cell's line: its figures, then how many cells are left and the time left."""
        if status == "claimed":
            return ""
        self.seen += 1
        left = self.cells - self.seen
        parts = [self.figures] if status == "done" and self.figures else []
        self.figures = ""
        elapsed = time.monotonic() - self.started
        pace = f", about {_minutes(elapsed / self.ran * left)} left" if self.ran and left else ""
        parts.append(f"{self.seen} of {self.cells} cells{pace}")
        return " · " + " · ".join(parts)


def _minutes(seconds: float) -> str:
    """``12 min``, ``2.5 h`` or ``40 s``."""
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min" if seconds >= 90 else \
        f"{seconds:.0f} s"


def _run_grid_ray(grid: Path, store, device: str, address, retries: int, cell_timeout, plugins,
                  precision: str | None = None) -> None:
    from bench.engine.grid import grid_resources, load_grid
    from bench.engine.ray_executor import require_ray, run_grid_ray

    require_ray()  # before the grid is read: one sentence where Ray is not installed
    specs = load_grid(grid, device=device, here=False, precision=precision)
    resources = grid_resources(grid)
    need = ", ".join(f"{k} {v:g}" for k, v in resources.items() if v)
    err.print(f"grid {plain(grid)}: {len(specs)} cells on Ray, each asking for {need}", highlight=False)

    def report(cell) -> None:
        where = f" on {cell.where}" if cell.where else ""
        tries = f" (try {cell.attempts})" if cell.attempts > 1 else ""
        why = f": {cell.error}" if cell.error else ""
        if cell.status == "claimed":
            why = " (another process is running it; looked at again after the other cells)"
        err.print(f"  {cell.status:8} {plain(cell.spec.label())}{where}{tries}{plain(why)}", highlight=False,
                  soft_wrap=True)

    summary = run_grid_ray(specs, store, address, resources, retries, plugins or [], report, cell_timeout)
    for node, (count, seconds) in summary.by_node().items():
        err.print(f"  node {plain(node)}: {count} cells, {seconds:.1f} s of cell time", highlight=False)
    ran, skipped = summary.count("done"), summary.count("skipped")
    failed = [cell for cell in summary.cells if cell.status == "failed"]
    if failed:
        first = failed[0]
        raise BenchError(f"{len(failed)} of {ran + len(failed)} cells run on {summary.cluster} failed (first: "
                         f"{first.spec.label()} after {first.attempts} tries: {first.error.rstrip('.')}); no record "
                         f"was written for {'it' if len(failed) == 1 else 'them'}, {ran} other cells were recorded in "
                         f"{store.records_dir} (run the grid again to retry).")
    where = f" on {summary.cluster}" if summary.cluster else ""
    out.print(f"ran {ran} cells{where}, skipped {skipped} already recorded; records in {plain(store.records_dir)}",
              highlight=False)


def _dry_run(grid: Path, store, shard: str, device: str, executor: str, precision: str | None = None,
             releases=None) -> None:
    from bench.engine.grid import estimate_cells, grid_resources, load_grid, shard_of
    from bench.engine.reuse import RecordIndex, plan

    # nothing runs: a grid that asks for GPUs is planned as its GPU machines will run it, whatever this one has
    here = executor == "local" and not grid_resources(grid)["num_gpus"]
    specs = load_grid(grid, device=device, here=here, precision=precision)
    if shard:
        specs = shard_of(specs, shard)
    records = store.read()[0]
    local = executor == "local" and releases is not None  # Ray workers run every cell in full
    index = RecordIndex(records) if local else None
    rows = estimate_cells(specs, records, (lambda spec: plan(spec, index, releases)) if local else None)
    devices = ", ".join(sorted({str(spec.device) for spec in specs}))
    table = Table(title=f"{plain(grid)}: {len(specs)} cells on {devices} (dry run, nothing runs)", title_justify="left")
    for column in ("cell", "status", "runs", "estimate", "from"):
        table.add_column(column, justify="right" if column == "estimate" else "left")
    for row in rows:
        estimate = "?" if row.seconds is None else f"{row.seconds:.1f} s {row.device}"
        runs = "" if row.status != "to run" else f"attack only ({row.reuse})" if row.reuse else "in full"
        table.add_row(plain(row.spec.label()), row.status, plain(runs), estimate, plain(row.basis))
    (out if out.is_terminal else Console(width=200)).print(table)
    todo = [row for row in rows if row.status == "to run"]
    known = [row.seconds for row in todo if row.seconds is not None]
    unknown = len(todo) - len(known)
    reused = sum(1 for row in todo if row.reuse)
    out.print(f"{len(todo)} cells to run" + (f" ({reused} attack only)" if reused else "") + f", "
              f"{len(rows) - len(todo)} already recorded; estimated {sum(known):.0f} s of cell time for {len(known)} "
              f"of them" + (f", no past record for {unknown}" if unknown else ""), highlight=False)


def _print_record(record, path) -> None:
    table = Table(title=plain(f"{record.spec['task']} · {record.spec['defense']} · "
                              f"{record.spec['attack'] or 'no attack'}"))
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("random guess", justify="right")
    for key, value in record.metrics.items():
        if key.startswith("random/"):
            continue
        reference = record.metrics.get("random/" + key.split("/", 1)[1]) if key.startswith("privacy/") else None
        table.add_row(plain(key), f"{value:.4f}", "" if reference is None else f"{reference:.4f}")
    out.print(table)
    args = plain(",".join(f"{k}={v}" for k, v in record.spec["defense_args"].items()))
    out.print(
        f"defense args: {args or '-'} · n_train {_size(record, 'n_train')} · n_eval {_size(record, 'n_eval')} · "
        f"seed {record.seed} · {record.runtime_s:.1f} s · config {record.config_hash}",
        highlight=False,
    )
    budget = smoke_line(record.notes)
    if budget is not None:
        out.print(plain(budget), highlight=False, soft_wrap=True)
    if path is not None:
        out.print(f"record appended to {plain(path)}", highlight=False)


def _size(record, name: str) -> str:
    """The examples a cell used, and the number asked for when it got fewer than a size other than the task's
    default asked for (a split smaller than asked caps it; the defaults are "up to")."""
    from bench.core.registry import TASKS

    used, asked = record.sizes[name], record.spec.get(name)
    default = getattr(TASKS.get(record.spec["task"]), f"default_{name}", None)
    capped = isinstance(asked, int) and asked > used and asked != default
    return f"{used} (of {asked} asked)" if capped else f"{used}"


@app.command("list")
@user_errors
def list_components(plugin: Optional[List[Path]] = PluginOption) -> None:
    """Show tasks, defenses and attacks with their parameters, and the pairs that can run."""
    from bench.core.params import describe_parameters
    from bench.core.registry import ATTACKS, DEFENSES, TASKS

    from bench.models.encoders import ENCODER_NAMES

    from rich.markup import escape

    _load_plugins(plugin)
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
    from bench.core.releases import ReleaseKind
    from bench.engine.paths import released_kinds, rewrites_text

    on_weights = [a for a in ATTACKS.names() if ReleaseKind.MODEL in ATTACKS.get(a).accepts]
    for name in DEFENSES.names():
        releases = released_kinds(DEFENSES.get(name))  # text defenses also guard a prediction API's training data
        ok = [a for a in ATTACKS.names() if any(k in ATTACKS.get(a).accepts for k in releases)]
        if on_weights and rewrites_text(DEFENSES.get(name)):  # the weights a pretraining task releases
            ok.append(f"({', '.join(on_weights)} on pretraining tasks)")
        pairs.add_row(escape(name), escape(", ".join(ok) or "-"))
    out.print(pairs)


def _task_settings(cls: type) -> str:
    """What a task fixes for its cells, one per line: its sizes (--n-train, --n-eval), whether its server predicts
    original evaluation data, its sensitive span kinds, the task that scores a released model, its server's
    training defaults (--train-args overrides them)."""
    def kinds(names) -> str:
        return "+".join(names) if len(names) <= 6 else "+".join(names[:5]) + f"+... ({len(names)} kinds)"

    lines = [f"n_train={cls.default_n_train}, n_eval={cls.default_n_eval}  # examples, up to (--n-train, --n-eval)"]
    if getattr(cls, "evaluate_on", "released") == "original":  # a TokenTask's
        lines.append("evaluate_on='original'  # only the training split is privatized")
    if getattr(cls, "span_kinds", ()):  # a SpanTask's
        lines.append(f"spans: {kinds(cls.span_kinds)}  # what span defenses rewrite (kinds=)")
    if getattr(cls, "utility_task", ""):  # a PretrainingTask's
        lines.append(f"utility_task={cls.utility_task!r}  # scores the released model")
    if getattr(cls, "attributes", ()):  # an ApiTask's
        lines.append(f"attributes: {'+'.join(cls.attributes)}  # what attribute inference targets")
    if cls.training_defaults:
        lines.append("training: " + ",".join(f"{k}={v}" for k, v in cls.training_defaults.items()))
    return "\n".join(lines)


def _defense_kinds(cls: type) -> str:
    """A defense's release kinds as pairing sees them: its own, then those it yields through another protocol."""
    from bench.core.releases import ReleaseKind
    from bench.engine.paths import released_kinds, rewrites_text

    own = ", ".join(str(k) for k in cls.releases)
    extra = [f"{k} (a prediction API's training data)" for k in released_kinds(cls) if k not in cls.releases]
    lines = [own, *(f"+ {e}" for e in extra)]
    if rewrites_text(cls):
        lines.append(f"on pretraining tasks: {ReleaseKind.MODEL} only")
    return "\n".join(lines)


@app.command()
@user_errors
def summarize(results_dir: Optional[Path] = ResultsOption) -> None:
    """Aggregate records over seeds (mean, std, n) into <results>/leaderboard.csv."""
    import pandas as pd

    from bench.results.leaderboard import summarize as write_leaderboard
    from bench.results.store import ResultStore

    store = ResultStore(results_dir)
    store.check_exists()  # a mistyped folder gets one sentence, not an empty folder and CSV
    path, rows, problems = write_leaderboard(store)
    for problem in problems:
        err.print(f"[yellow]warning:[/yellow] {plain(problem)}", highlight=False, soft_wrap=True)
    board = pd.read_csv(path, keep_default_na=False)
    for column in ("mean", "std"):  # a NaN metric is written as an empty field and shown as nan
        board[column] = pd.to_numeric(board[column].replace("", float("nan")), errors="coerce")
    if not board.empty:
        (out if out.is_terminal else Console(width=200)).print(_summary_table(board))
    out.print(f"wrote {rows} rows to {plain(path)}", highlight=False)


@app.command()
@user_errors
def backfill(results_dir: Optional[Path] = ResultsOption) -> None:
    """Bring records made by older runners up to what the runner records today, values untouched: add the
    majority-class reference (notes.majority_utility), recomputed from each cell's data with its data hash checked,
    and list each attack's metrics in its declared order (headline first, what readers rank by)."""
    from bench.engine.backfill import backfill_majority, order_attack_metrics
    from bench.results.store import ResultStore

    store = ResultStore(results_dir)
    store.check_exists()
    store.check_writable()
    majority = backfill_majority(store.records_dir)
    ordered = order_attack_metrics(store.records_dir)
    for report, what in ((majority, "majority reference"), (ordered, "metric order")):
        for reason, count in sorted(report.skipped.items()):
            err.print(f"  {what}: left {count} record(s) as they were: {plain(reason)}", highlight=False)
    out.print(f"added the majority-class reference to {majority.updated} record(s) and put the attack metrics of "
              f"{ordered.updated} in declared order in {plain(store.records_dir)}", highlight=False)


def _summary_table(board) -> Table:
    """One row per configuration (mean ± std over seeds), then the random guess of each attack, per encoder,
    evaluation size and attack setting; a train / eval column where the board's cells differ in size. Every cell
    is printed literally (``plain``): record fields may hold Rich markup."""
    from bench.results.views import size_labels, sizes_differ

    table = Table(title="means ± std over seeds", title_justify="left")
    metrics = sorted({m for m in board["metric"] if m.startswith("utility/")})
    metrics += sorted({m for m in board["metric"] if m.startswith("privacy/")})
    sized = sizes_differ(board)  # cells of different sizes meet: each row says its own
    for column in ["task", "defense", "attack", *(["train / eval"] if sized else []), "seeds",
                   *(m.rsplit("/", 1)[-1] for m in metrics)]:
        table.add_column(column, no_wrap=True)
    for (task, attack), group in board.groupby(["task", "attack"], sort=True):
        # a random guess is pooled only over configurations scored on the same data with the same attack and encoder
        labels = ["encoder", "n_eval", "attack_args"]
        varying = [k for k in labels if group[k].nunique(dropna=False) > 1]  # what a guess row's label names
        for setting_values, setting in group.groupby(labels, sort=True, dropna=False):
            named = dict(zip(labels, setting_values))
            for _, config in setting.groupby("config_hash", sort=False):
                values = config.set_index("metric")
                first = config.iloc[0]
                name = f"{first['defense']}({first['defense_args']})" if first["defense_args"] else first["defense"]
                cells = [
                    f"{values.at[m, 'mean']:.3f}±{values.at[m, 'std']:.3f}" if m in values.index else ""
                    for m in metrics
                ]
                size = size_labels(config.iloc[:1])[0] if sized else None
                table.add_row(*(plain(c) for c in (task, name, attack or "-", *([size] if sized else []),
                                                   str(int(config["n"].max())), *cells)))
            random = setting[setting["metric"].str.startswith("random/")].groupby("metric")["mean"].mean()
            if not random.empty:
                keys = ["random/" + m.split("/", 1)[1] for m in metrics]
                cells = [f"{random[k]:.3f}" if k in random.index else "" for k in keys]
                differ = [f"n_eval {named[k]}" if k == "n_eval" else str(named[k]) for k in varying]
                label = f"random guess ({', '.join(differ)})" if differ else "random guess"
                table.add_row(*(plain(c) for c in (task, label, attack, *([""] if sized else []), "", *cells)),
                              style="dim")
    return table


@app.command()
@user_errors
def dashboard(
    port: int = typer.Option(8501, help="Port on 127.0.0.1 (1-65535)."),
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """Start the Streamlit leaderboard on 127.0.0.1: your runs (--results-dir, $BENCH_RESULTS_DIR or ./bench-results)
    and the published results/ of this checkout, switched in its sidebar or shown side by side."""
    if not 1 <= port <= 65535:
        raise BenchError(f"--port must be between 1 and 65535, got {port}.")
    app_path = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
    env = dict(os.environ)
    if results_dir is not None:
        from bench.results.store import ResultStore

        env["BENCH_RESULTS_DIR"] = str(ResultStore(results_dir).root.resolve())  # an empty --results-dir refused
    command = [sys.executable, "-m", "streamlit", "run", str(app_path), "--server.address", "127.0.0.1",
               "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
               "--client.toolbarMode", "viewer"]  # a local board: no "Deploy" button or developer menu
    raise typer.Exit(_run_forwarding_signals(command, env))


def _run_forwarding_signals(command: list[str], env: dict) -> int:
    """Run a child process; SIGTERM, SIGINT and SIGHUP to this process go to the child, which is then waited for
    (so stopping ``bench dashboard`` never leaves the server running)."""
    import signal

    child = subprocess.Popen(command, env=env)
    forwarded = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])

    def forward(signum, _frame):
        if child.poll() is None:
            child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in forwarded}
    try:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:  # only if SIGINT arrived before the handler was installed
                forward(signal.SIGINT, None)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child.poll() is None:
            child.kill()
            child.wait()


@app.command()
@user_errors
def perf(
    sentences: int = typer.Option(2000, help="SST-2 training sentences in the fixed batch."),
    repeats: int = typer.Option(3, help="Timed calls per mechanism; the median is reported."),
    defense: Optional[List[str]] = typer.Option(
        None, "--defense", help="Mechanism to time (repeatable; default: every registered mechanism)."),
    defense_args: str = typer.Option("", "--defense-args", help="Parameters of the one --defense, e.g. eta=60."),
    encoder: str = typer.Option("minilm", help="minilm (offline) or a Hugging Face hub id."),
    seed: int = typer.Option(0, help="Seed of the batch sample and of the mechanisms' randomness."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the figures to this JSON file."),
    adaptation: bool = typer.Option(False, "--adaptation", help="Time privacy-adaptive MLM pretraining instead: "
                                    "sequences/s and the mechanism's share of a step, per mechanism and objective."),
    objective: Optional[List[str]] = typer.Option(
        None, "--objective", help="With --adaptation: vanilla, prob or denoising (repeatable; default all three)."),
    steps: int = typer.Option(10, help="With --adaptation: timed pretraining steps."),
    warmup: int = typer.Option(1, help="With --adaptation: untimed steps first (SanText's row cache fills)."),
    batch_size: int = typer.Option(16, "--batch-size", help="With --adaptation: sequences per step."),
    ndd: bool = typer.Option(False, "--ndd", help="Time the NDD metric instead: candidates scored per second on "
                             "CoNLL-03, batched against the plain loop."),
    ndd_sentences: int = typer.Option(200, "--ndd-sentences", help="With --ndd: sentences scored batched."),
    ndd_loop_sentences: int = typer.Option(10, "--ndd-loop-sentences",
                                           help="With --ndd: the first sentences also scored by the plain loop."),
    candidates: int = typer.Option(8, "--candidates", help="With --ndd: same-type replacements per entity (k)."),
    ndd_mu: float = typer.Option(0.5, "--ndd-mu", help="With --ndd: the weights' decay mu (the ndd defense's "
                                 "default is 0.9)."),
    ndd_bf16: bool = typer.Option(False, "--ndd-bf16", help="With --ndd: also time the selection under bf16 "
                                  "autocast (a cell's --precision bf16) and count its float32-argmin agreement."),
    plugin: Optional[List[Path]] = PluginOption,
) -> None:
    """Time each mechanism (tokens/s) against the float32 matrix-product ceiling of exact search."""
    from bench.analysis.perf import perf_table, run_perf, write_json
    from bench.core.files import output_file

    _load_plugins(plugin)
    if json_path is not None:
        output_file(json_path, "--json")  # before the timing, which a bad path would otherwise lose
    if ndd:
        _perf_ndd(encoder, ndd_sentences, ndd_loop_sentences, candidates, ndd_mu, seed, json_path, ndd_bf16)
        return
    if adaptation:
        _perf_adaptation(defense, objective, defense_args, steps, warmup, batch_size, encoder, seed, json_path)
        return
    report = run_perf(sentences, repeats, defense, defense_args, encoder, seed,
                      progress=lambda message: err.print(f"[dim]{message}…[/dim]"))
    (out if out.is_terminal else Console(width=160)).print(perf_table(report))
    if json_path is not None:
        write_json(report, json_path)
        out.print(f"wrote {json_path}", highlight=False)


def _perf_ndd(encoder, sentences, loop_sentences, candidates, mu, seed, json_path, bf16=False) -> None:

    from bench.analysis.ndd_perf import ndd_table, run_ndd_perf
    from bench.core.files import write_text_atomic

    row = run_ndd_perf(encoder, sentences, loop_sentences, candidates, mu=mu, seed=seed, selection_bf16=bf16,
                       progress=lambda message: err.print(f"[dim]{message}…[/dim]"))
    (out if out.is_terminal else Console(width=160)).print(ndd_table(row))
    if json_path is not None:
        write_text_atomic(json_path, strict_json(row, indent=2, default=str))
        out.print(f"wrote {json_path}", highlight=False)


def _perf_adaptation(defense, objective, defense_args, steps, warmup, batch_size, encoder, seed, json_path) -> None:

    from bench.analysis.adaptation_perf import adaptation_table, run_adaptation_perf
    from bench.analysis.perf import machine_info
    from bench.core.files import write_text_atomic

    rows = run_adaptation_perf(defense, objective, defense_args, steps, batch_size, encoder, seed, warmup,
                               progress=lambda message: err.print(f"[dim]{message}…[/dim]"))
    (out if out.is_terminal else Console(width=160)).print(adaptation_table(rows))
    if json_path is not None:
        write_text_atomic(json_path, strict_json({"machine": machine_info(), "encoder": encoder, "rows": rows},
                                                 indent=2, default=str))
        out.print(f"wrote {json_path}", highlight=False)


@app.command("check-plugin")
@user_errors
def check_plugin(file: Path = typer.Argument(..., help="Component file to check (as passed to --plugin).")) -> None:
    """Check every component a file registers against the component contract (bench.engine.contracts)."""
    from bench.engine.contracts import check_file

    warnings: dict[str, list[str]] = {}
    results = check_file(file, warnings)
    if not results:
        raise BenchError(f"{file} registers no defense, attack or task; decorate a class with register_defense, "
                         "register_attack or register_task.")
    for component, problems in results.items():
        status = "[green]passes[/green]" if not problems else f"[red]{len(problems)} problem(s)[/red]"
        out.print(f"[bold]{plain(component)}[/bold]: {status}")
        for problem in problems:
            out.print(f"  [red]✗[/red] {plain(problem)}", highlight=False, soft_wrap=True)
        for warning in warnings.get(component, []):
            out.print(f"  [yellow]warning:[/yellow] {plain(warning)}", highlight=False, soft_wrap=True)
    failing = {c: p for c, p in results.items() if p}
    if failing:
        details = "; ".join(f"{c}: {', '.join(p)}" for c, p in failing.items())
        raise BenchError(f"{len(failing)} of {len(results)} components in {file} fail the contract ({details}).")


@app.command("new")
@user_errors
def new_component(
    kind: str = typer.Argument(..., help="defense, attack or task."),
    name: str = typer.Argument(..., help="Registry name, e.g. my-defense (the file is my_defense.py)."),
    folder: Optional[Path] = typer.Option(None, "--dir", help="Folder to write into (default: defenses/, attacks/ "
                                          "or tasks/ under the current directory)."),
) -> None:
    """Write a one-file template of a new component that passes `bench check-plugin`."""
    from bench.engine.templates import write_template

    path = write_template(kind, name, folder)
    out.print(f"wrote {plain(path)}; check it with: bench check-plugin {plain(path)}", highlight=False, soft_wrap=True)


def _read_records(results_dir: Optional[Path]):
    """The store and records a reading command reads (the one rule: ``--results-dir``, else ``$BENCH_RESULTS_DIR``,
    else ./bench-results); unreadable lines warned. The reference tables and their mappings are read from the
    folder when it has them, else from the published ``results/`` (``bench.analysis.reproduce.definitions``). A
    record made at the smoke budget (``--check``) is never among them."""
    from bench.results.store import ResultStore

    store = ResultStore(results_dir)
    store.check_exists()
    records, problems = store.read()
    for problem in problems:
        err.print(f"[yellow]warning:[/yellow] {plain(problem)}", highlight=False, soft_wrap=True)
    return store, [r for r in records if not r.at_smoke_budget]


@app.command()
@user_errors
def reproduce(
    table: Optional[str] = typer.Argument(None, help="Reference table (a results/reference/*.json stem); omit to "
                                          "list the tables and how many of their cells we have records for."),
    run_missing: bool = typer.Option(False, "--run", help="First run the table's cells without records, at the "
                                     "offline defaults of its mapping (slow); without it nothing runs."),
    recorded: bool = typer.Option(False, "--recorded", help="Print only the rows we have records for."),
    as_markdown: bool = typer.Option(False, "--markdown", help="Print the rows we have records for and the claims "
                                     "as Markdown tables (for the README and docs)."),
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """A paper's table beside our records (mean ± std over seeds, n), with a verdict on each of its claims;
    writes results/reproduction/<table>.json for the dashboard."""
    from bench.analysis import reproduce as rep

    if table is not None:
        rep.report_path(Path("."), table)  # a name that could write outside reproduction/ is refused first
    store, records = _read_records(results_dir)
    console = out if out.is_terminal else Console(width=int(os.environ.get("COLUMNS") or 200))
    if table is None:
        if run_missing:
            raise BenchError("--run needs a TABLE: name the table whose missing cells should run.")
        console.print(_coverage_table(rep.coverage(store.root, records)))
        return
    output_file(rep.report_path(store.root, table), "reproduction report")  # before any work
    if run_missing:
        from bench.engine.provenance import check_publishable

        store.check_writable()
        check_publishable(store)
        _run_missing(rep, store, table, records)
        records = [r for r in store.read()[0] if not r.at_smoke_budget]
    report = rep.reproduce(store.root, table, records)
    path = rep.write_report(store.root, report)
    if as_markdown:
        print(rep.markdown(report), end="")
        return
    _print_reproduction(console, report, recorded)
    out.print(f"wrote {path}", highlight=False)


@app.command()
@user_errors
def report(
    out_path: Optional[Path] = typer.Option(None, "--out", help="Markdown file to update: the text between its "
                                            "'bench report' markers is replaced, the rest kept (default: print)."),
    pages: Optional[Path] = typer.Option(None, "--pages", help="Folder to write the board into as pages: index.md, "
                                         "one <task>.md per task, and reproduction/ with the papers' tables (from "
                                         "<results>/reproduction/*.json); pages it wrote before and no longer "
                                         "writes are removed."),
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """Print the ranked privacy-utility tables of every task and attack from the records (Markdown), or write them as
    pages: bench report --results-dir results --pages docs/results regenerates the docs' results pages."""
    from bench.core.files import output_file, read_utf8, write_text_atomic
    from bench.results.leaderboard import aggregate, seed_frame
    from bench.results.views import majority_by_config, splice
    from bench.results.views import report as render

    if out_path is not None and pages is not None:
        raise BenchError("--out and --pages write different things; give one of them.")
    if out_path is not None:
        output_file(out_path, "--out")
    store, records = _read_records(results_dir)
    if not records:
        raise BenchError(f"no records in {store.records_dir}: run `bench run ...` first.")
    source = store.root.as_posix() if store.root.is_absolute() else f"{store.root.as_posix()}/"
    if pages is not None:
        command = " ".join(["bench report", *([f"--results-dir {results_dir.as_posix()}"] if results_dir else []),
                            f"--pages {pages.as_posix()}"])
        written = write_pages(records, store.root, source, command, pages)
        out.print(f"wrote {written} pages of {len(records)} records to {plain(pages)}", highlight=False)
        return
    board = aggregate(seed_frame(records), with_order=True)
    text = render(board, source, majority_by_config((r.config_hash, r.notes) for r in records))
    if out_path is None:
        print(text, end="")
        return
    document = read_utf8(out_path) if out_path.is_file() else ""
    write_text_atomic(out_path, splice(document, text))
    out.print(f"wrote {len(records)} records' tables to {plain(out_path)}", highlight=False)


def write_pages(records, root: Path, source: str, command: str, folder: Path) -> int:
    """Write the board of ``records`` as pages into ``folder`` (with the known-limits page) and the reproduction
    reports' into ``folder/reproduction``; remove the pages an earlier run wrote there that this one does not.
    Returns how many pages were written."""
    import json
    from collections import Counter

    import yaml

    from bench.analysis.deniability import deniability_markdown
    from bench.analysis.reproduce import definitions, reproduction_pages
    from bench.core.files import read_utf8, write_text_atomic
    from bench.core.spec import RunSpec
    from bench.engine.runner import component_versions
    from bench.results import limits
    from bench.results.leaderboard import aggregate, seed_frame
    from bench.results.record import superseded
    from bench.results.views import GENERATED, majority_by_config, report_pages

    board = aggregate(seed_frame(records), with_order=True)
    majority = majority_by_config((r.config_hash, r.notes) for r in records)
    known = limits.components()
    awaiting = Counter()
    stale = [bool(superseded(r)) for r in records]
    kept = {(r.config_hash, r.seed) for r, old in zip(records, stale) if not old}
    for record, old in zip(records, stale):
        if old and not record.at_smoke_budget and (record.config_hash, record.seed) not in kept:
            was, now = record.component_versions().split(" "), component_versions(RunSpec.from_dict(record.spec))
            moved = [(a, b) for a, b in zip(was, now.split(" ")) if a != b]
            awaiting[(record.spec["task"], record.spec["defense"], record.spec.get("attack") or "",
                      ", ".join(f"{a} → {b.rpartition('@')[2]}" for a, b in moved))] += 1

    reports = [json.loads(read_utf8(path)) for path in sorted((root / "reproduction").glob("*.json"))]
    unmapped = {}
    for path in sorted((definitions(root) / "reproduction").glob("*.yaml")):
        mapping = yaml.safe_load(read_utf8(path)) or {}
        if isinstance(mapping, dict) and mapping.get("not_mapped"):
            unmapped[path.stem] = str(mapping["not_mapped"])
    reproduced = reproduction_pages(reports, source, command, unmapped) if reports else {}
    generated = report_pages(board, source, command, majority, known)
    generated[limits.PAGE] = limits.page(command, known, awaiting)
    analyses = sorted((root / "analysis").glob("deniability-*.json"))
    if analyses:
        generated["deniability.md"] = "\n".join([
            GENERATED, "# Plausible deniability", "",
            f"Printed by `{command}` from the reports of `bench analyze deniability` in `{source}analysis/`. Per "
            "token, N_w counts the releases equal to the token (small is deniable) and S_w the distinct releases "
            "(large is deniable), after Qu et al. (CIKM 2021, §5.3) and Feyisetan et al. (WSDM 2020).", "",
            *(deniability_markdown(json.loads(read_utf8(path)), f"{source}analysis/{path.name}")
              for path in analyses)]).rstrip() + "\n"
    written = 0
    for where, generated in ((folder, generated), (folder / "reproduction", reproduced)):
        if where.exists() and not where.is_dir():
            raise BenchError(f"--pages {where} is a file; name a folder.")
        where.mkdir(parents=True, exist_ok=True)
        for stale in sorted(where.glob("*.md")):
            if stale.name not in generated and read_utf8(stale).startswith(GENERATED):
                stale.unlink()
        for name, text in generated.items():
            write_text_atomic(where / name, text)
            written += 1
    return written


def _run_missing(rep, store, table: str, records) -> None:
    from bench.engine.grid import run_grid
    from bench.engine.runner import make_spec

    cells = rep.missing_cells(store.root, table, records)
    specs = []
    for kwargs in cells:
        try:
            specs.append(make_spec(**kwargs))
        except BenchError as exc:
            err.print(f"[yellow]skipped[/yellow] {kwargs}: {exc}", highlight=False, soft_wrap=True)
    err.print(f"{table}: {len(specs)} missing cells to run")
    ran, skipped = run_grid(specs, store, lambda spec, status: err.print(f"  {status:8} {spec.label()}",
                                                                          highlight=False))
    err.print(f"ran {ran} cells, skipped {skipped} already recorded")


def _coverage_table(rows) -> Table:
    from bench.analysis.reproduce import VERDICTS

    table = Table(title="reference tables and our records", title_justify="left")
    for column in ("table", "status", "rows with records", "cells used", "claims: " + " / ".join(VERDICTS)):
        table.add_column(column)
    for row in rows:
        if row["status"] != "mapped":
            table.add_row(row["table"], row["status"], "", "", row.get("reason", ""))
            continue
        claims = row["claims"]
        table.add_row(row["table"], "mapped", f"{row['rows_with_records']} / {row['rows']}", str(row["cells"]),
                      " / ".join(str(claims.get(verdict, 0)) for verdict in VERDICTS))
    return table


def _fmt(value, std=None, n=None) -> str:
    if value is None:
        return "-"
    text = f"{value:.3f}" + (f" ± {std:.3f}" if std is not None else "")
    return text + (f" (n={n})" if n is not None else "")


def _print_reproduction(console: Console, report: dict, recorded: bool) -> None:
    from collections import Counter

    from bench.analysis import reproduce as rep

    verdict_style = {"holds": "green", "fails": "red", "unresolved": "magenta", "not applicable": "cyan",
                     "no records": "yellow"}
    console.print(f"[bold]{report['title']}[/bold]  ({report['paper_table']}, {report['reference']})", highlight=False)
    for side, setting in (("paper", report["paper_setting"]), ("ours", report["our_setting"])):
        if setting:
            console.print(f"  {side}: " + " · ".join(f"{k} {v}" for k, v in setting.items()), highlight=False)
    for deviation in report["deviations"]:
        console.print(f"  [dim]deviation: {deviation}[/dim]", highlight=False)
    def where(ours) -> str:
        setting = ours["setting"]
        if not setting:
            return ""
        return (f"{setting['encoder']} · n_train {setting['n_train']} · {setting['mode']} · {setting['epochs']} epochs "
                f"· seeds {','.join(map(str, ours['seeds']))}")

    settings = Counter(where(row["ours"]) for row in report["rows"] if row["ours"]["mean"] is not None)
    common = settings.most_common(1)[0][0] if settings else ""
    if common:
        console.print(f"  our records (unless a row says otherwise): {common}", highlight=False)
    table = Table(title_justify="left")
    for column in ("row", "metric", "paper", "ours (mean ± std, n)", "ours - paper", "note"):
        table.add_column(column, no_wrap=column != "note")
    for row in report["rows"]:
        ours = row["ours"]
        if recorded and ours["mean"] is None:
            continue
        setting = where(ours)
        table.add_row(row["id"], row["metric"].rsplit("/", 1)[-1], _fmt(row["paper"]["value"], row["paper"]["std"]),
                      _fmt(ours["mean"], ours["std"], ours["n"]) if ours["mean"] is not None else "no records",
                      "" if row["difference"] is None else f"{row['difference']:+.3f}",
                      "; ".join(filter(None, [setting if setting != common else "", ours["note"]])))
    console.print(table)
    claims = Table(title="claims (checked on our records; 'paper' = the same checks on the paper's numbers)",
                   title_justify="left")
    for column in ("claim", "ours", "paper", "checks"):
        claims.add_column(column, no_wrap=column in ("ours", "paper"))
    for claim in report["claims"]:
        checked, idle = rep.check_counts(claim)
        failing = [c["detail"] for c in claim["checks"] if c["verdict"] == "fails"][:3]
        open_ = [c["detail"] for c in claim["checks"] if c["verdict"] == rep.UNRESOLVED][:2]
        detail = (f"{checked}/{len(claim['checks'])} checked" + (f", {idle} at chance (not applicable)" if idle else "")
                  + ("; failing: " + "; ".join(failing) if failing else "")
                  + (f"; {len(open_)} unresolved by the seeds: " + "; ".join(open_) if open_ else ""))
        claims.add_row(f"{claim['id']}\n[dim]{claim['text']}[/dim]",
                       f"[{verdict_style[claim['verdict']]}]{claim['verdict']}[/]",
                       claim["paper_verdict"] if claim["paper_verdict"] != "no records" else "n/a", detail)
    console.print(claims)
    summary = report["summary"]
    console.print(f"{summary['rows_with_records']} of {summary['rows']} rows have records; claims: "
                  + ", ".join(f"{n} {v}" for v, n in summary["claims"].items()), highlight=False)


analyze = typer.Typer(no_args_is_help=True, help="Analyses of the privacy mechanisms themselves (no task, no server).")
app.add_typer(analyze, name="analyze")


@analyze.command("deniability")
@user_errors
def deniability(
    encoder: str = typer.Option("minilm", help="Encoder whose WordPiece table is perturbed (minilm or a hub id)."),
    mechanism: str = typer.Option("dchi-text", help="Token mechanism: dchi-text or santext."),
    tokens: str = typer.Option("200", help="Regular vocabulary tokens to perturb: a seeded sample size, or 'all'."),
    trials: int = typer.Option(1000, help="Perturbations of each token at each eta (T)."),
    eta: Optional[List[float]] = typer.Option(
        None, "--eta", help="Privacy parameter: eta for dchi-text, eps for santext (repeatable; default: the "
        "mechanism's grid, 30 45 60 80 100 120 160 for dchi-text, 4 7 10 14 20 30 40 for santext)."),
    seed: int = typer.Option(0, help="Seed of the token sample and of the mechanism's noise."),
    max_unchanged: float = typer.Option(0.5, "--max-unchanged", help="Selection bound: N_w/T at most this "
                                        "(0.5: modified at least 500 times in 1,000, Qu et al. §5.3)."),
    min_support: int = typer.Option(1, "--min-support", help="Selection bound: S_w at least this (1: no bound, as "
                                    "Qu et al.)."),
    quantile: float = typer.Option(
        1.0, help="Worst case: this quantile of N_w/T and the (1 - quantile) quantile of S_w meet the bounds (1: "
        "every token, as Qu et al.)."),
    merge: bool = typer.Option(
        False, "--merge", help="Add these etas to the existing report of the same run (same encoder, mechanism, "
        "tokens, T, seed and bounds) instead of replacing it; the selections are redone over all its etas."),
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """Plausible deniability: N_w (outputs equal to the token) and S_w (distinct outputs) per token and eta."""
    from bench.analysis.deniability import (
        DEFAULT_PARAMETERS,
        Thresholds,
        deniability_table,
        load_mergeable,
        merge_reports,
        parse_token_count,
        planned_identity,
        report_path,
        run_deniability,
        selection_lines,
        validate,
        write_report,
    )
    from bench.results.store import ResultStore

    count = parse_token_count(tokens)
    bounds = Thresholds(max_unchanged=max_unchanged, min_support=min_support, quantile=quantile)
    etas = list(eta) if eta else list(DEFAULT_PARAMETERS.get(mechanism, ()))
    validate(etas, trials, mechanism, bounds)  # before the encoder loads
    path = output_file(report_path(ResultStore(results_dir).root, encoder, mechanism, count is None),
                       "deniability report")  # before the work, so it is never lost to an unwritable folder
    earlier = load_mergeable(path, planned_identity(encoder, mechanism, count, trials, seed, bounds)) if merge else None
    report = run_deniability(encoder, mechanism, count, trials, etas, seed, bounds,
                             log=lambda message: err.print(f"[dim]{message}[/dim]", highlight=False, soft_wrap=True))
    if earlier is not None:
        report = merge_reports(earlier, report)
        err.print(f"[dim]merged with the {len(report['earlier_runs'])} earlier run(s) in {path}: etas "
                  f"{', '.join(f'{e:g}' for e in report['etas'])}[/dim]", highlight=False)
    (out if out.is_terminal else Console(width=160)).print(deniability_table(report))
    for line in selection_lines(report):
        out.print(line, highlight=False, soft_wrap=True)
    write_report(report, path)
    out.print(f"{report['runtime_s']:.0f} s · wrote {path}", highlight=False)


mlm_app = typer.Typer(no_args_is_help=True, help="The offline encoder's masked LM, trained here (load_mlm name "
                                                   "minilm-mlm).")
app.add_typer(mlm_app, name="mlm")


_RECIPE = MLMRecipe()  # the defaults load_mlm("minilm-mlm") uses


@mlm_app.command("prepare")
@user_errors
def mlm_prepare(
    budget_minutes: float = typer.Option(_RECIPE.budget_minutes, "--budget-minutes",
                                         help="Training-time cap (evaluations excluded)."),
    steps: int = typer.Option(_RECIPE.steps, help="Optimizer steps (0 = as many as the time budget allows); the "
                              "default fixes the model whatever else runs on the machine."),
    lr: float = typer.Option(_RECIPE.lr, help="AdamW peak learning rate."),
    batch_size: int = typer.Option(_RECIPE.batch_size, "--batch-size", help="Packed sequences per step."),
    freeze_embeddings: bool = typer.Option(False, "--freeze-embeddings", help="Keep the input embedding table "
                                           "(= the tied decoder weight) fixed."),
    task: str = typer.Option("", "--task", help="The task the MLM will serve: its text is left out of the corpus "
                             "when it is in it (span defenses and span-recovery load the MLM of their cell's task)."),
    curve: bool = typer.Option(False, "--curve", help="Also measure the held-out top-1 at 2, 5, 10 and 20 minutes "
                               "of the same run and write results/analysis/mlm-curve-<encoder>.json."),
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """Train (or find cached) the offline MLM; print its directory and held-out top-1."""
    from dataclasses import replace

    from bench.core.registry import TASKS
    from bench.models.offline_mlm import CURVE_MINUTES, info, prepare, recipe_for, write_curve

    if task:
        TASKS.get(task)  # an unknown name is refused with the close ones, before any training
    recipe = replace(recipe_for(task), budget_minutes=budget_minutes, steps=steps, lr=lr, batch_size=batch_size,
                     train_embeddings=not freeze_embeddings)
    path = prepare(recipe, checkpoints=CURVE_MINUTES if curve else ())
    details = info(path)
    out.print(f"{path}: {details['head']} ({details['seconds']:.0f} s, {details['sequences_per_s']} sequences/s)",
              highlight=False, soft_wrap=True)
    if curve:
        from bench.results.store import ResultStore

        written = write_curve(details, ResultStore(results_dir).root / "analysis")
        out.print(f"wrote {written}", highlight=False)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
