"""Faults a long grid meets: a worker killed mid-cell, a full disk during an append, the results file edited by hand
while the grid runs. Nothing that finished is lost, nothing is recorded twice, each failure is one sentence."""

from __future__ import annotations

import errno
import os
import signal
import time

import pytest

import bench.results.store as store_module
from bench.results.store import CorruptLine, ResultStore
from tests.reliability.conftest import cli_process, grid_error, invoke, slow_grid, stored_seeds
from tests.unit.test_store import make_record

GRID = """tasks: [sst2]
encoders: [mock]
defenses: [none]
seeds: [0, 1, 2]
settings: {training_args: {epochs: 1}, n_train: 40, n_eval: 20}
"""


def _disk_full_after(half: bool = True):
    """A ``_write_all`` that writes part of the bytes (as a filling disk does), then fails with ENOSPC."""
    def write(fd, data):
        if half:
            os.write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write


def test_worker_killed_mid_cell_then_resumed_records_every_cell_once(tiny_data, tmp_path):
    plugin, grid = slow_grid(tmp_path, seconds=1.0, seeds=3)
    results, marker = tmp_path / "results", tmp_path / "started"
    worker = cli_process(["run", "--grid", grid, "--plugin", plugin, "--results-dir", results],
                         {"SLOW_NONE_MARKER": str(marker)})
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and (not marker.exists() or len(marker.read_text().split()) < 2):
            assert worker.poll() is None, worker.communicate()
            time.sleep(0.05)
        os.kill(worker.pid, signal.SIGKILL)  # inside the second cell's pause: the first is recorded, the second not
        worker.wait(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert stored_seeds(results, "slow-none") == [0]
    assert list((results / "claims").glob("*.lock"))  # the dead worker's claim file stays, and must not block

    resumed = invoke("run", "--grid", grid, "--plugin", plugin, "--results-dir", results)
    assert resumed.exit_code == 0, resumed.output
    assert "ran 2 cells, skipped 1" in resumed.stdout
    assert stored_seeds(results, "slow-none") == [0, 1, 2]


def test_disk_full_during_a_grid_append_is_one_sentence_and_the_file_stays_whole(tiny_data, tmp_path, monkeypatch):
    grid, results = tmp_path / "grid.yaml", tmp_path / "results"
    grid.write_text(GRID)
    real_write, appends = store_module._write_all, []

    def second_append_fails(fd, data):
        appends.append(len(data))
        return (_disk_full_after() if len(appends) == 2 else real_write)(fd, data)

    monkeypatch.setattr(store_module, "_write_all", second_append_fails)
    failed = invoke("run", "--grid", grid, "--results-dir", results)
    grid_error(failed, "could not append the record to", "No space left on device", "nothing of it was kept",
                 "a grid resumes at this cell")
    path = results / "records" / "none.jsonl"
    assert path.read_bytes().endswith(b"\n") and len(path.read_bytes().splitlines()) == 1
    assert stored_seeds(results, "none") == [0]

    monkeypatch.setattr(store_module, "_write_all", real_write)  # space freed
    resumed = invoke("run", "--grid", grid, "--results-dir", results)
    assert resumed.exit_code == 0, resumed.output
    assert "ran 2 cells, skipped 1" in resumed.stdout
    assert stored_seeds(results, "none") == [0, 1, 2]


def test_a_torn_line_that_could_not_be_cut_back_is_skipped_and_the_next_append_is_whole(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    store.append(make_record(0))
    monkeypatch.setattr(store_module, "_write_all", _disk_full_after())
    monkeypatch.setattr(store_module.os, "ftruncate", lambda fd, size: (_ for _ in ()).throw(OSError(errno.EIO, "")))
    with pytest.raises(store_module.BenchError, match="No space left on device; readers skip the torn line"):
        store.append(make_record(1))
    monkeypatch.undo()
    store.append(make_record(2))
    records, problems = store.read()
    assert sorted(r.seed for r in records) == [0, 2]
    assert len(problems) == 1 and isinstance(problems[0], CorruptLine) and problems[0].line == 2


def test_results_file_edited_by_hand_while_a_grid_runs(tiny_data, tmp_path, monkeypatch):
    import bench.engine.grid as grid_module

    grid, results = tmp_path / "grid.yaml", tmp_path / "results"
    grid.write_text(GRID)
    real_run_cell, calls = grid_module.run_cell, []

    def edit_between_cells(spec):
        calls.append(spec.seed)
        if len(calls) == 2:  # after the first record: a note typed into the file, and a line cut off mid-way
            with open(results / "records" / "none.jsonl", "ab") as handle:
                handle.write(b"# checked by hand, looks fine\n{\"run_id\": \"abc\", \"seed\"")
        return real_run_cell(spec)

    monkeypatch.setattr(grid_module, "run_cell", edit_between_cells)
    result = invoke("run", "--grid", grid, "--results-dir", results)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and all("skipped a corrupt record" in w and "none.jsonl:" in w for w in warnings)
    records, problems = ResultStore(results).read()
    assert sorted(r.seed for r in records) == [0, 1, 2]  # no finished record lost, the later ones whole
    assert [p.line for p in problems] == [2, 3]

    again = invoke("run", "--grid", grid, "--results-dir", results)  # resume: nothing re-run, nothing doubled
    assert again.exit_code == 0 and "ran 0 cells, skipped 3" in again.stdout
