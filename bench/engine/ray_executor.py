"""The Ray executor: every grid cell is a Ray task with declared resources; the driver alone writes records.

``bench run --grid G --executor ray [--address auto|HOST:PORT]``. The driver (the ``bench`` process) expands
the grid, skips cells already recorded, claims each cell it submits (``ResultStore.claim``, so a local
``--shard`` process or a second driver sharing the results folder never runs it too), and submits it as a
task asking for the grid's ``resources:`` (CPUs, GPUs, memory). A worker runs ``run_cell`` and sends the
record back as JSON; the driver validates it and appends it through the store, once. Records are those of
the local executor: same spec, metrics and notes; only run id, time, runtime and hardware differ.

A task that fails (its worker process killed, its node lost, an exception) is submitted again, up to
``retries`` more times, then reported; a cell that refuses its input (``BenchError``, e.g. no GPU on the
worker) is reported at once, since it would refuse again. Nothing is written for a failed cell.

Workers import this code and read data and caches at the driver's paths: the driver passes its
``BENCH_*``, ``HF_*`` and ``TRANSFORMERS_*`` variables and its code folder (``PYTHONPATH``) to every worker,
so every node needs the code, the data and the cache folder at the same paths (a shared filesystem, or the
same paths on each node: see docs/ray.md). Ray is an optional part: ``pip install "textprivacy-bench[ray]"``.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from bench.core.errors import BenchError
from bench.core.spec import RunSpec
from bench.engine.grid import RESOURCE_KEYS, cell_key
from bench.results.record import ResultRecord
from bench.results.store import ResultStore

LOCAL_CPUS = 2  # a Ray instance started by the driver (no --address) is kept this small
POLL_S = 1.0  # how long the driver waits for a finished task before it looks at timeouts again
CONNECT_TIMEOUT_S = 5.0  # for the TCP check of HOST:PORT before ray.init
ENV_PREFIXES = ("BENCH_", "HF_", "TRANSFORMERS_")


@dataclass
class CellReport:
    """What happened to one cell: status (done, skipped, claimed, failed), where it ran, after how many tries."""

    spec: RunSpec
    status: str
    where: str = ""
    attempts: int = 0
    seconds: float = 0.0
    error: str = ""


@dataclass
class RaySummary:
    """The cells of a grid run on Ray, and the nodes that ran them."""

    cells: list[CellReport] = field(default_factory=list)
    cluster: str = ""

    def count(self, status: str) -> int:
        """Cells with this status."""
        return sum(1 for cell in self.cells if cell.status == status)

    def by_node(self) -> dict[str, tuple[int, float]]:
        """Node (host and IP) -> (cells recorded there, seconds of cell time)."""
        cells, seconds = Counter(), Counter()
        for cell in self.cells:
            if cell.status == "done":
                node = cell.where.rsplit(" pid ", 1)[0]
                cells[node] += 1
                seconds[node] += cell.seconds
        return {node: (cells[node], seconds[node]) for node in sorted(cells)}


def worker_env() -> dict[str, str]:
    """The environment every worker gets: the driver's bench, Hugging Face and transformers variables, and
    its code folder first on PYTHONPATH."""
    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [root, os.environ.get("PYTHONPATH", "")] if p)
    return env


def _check_address(address: str) -> None:
    """Refuse, in a few seconds, a HOST:PORT where nothing listens (ray.init would retry for a minute)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise BenchError(f"--address must be auto or HOST:PORT (e.g. 127.0.0.1:6379), got '{address}'.")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise BenchError(f"no Ray cluster answers at {address} ({exc.strerror or exc.__class__.__name__}); start "
                         "one with 'ray start --head' or pass its address.") from None


def require_ray() -> None:
    """Refuse, in one sentence, the Ray executor where Ray is not installed (it is an optional part)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise BenchError("--executor ray needs Ray, which is not installed: pip install 'textprivacy-bench[ray]' "
                         "(or pip install -e '.[ray]' in a checkout), or run the grid with the local executor."
                         ) from None


def connect(address: str | None) -> str:
    """Join the cluster at ``address`` ("auto": the one started on this machine), or start a small local one
    (``LOCAL_CPUS`` CPUs, no dashboard) when it is None; returns a description for the summary."""
    import ray

    common = dict(include_dashboard=False, logging_level="ERROR", log_to_driver=False,
                  runtime_env={"env_vars": worker_env()})
    if address not in (None, "", "auto"):
        _check_address(address)
    try:
        if address in (None, ""):
            # "local": a new instance even when a cluster runs on this machine (--address auto joins that one)
            ray.init(address="local", num_cpus=LOCAL_CPUS, num_gpus=0, object_store_memory=100 * 2**20, **common)
            return f"a local Ray instance with {LOCAL_CPUS} CPUs"
        ray.init(address=address, **common)
    except BenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, ...: one sentence, no traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        if address in (None, ""):
            raise BenchError(f"could not start a local Ray instance ({first[:200]}); try again when the machine is "
                             "less busy, or start a cluster with 'ray start --head' and pass --address.") from None
        where = "on this machine (--address auto)" if address == "auto" else f"at {address}"
        raise BenchError(f"could not join a Ray cluster {where} ({first[:200]}); start one with 'ray start --head' "
                         "or pass its address (a cluster with token authentication also needs RAY_AUTH_MODE=token)."
                         ) from None
    return f"the Ray cluster at {address}"


def check_resources(resources: dict[str, float], cluster: str) -> None:
    """Refuse a grid whose cells no alive node of the cluster can hold (they would wait forever)."""
    import ray

    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    gpus = max((n.get("GPU", 0.0) for n in nodes), default=0.0)
    if resources["num_gpus"] > gpus:
        have = "has no GPU" if gpus == 0 else f"has at most {gpus:g} GPUs on a node"
        raise BenchError(f"the grid asks for {resources['num_gpus']:g} GPU(s) per cell but {cluster} {have}; run it "
                         "where GPUs are, or set resources: {num_gpus: 0} and --device cpu.")
    fits = [n for n in nodes if n.get("CPU", 0.0) >= resources["num_cpus"] and n.get("GPU", 0.0)
            >= resources["num_gpus"] and n.get("memory", 0.0) >= resources["memory_gb"] * 2**30]
    if not fits:
        raise BenchError(f"no node of {cluster} has {resources['num_cpus']:g} CPUs, {resources['num_gpus']:g} GPUs "
                         f"and {resources['memory_gb']:g} GB of memory free for one cell; lower the grid's "
                         "resources or add a larger node.")


_loaded_plugins: set[str] = set()  # per worker process: a reused worker does not register a plugin twice


def run_remote_cell(spec: dict, plugins: list[str], threads: int) -> dict:
    """The body of a cell's Ray task: run it and return the record as JSON, or the one sentence it refused with."""
    where = f"{socket.gethostname()} ({_node_ip()}) pid {os.getpid()}"
    try:
        from bench.core.registry import load_plugin
        from bench.engine.runner import run_cell
        from bench.models.encoders import require_device

        for path in plugins:
            if path not in _loaded_plugins:
                load_plugin(path)
                _loaded_plugins.add(path)
        cell = RunSpec.from_dict(spec)
        require_device(cell.device, f" on worker {where}")
        import torch

        torch.set_num_threads(max(1, threads))
        record = run_cell(cell)
    except BenchError as exc:
        return {"refused": str(exc), "where": where}
    return {"record": record.model_dump_json(), "where": where}


def _node_ip() -> str:
    try:
        import ray

        return ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001 - outside Ray (tests): the host name is enough
        return "?"


@dataclass
class _Attempt:
    spec: RunSpec
    key: tuple
    claim: object  # the entered claim context, exited when the cell is recorded or given up
    attempts: int
    started: float


def run_grid_ray(
    specs: Iterable[RunSpec],
    store: ResultStore,
    address: str | None = None,
    resources: dict[str, float] | None = None,
    retries: int = 2,
    plugins: Iterable[Path] = (),
    on_cell: Callable[[CellReport], None] | None = None,
    cell_timeout: float | None = None,
) -> RaySummary:
    """Run every unrecorded cell as a Ray task; the driver appends each record once. See the module docstring.

    Returns the summary; the caller reports failed cells (status "failed"), whose records were not written.
    """
    require_ray()
    import ray

    resources = {**RESOURCE_KEYS, **(resources or {})}
    if retries < 0:
        raise BenchError(f"--retries must be at least 0, got {retries}.")
    store.check_writable()
    summary = RaySummary()
    report = on_cell or (lambda cell: None)

    def note(cell: CellReport) -> None:
        summary.cells.append(cell)
        report(cell)

    done, seen, todo = store.completed(), set(), []
    for spec in specs:
        key = cell_key(spec)
        if key in done or key in seen:
            note(CellReport(spec, "skipped"))
        else:
            seen.add(key)
            todo.append(spec)
    if not todo:
        return summary
    summary.cluster = connect(address)
    try:
        check_resources(resources, summary.cluster)
        options = dict(num_cpus=resources["num_cpus"], num_gpus=resources["num_gpus"], max_retries=0)
        if resources["memory_gb"] > 0:
            options["memory"] = int(resources["memory_gb"] * 2**30)
        task = ray.remote(run_remote_cell).options(**options)
        threads = max(1, int(resources["num_cpus"]))
        plugin_paths = [str(Path(p).resolve()) for p in plugins]
        total_cpus = ray.cluster_resources().get("CPU", 1.0)
        limit = max(2, int(2 * total_cpus / resources["num_cpus"]))  # claims held at once stay bounded
        _drive(todo, store, task, plugin_paths, threads, limit, retries, cell_timeout, note)
    finally:
        ray.shutdown()
    return summary


def _drive(todo, store, task, plugins, threads, limit, retries, cell_timeout, note) -> None:
    """Submit, collect, retry and record until every cell is recorded, skipped or failed."""
    import ray

    pending = deque((spec, False) for spec in todo)  # (spec, wait for another process's claim)
    deferred: list[RunSpec] = []
    flight: dict = {}
    try:
        while pending or flight or deferred:
            if not pending and not flight:
                pending.extend((spec, True) for spec in deferred)  # held elsewhere on the first pass: wait now
                deferred.clear()
            while pending and len(flight) < limit:
                spec, wait = pending.popleft()
                key = cell_key(spec)
                claim = store.claim(key, wait=wait)
                if not claim.__enter__():
                    claim.__exit__(None, None, None)
                    deferred.append(spec)
                    note(CellReport(spec, "claimed"))
                    continue
                if key in store.completed():  # recorded by another process meanwhile
                    claim.__exit__(None, None, None)
                    note(CellReport(spec, "skipped"))
                    continue
                ref = task.remote(spec.to_dict(), plugins, threads)
                flight[ref] = _Attempt(spec, key, claim, 1, time.monotonic())
            if not flight:
                continue
            ready, _ = ray.wait(list(flight), num_returns=1, timeout=POLL_S)
            for ref in ready:
                _collect(ref, flight.pop(ref), store, task, plugins, threads, retries, flight, note)
            if cell_timeout:
                for ref, attempt in list(flight.items()):
                    if time.monotonic() - attempt.started > cell_timeout:
                        ray.cancel(ref, force=True)
                        del flight[ref]
                        why = f"still running after {cell_timeout:g} s (--cell-timeout)"
                        _retry_or_fail(attempt, why, "", task, plugins, threads, retries, flight, note)
    finally:
        for attempt in flight.values():  # interrupted: let other processes take these cells
            attempt.claim.__exit__(None, None, None)


def _collect(ref, attempt: _Attempt, store, task, plugins, threads, retries, flight, note) -> None:
    """Record a finished task's cell, or retry / report it."""
    import ray


    try:
        result = ray.get(ref, timeout=60)
    except ray.exceptions.RayTaskError as exc:  # an exception in run_cell
        cause = getattr(exc, "cause", None) or exc
        text = str(cause).strip().splitlines()[-1] if str(cause).strip() else ""
        _retry_or_fail(attempt, f"{type(cause).__name__}: {text[:200]}", "", task, plugins, threads, retries,
                       flight, note)
        return
    except (ray.exceptions.RayError, TimeoutError) as exc:  # the worker process or its node died
        _retry_or_fail(attempt, f"its worker died ({type(exc).__name__})", "", task, plugins, threads, retries,
                       flight, note)
        return
    seconds = time.monotonic() - attempt.started
    if "refused" in result:
        attempt.claim.__exit__(None, None, None)
        note(CellReport(attempt.spec, "failed", result["where"], attempt.attempts, seconds, result["refused"]))
        return
    try:
        record = ResultRecord.model_validate_json(result["record"])
        store.append(record)
        store.finish_claim(attempt.key)
    finally:
        attempt.claim.__exit__(None, None, None)
    note(CellReport(attempt.spec, "done", result["where"], attempt.attempts, record.runtime_s))


def _retry_or_fail(attempt: _Attempt, why: str, where: str, task, plugins, threads, retries, flight, note) -> None:
    if attempt.attempts <= retries:
        ref = task.remote(attempt.spec.to_dict(), plugins, threads)
        flight[ref] = _Attempt(attempt.spec, attempt.key, attempt.claim, attempt.attempts + 1, time.monotonic())
        note(CellReport(attempt.spec, "retrying", where, attempt.attempts, error=why))
        return
    attempt.claim.__exit__(None, None, None)
    note(CellReport(attempt.spec, "failed", where, attempt.attempts, error=why))
