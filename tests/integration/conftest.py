"""Integration tests use the real offline encoder and real data from BENCH_DATA_DIR."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.examples import data_dir


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def real_data():
    if not (data_dir() / "glue" / "SST-2" / "train.tsv").is_file():
        pytest.skip("BENCH_DATA_DIR has no glue/SST-2 (point it at ../shared/data)")


def defense_release(defense: str, defense_args: dict, seed: int, n_train: int = 40, n_eval: int = 20) -> list:
    """The evaluation release of one SST-2 cell, as nested lists (for equality checks)."""
    from bench.engine.runner import make_spec, run_defense

    spec = make_spec(task="sst2", defense=defense, defense_args=defense_args, n_train=n_train, n_eval=n_eval,
                     training_args="epochs=1", seed=seed)
    _, output, _, _ = run_defense(spec)
    (release,) = output.releases.values()
    return [x.tolist() for x in release.data]


def bench_run(*args, results, timeout: int = 900) -> dict:
    """``bench run ... --json`` in a subprocess, as a user runs it; returns the printed record."""
    command = [sys.executable, "-c", "from bench.cli.main import main; main()", "run", *args,
               "--results-dir", str(results), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2],
                          timeout=timeout, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
