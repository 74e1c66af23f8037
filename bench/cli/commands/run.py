"""``bench run``: one cell, or every cell of a grid, and its record."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from bench.cli.common import PluginOption, ResultsOption, err, load_plugins, out, plain, user_errors, wide
from bench.core.errors import BenchError
from bench.core.jsontext import strict_json
from bench.core.params import parse_arg_string
from bench.core.progress import reporting
from bench.core.registry import ATTACKS, TASKS
from bench.core.smoke import describe as smoke_line


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
                                    "pretraining of the server's encoder; adapt_steps, adapt_lr, ...), or "
                                    "dp_epsilon=8 (DP-SGD training of the server's head to that target epsilon, inf: "
                                    "none; dp_delta (default 1/n), dp_clip (1.0), dp_accountant (prv or rdp))."),
    n_train: Optional[int] = typer.Option(None, "--n-train", help="Training examples (default: the task's)."),
    n_eval: Optional[int] = typer.Option(None, "--n-eval", help="Evaluation examples (default: the task's)."),
    pooling: str = typer.Option("mean", help="Sentence representation: mean, cls or pooler."),
    seed: int = typer.Option(0, help="Seed of data sampling, mechanism randomness and training."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    precision: Optional[str] = typer.Option(None, help="fp32 (default) or bf16: mixed precision (torch.autocast) "
                                            "in the encoder's and MLMs' forward passes; with --grid it replaces the "
                                            "grid's setting. On a GPU with bf16; this CPU runs it slower."),
    traffic: str = typer.Option("training", help="The release the attack takes: training (what the client sends "
                                "while the server trains) or inference (its prediction queries; sentence "
                                "representations only)."),
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
    from bench.engine.provenance import check_publishable
    from bench.engine.reuse import reusing
    from bench.engine.runner import CHECK_SIZES, make_spec, run_cell
    from bench.results.release_store import ReleaseStore
    from bench.results.store import ResultStore

    load_plugins(plugin)
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
        if traffic != "training":
            raise BenchError("--traffic applies to one cell; a grid sets it under settings: (traffic: inference).")
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
        traffic=traffic, smoke=check,
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
    """``--check``'s server options, where the user did not choose them.

    Privacy-adaptive pretraining takes a few steps. A pretraining task's further pretraining does too, and its
    utility task runs at --check's sizes. This mirrors the one epoch --check takes unless the user chose the epochs.
    """
    from bench.engine.runner import CHECK_SIZES, CHECK_STEPS

    given = parse_arg_string(server_args)
    if "pretraining" in TASKS.get(task).protocols:  # and the utility task at --check's sizes
        chosen = {"pretrain_steps": CHECK_STEPS, "utility_n_train": CHECK_SIZES["n_train"],
                  "utility_n_eval": CHECK_SIZES["n_eval"]}
    else:
        chosen = {"adapt_steps": CHECK_STEPS} if given.get("adapt") else {}
    return ",".join(filter(None, [server_args, *(f"{k}={v}" for k, v in chosen.items() if k not in given)]))


def _check_attack_args(attack: str | None, attack_args: str) -> str:
    """``--check``'s attack arguments: the attack's ``check_args`` (its smoke budget), where the user chose none."""
    if attack is None:
        return attack_args
    given = parse_arg_string(attack_args)
    chosen = [f"{k}={v}" for k, v in ATTACKS.get(attack).check_args.items() if k not in given]
    return ",".join(filter(None, [attack_args, *chosen]))


def _run_grid(grid: Path, store, shard: str = "", device: str = "auto", precision: str | None = None,
              cell_timeout: float | None = None, claim_wait: float | None = None) -> None:
    """Run a grid's cells in this process, one line per cell on stderr."""
    from bench.engine.builds import pending_builds
    from bench.engine.grid import cell_key, load_grid, run_grid, shard_of
    from bench.engine.reuse import planned

    specs = load_grid(grid, device=device, precision=precision)
    if shard:
        total, specs = len(specs), shard_of(specs, shard)
        err.print(f"grid {plain(grid)}: shard {plain(shard.strip())}, {len(specs)} of {total} cells", highlight=False)
    else:
        err.print(f"grid {plain(grid)}: {len(specs)} cells", highlight=False)

    done = store.completed()
    progress = _GridProgress(len(specs), pending_builds((s for s in specs if cell_key(s) not in done), planned))

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
    """The figures at the end of a grid's cell lines.

    A line shows the cell's headline metrics and time, the cells left, and the time left. The time left is the
    median time of the cells run so far for each cell left (a cell that first built a checkpoint the others
    share does not set the pace), plus what is still to build (``bench.engine.builds``), as long as the cache lacks
    it; recorded cells are skipped in no time.
    """

    def __init__(self, cells: int, builds: list | None = None) -> None:
        self.cells, self.seen, self.ran, self.figures = cells, 0, 0, ""
        self.times: list[float] = []
        self.builds = [build for build in builds or [] if build.seconds is not None]

    def record(self, spec, record) -> None:
        """Keep the finished cell's figures for its line.

        They are the task's headline metric and the attack's, beside its random guess.
        """
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
        self.times.append(record.runtime_s)

    def after(self, status: str) -> str:
        """The end of a cell's line: its figures, then how many cells are left and the time left."""
        if status == "claimed":
            return ""
        self.seen += 1
        left = self.cells - self.seen
        parts = [self.figures] if status == "done" and self.figures else []
        self.figures = ""
        pace = ""
        if self.times and left:
            building = sum(build.seconds for build in self.builds if not build.done())
            pace = f", about {_minutes(statistics.median(self.times) * left + building)} left"
        parts.append(f"{self.seen} of {self.cells} cells{pace}")
        return " · " + " · ".join(parts)


def _minutes(seconds: float) -> str:
    """``12 min``, ``2.5 h`` or ``40 s``."""
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min" if seconds >= 90 else \
        f"{seconds:.0f} s"


def _run_grid_ray(grid: Path, store, device: str, address, retries: int, cell_timeout, plugins,
                  precision: str | None = None) -> None:
    """Run a grid's cells as Ray tasks, one line per cell on stderr."""
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
    """List a grid's cells: recorded or to run, and each one's time estimated from past records."""
    from bench.engine.builds import pending_builds
    from bench.engine.grid import cell_key, estimate_cells, grid_resources, load_grid, shard_of
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
    plans = {cell_key(row.spec): row.reuse for row in rows}
    devices = ", ".join(sorted({str(spec.device) for spec in specs}))
    table = Table(title=f"{plain(grid)}: {len(specs)} cells on {devices} (dry run, nothing runs)", title_justify="left")
    for column in ("cell", "status", "runs", "estimate", "from"):
        table.add_column(column, justify="right" if column == "estimate" else "left")
    for row in rows:
        estimate = "?" if row.seconds is None else f"{row.seconds:.1f} s {row.device}"
        runs = "" if row.status != "to run" else f"attack only ({row.reuse})" if row.reuse else "in full"
        table.add_row(plain(row.spec.label()), row.status, plain(runs), estimate, plain(row.basis))
    wide(200).print(table)
    todo = [row for row in rows if row.status == "to run"]
    known = [row.seconds for row in todo if row.seconds is not None]
    unknown = len(todo) - len(known)
    reused = sum(1 for row in todo if row.reuse)
    out.print(f"{len(todo)} cells to run" + (f" ({reused} attack only)" if reused else "") + f", "
              f"{len(rows) - len(todo)} already recorded; estimated {sum(known):.0f} s of cell time for {len(known)} "
              f"of them" + (f", no past record for {unknown}" if unknown else ""), highlight=False)
    builds = pending_builds((row.spec for row in todo), lambda spec: plans.get(cell_key(spec), ""))
    for what in dict.fromkeys(build.what for build in builds):  # what no record's runtime holds: built once, cached
        kind = [build for build in builds if build.what == what]
        timed = [build.seconds for build in kind if build.seconds is not None]
        out.print(f"before them: {len(kind)} {what}(s) this machine's cache lacks are built"
                  + (f", about {sum(timed):.0f} s for {len(timed)} at the rate of those cached here" if timed else "")
                  + (f", {len(kind) - len(timed)} with none of their kind cached here to time them"
                     if len(timed) < len(kind) else ""), highlight=False)


def _print_record(record, path) -> None:
    """A cell's metrics beside their random guesses, then its settings and where it was appended."""
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
    """The examples a cell used, with the number asked for when it got fewer.

    The number asked is shown only when it is not the task's default: the defaults mean "up to". A split smaller
    than asked caps the size.
    """

    used, asked = record.sizes[name], record.spec.get(name)
    default = getattr(TASKS.get(record.spec["task"]), f"default_{name}", None)
    capped = isinstance(asked, int) and asked > used and asked != default
    return f"{used} (of {asked} asked)" if capped else f"{used}"

