"""Grid files: expansion, validation before running, resuming after an interruption."""

import pytest

import bench.grid as grid_module
from bench import BenchError
from bench.grid import load_grid, run_grid
from bench.store import ResultStore

GRID = """
tasks: [sst2]
encoders: [mock]
defenses:
  - none
  - {name: texthide, args: {m: 0, k: 4}}
attacks: [rss]
seeds: [0, 1]
settings: {training_args: {epochs: 1}, n_train: 60, n_eval: 20}
"""


def write(tmp_path, text):
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    return path


def test_expansion(tiny_data, tmp_path):
    specs = load_grid(write(tmp_path, GRID))
    assert len(specs) == 4
    assert {s.defense for s in specs} == {"none", "texthide"}
    assert {s.seed for s in specs} == {0, 1}


def test_bad_grid_fails_before_anything_runs(tiny_data, tmp_path):
    with pytest.raises(BenchError, match="unknown defense"):
        load_grid(write(tmp_path, GRID.replace("- none", "- nothing")))
    with pytest.raises(BenchError, match="unknown keys"):
        load_grid(write(tmp_path, GRID + "typo: 1\n"))


def test_interrupted_grid_resumes(tiny_data, tmp_path, monkeypatch):
    specs = load_grid(write(tmp_path, GRID.replace("attacks: [rss]", "attacks: [rss]\n").replace(
        "settings: {", "settings: {attack_args: {sbert: mock}, ")))
    store = ResultStore(tmp_path / "results")
    real_run = grid_module.run_cell
    calls = {"n": 0}

    def flaky(spec):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_run(spec)

    monkeypatch.setattr(grid_module, "run_cell", flaky)
    with pytest.raises(KeyboardInterrupt):
        run_grid(specs, store)
    assert len(store.read()[0]) == 2
    monkeypatch.setattr(grid_module, "run_cell", real_run)
    assert run_grid(specs, store) == (2, 2)
    assert run_grid(specs, store) == (0, 4)
    assert len(store.read()[0]) == 4


@pytest.mark.parametrize(
    "text",
    [
        GRID.replace("seeds: [0, 1]", "seeds: [a]"),
        GRID.replace("args: {m: 0, k: 4}", "args: [1, 2]"),
        GRID.replace("args: {m: 0, k: 4}", "args: {m: true, k: 4}"),
        GRID + "yes: 1\n",
        GRID.replace("n_train: 60", "device: 5"),
        GRID.replace("settings: {", "settings: {bogus: 1, "),
        "",
        "tasks: [sst2]\n",
        "- just\n- a list\n",
    ],
)
def test_odd_grids_are_one_clear_error(tiny_data, tmp_path, text):
    with pytest.raises(BenchError):
        load_grid(write(tmp_path, text))


def test_grid_refuses_single_cell_flags(tiny_data, tmp_path):
    from typer.testing import CliRunner

    from bench.cli import app

    result = CliRunner().invoke(app, ["run", "--grid", str(write(tmp_path, GRID)), "--check"])
    assert result.exit_code == 2 and "--grid" in result.stderr
