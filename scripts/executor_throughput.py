"""Cells per minute and per-cell overhead of the grid executors on one small grid.

    PYTHONPATH=. BENCH_DATA_DIR=/work/shared/data python scripts/executor_throughput.py [--cells 16] [--encoder mock]

The executors are local, --shard 2 (two processes sharing a results folder) and Ray with two workers (the small
Ray instance ``bench run --executor ray`` starts). Each runs the same grid from scratch into its own results folder
and cache, as ``bench`` subprocesses, so each pays its own start-up (Python, torch, Ray). The grid is sst2 at
--check sizes (64 training and 32 evaluation examples, one epoch), undefended and TextHide mix-only, seeds 0 to
n/2-1. Per executor it reports the wall seconds, the cells per minute and the mean in-cell time (the records'
runtime_s). The per-cell overhead is (wall x workers - sum of runtime_s) / cells: worker time spent outside cells.
The load average is printed before and after, since on a shared machine the figures move with it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from bench.cli.main import main; sys.argv = sys.argv[1:]; main()"


def bench(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CLI, "bench", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Failed(Exception):
    """A bench process of one executor failed (its last error line is the message)."""


def finish(processes: list[subprocess.Popen], timeout: float) -> None:
    for process in processes:
        _, stderr = process.communicate(timeout=timeout)
        if process.returncode != 0:
            lines = [line for line in stderr.splitlines() if line.strip()]
            raise Failed(lines[-1] if lines else f"exit code {process.returncode}")


def measure(name: str, grid: Path, folder: Path, workers: int, timeout: float) -> dict:
    sys.path.insert(0, str(ROOT))
    from bench.results.store import ResultStore

    results, cache = folder / f"{name}-results", folder / f"{name}-cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_CACHE_DIR": str(cache), "BENCH_QUIET": "1"}
    base = ["run", "--grid", str(grid), "--results-dir", str(results)]
    started = time.perf_counter()
    if name == "local":
        finish([bench(base, env)], timeout)
    elif name == "shard2":
        finish([bench([*base, "--shard", f"{i}/2"], env) for i in (1, 2)], timeout)
    else:
        finish([bench([*base, "--executor", "ray"], env)], timeout)
    wall = time.perf_counter() - started
    records, problems = ResultStore(results).read()
    assert not problems, problems
    inside = sum(r.runtime_s for r in records)
    return {"executor": name, "cells": len(records), "wall_s": wall, "cells_per_min": 60 * len(records) / wall,
            "mean_cell_s": inside / max(len(records), 1), "overhead_s": (wall * workers - inside) / len(records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=16, help="cells in the grid (even)")
    parser.add_argument("--encoder", default="mock", help="mock (fast) or minilm (the offline encoder)")
    parser.add_argument("--executors", default="local,shard2,ray2", help="which to measure, comma-separated")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds allowed per executor")
    options = parser.parse_args()
    seeds = list(range(options.cells // 2))
    grid_text = (f"tasks: [sst2]\nencoders: [{options.encoder}]\ndefenses: [none, {{name: texthide, args: {{m: 0, "
                 f"k: 4}}}}]\nseeds: {seeds}\nsettings: {{training_args: {{epochs: 1}}, n_train: 64, n_eval: 32}}\n")
    print(f"load average before: {os.getloadavg()}, {os.cpu_count()} CPUs", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="executors-") as folder:
        grid = Path(folder) / "grid.yaml"
        grid.write_text(grid_text)
        for name in options.executors.split(","):
            workers = 1 if name == "local" else 2
            try:
                rows.append(measure(name, grid, Path(folder), workers, options.timeout))
            except Failed as exc:  # e.g. a local Ray instance that cannot start on an overloaded machine
                print(f"  {name}: failed ({exc}), load average {os.getloadavg()}", flush=True)
                continue
            print(f"  {name}: {rows[-1]}, load average {os.getloadavg()}", flush=True)
    print(f"load average after: {os.getloadavg()}")
    print(f"\n{options.cells} cells, encoder {options.encoder}\n")
    print("| executor | workers | cells | wall s | cells/min | mean in-cell s | per-cell overhead s |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        workers = 1 if row["executor"] == "local" else 2
        print(f"| {row['executor']} | {workers} | {row['cells']} | {row['wall_s']:.1f} | {row['cells_per_min']:.1f} "
              f"| {row['mean_cell_s']:.2f} | {row['overhead_s']:.2f} |")


if __name__ == "__main__":
    main()
