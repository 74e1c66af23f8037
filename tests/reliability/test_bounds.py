"""Class 8 of issue 60: waits without bounds. The local executor stops a cell after ``--cell-timeout`` seconds, and
``--claim-wait`` bounds the wait for a cell another process holds (a stopped process keeps its claim for as long as
it is stopped); either way the cell fails in one sentence, the grid records the others and a later run retries it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from bench.engine.grid import cell_key, load_grid
from bench.results.store import ResultStore
from tests.reliability.conftest import SLOW_PLUGIN, grid_error, invoke, one_sentence

GRID = ("tasks: [sst2]\nencoders: [mock]\ndefenses: [{{name: slow-none, args: {{seconds: {a}}}}}, "
        "{{name: slow-none, args: {{seconds: {b}}}}}]\nseeds: [0]\n"
        "settings: {{training_args: {{epochs: 1}}, n_train: 40, n_eval: 20}}\n")


def _setup(tmp_path, a: float, b: float):
    plugin = tmp_path / "slow_none.py"
    plugin.write_text(SLOW_PLUGIN)
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID.format(a=a, b=b))
    return plugin, grid, tmp_path / "out"


def _recorded(results) -> list[float]:
    records, problems = ResultStore(results).read()
    assert problems == []
    return sorted(r.spec["defense_args"]["seconds"] for r in records)


def test_local_cell_timeout_stops_a_long_cell_and_the_grid_goes_on(tiny_data, tmp_path):
    plugin, grid, results = _setup(tmp_path, 300, 0)  # a cell of 5 minutes, and one of a few seconds under load
    started = time.monotonic()
    result = invoke("run", "--grid", grid, "--plugin", plugin, "--results-dir", results, "--cell-timeout", 15)
    grid_error(result, "1 of 2 cells failed", "ran longer than --cell-timeout 15 s", "1 ran")
    assert time.monotonic() - started < 120
    assert _recorded(results) == [0]


def test_claim_wait_bounds_the_wait_for_a_stopped_claim_holder(tiny_data, tmp_path):
    """A process that claimed a cell and was then stopped (SIGSTOP) holds its lock while stopped: the grid waited
    for it forever; with --claim-wait it gives up on that cell, records the other, and says so."""
    plugin, grid, results = _setup(tmp_path, 0.1, 0)
    store = ResultStore(results)
    from bench.core.registry import load_plugin

    load_plugin(plugin)
    held = next(spec for spec in load_grid(grid) if spec.defense_args["seconds"] == 0.1)
    path = store.claim_path(cell_key(held))
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)", str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGSTOP)
        started = time.monotonic()
        result = invoke("run", "--grid", grid, "--plugin", plugin, "--results-dir", results, "--claim-wait", 2)
        grid_error(result, "1 of 2 cells failed", "after 2 s of waiting (--claim-wait)", "resume or end it")
        assert time.monotonic() - started < 60
        assert _recorded(results) == [0]
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    again = invoke("run", "--grid", grid, "--plugin", plugin, "--results-dir", results, "--claim-wait", 2)
    assert again.exit_code == 0, again.output  # the holder is gone: the kernel dropped its lock
    assert _recorded(results) == [0, 0.1]


def test_bounds_are_checked_before_anything_runs(tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("tasks: [sst2]\n")
    one_sentence(invoke("run", "--claim-wait", 5), "apply to grids")
    one_sentence(invoke("run", "--grid", grid, "--claim-wait", -1), "--claim-wait must be a number of seconds")
    one_sentence(invoke("run", "--grid", grid, "--claim-wait", "nan"), "--claim-wait must be a number of seconds")
    one_sentence(invoke("run", "--grid", grid, "--cell-timeout", 0), "--cell-timeout must be a positive number")
