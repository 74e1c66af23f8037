"""Two unsharded copies of one grid share a results folder: every cell is claimed before it runs, so each is recorded
exactly once; a claim dies with its process, so a killed worker never blocks a resume."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

from bench.engine.grid import cell_key, load_grid, run_grid
from bench.results.store import ResultStore
from tests.reliability.conftest import ROOT, cli_process, slow_grid, stored_seeds

CELLS = 4


def test_two_copies_of_one_grid_record_every_cell_once(tiny_data, tmp_path):
    plugin, grid = slow_grid(tmp_path, seconds=0.4, seeds=CELLS)
    results = tmp_path / "results"
    args = ["run", "--grid", grid, "--plugin", plugin, "--results-dir", results]
    workers = [cli_process(args) for _ in range(2)]
    outputs = [worker.communicate(timeout=300) for worker in workers]
    for worker, (stdout, stderr) in zip(workers, outputs):
        assert worker.returncode == 0, stderr
    ran = [int(re.search(r"ran (\d+) cells", stdout).group(1)) for stdout, _ in outputs]
    assert sum(ran) == CELLS, (ran, outputs)
    assert stored_seeds(results, "slow-none") == list(range(CELLS))


def test_a_claimed_cell_is_put_off_then_skipped_when_its_holder_records_it(tiny_data, tmp_path):
    from bench.engine.runner import run_cell

    _, grid = slow_grid(tmp_path, seconds=0, seeds=2)
    grid.write_text(grid.read_text().replace("{name: slow-none, args: {seconds: 0}}", "none"))
    specs = load_grid(grid)
    store = ResultStore(tmp_path / "results")
    statuses: list[tuple[int, str]] = []
    outcome: dict = {}
    with store.claim(cell_key(specs[0])) as held:  # "another process" runs seed 0
        assert held
        worker = threading.Thread(target=lambda: outcome.update(
            counts=run_grid(specs, store, lambda spec, status: statuses.append((spec.seed, status)))))
        worker.start()
        deadline = time.monotonic() + 120
        while (1, "done") not in statuses and time.monotonic() < deadline:
            time.sleep(0.05)
        assert statuses == [(0, "claimed"), (1, "done")]
        store.append(run_cell(specs[0]))  # the holder finishes its cell, then lets go
    worker.join(timeout=120)
    assert statuses == [(0, "claimed"), (1, "done"), (0, "skipped")]
    assert outcome["counts"] == (1, 1)
    assert stored_seeds(store.root, "none") == [0, 1]


def test_the_claim_of_a_killed_process_is_free_at_once(tmp_path):
    key = ("abc", 0, "sst2@1 none@1 ")
    code = ("import sys, time; from bench.results.store import ResultStore; "
            "claim = ResultStore(sys.argv[1]).claim(eval(sys.argv[2])); assert claim.__enter__(); "
            "print('held', flush=True); time.sleep(600)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), repr(key)], stdout=subprocess.PIPE,
                              text=True, env={"PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        store = ResultStore(tmp_path)
        with store.claim(key) as held:
            assert not held  # a live holder keeps it
        holder.kill()  # SIGKILL: no cleanup runs, the lock file stays on disk
        holder.wait(timeout=30)
        assert store.claim_path(key).exists()
        start = time.perf_counter()
        with store.claim(key) as held:
            assert held  # the kernel dropped the dead process's lock: nothing is stale
        assert time.perf_counter() - start < 1
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
