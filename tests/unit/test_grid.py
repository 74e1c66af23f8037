"""Grid files: expansion, validation before running, resuming after an interruption."""

import pytest

import bench.engine.grid as grid_module
from bench import BenchError
from bench.engine.grid import load_grid, run_grid
from bench.results.store import ResultStore

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


def test_a_defense_entry_can_be_limited_to_some_of_the_grids_tasks(tiny_data, tmp_path):
    limited = GRID.replace("tasks: [sst2]", "tasks: [sst2, cola]").replace(
        "args: {m: 0, k: 4}}", "args: {m: 0, k: 4}, tasks: [cola]}")
    specs = load_grid(write(tmp_path, limited))
    assert sorted((s.task, s.defense) for s in specs if s.seed == 0) == [
        ("cola", "none"), ("cola", "texthide"), ("sst2", "none")]
    for wrong in ("tasks: [qqp]", "tasks: []"):
        with pytest.raises(BenchError, match="names tasks"):
            load_grid(write(tmp_path, limited.replace("tasks: [cola]}", wrong + "}")))


def test_a_defense_entry_can_be_limited_to_some_of_the_grids_seeds(tiny_data, tmp_path):
    limited = GRID.replace("args: {m: 0, k: 4}}", "args: {m: 0, k: 4}, seeds: [1]}")
    specs = load_grid(write(tmp_path, limited))
    assert sorted((s.defense, s.seed) for s in specs) == [("none", 0), ("none", 1), ("texthide", 1)]
    for wrong in ("seeds: [2]", "seeds: []", "seeds: [one]"):
        with pytest.raises(BenchError, match="seeds"):
            load_grid(write(tmp_path, limited.replace("seeds: [1]}", wrong + "}")))


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

    from bench.cli.main import app

    result = CliRunner().invoke(app, ["run", "--grid", str(write(tmp_path, GRID)), "--check"])
    assert result.exit_code == 2 and "--grid" in result.stderr


def test_shards_split_a_grid_into_disjoint_parts_that_cover_it(tiny_data, tmp_path):
    from typer.testing import CliRunner

    from bench.cli.main import app
    from bench.engine.grid import cell_key, shard_of

    specs = load_grid(write(tmp_path, GRID))
    parts = [shard_of(specs, f"{i}/3") for i in (1, 2, 3)]
    assert sorted(len(p) for p in parts) == [1, 1, 2]  # fewer configurations than shards: split by cell
    halves = [shard_of(specs, f"{i}/2") for i in (1, 2)]
    for half in halves:  # a configuration's seeds share cached work, so they stay in one shard
        assert len({s.config_hash() for s in half}) == 1 and {s.seed for s in half} == {0, 1}
    assert halves[0][0].config_hash() != halves[1][0].config_hash()
    assert sorted(cell_key(s) for p in parts for s in p) == sorted(cell_key(s) for s in specs)
    for bad in ("0/2", "3/2", "1/0", "half", ""):
        with pytest.raises(BenchError, match="--shard must be i/n"):
            shard_of(specs, bad)
    runner, results = CliRunner(), tmp_path / "results"
    first = runner.invoke(app, ["run", "--grid", str(write(tmp_path, GRID)), "--shard", "1/2",
                                "--results-dir", str(results)])
    assert first.exit_code == 0 and "shard 1/2, 2 of 4 cells" in first.stderr
    assert len(ResultStore(results).read()[0]) == 2
    second = runner.invoke(app, ["run", "--grid", str(write(tmp_path, GRID)), "--results-dir", str(results)])
    assert second.exit_code == 0 and "ran 2 cells, skipped 2" in second.stdout
    bad = runner.invoke(app, ["run", "--grid", str(write(tmp_path, GRID)), "--shard", "2/1"])
    assert bad.exit_code == 2 and "--shard must be i/n" in bad.stderr
    alone = runner.invoke(app, ["run", "--shard", "1/2"])
    assert alone.exit_code == 2 and "use it with --grid" in alone.stderr


def test_a_cell_another_process_finished_meanwhile_is_skipped(tiny_data, tmp_path, monkeypatch):
    specs = load_grid(write(tmp_path, GRID))
    store, other = ResultStore(tmp_path / "results"), ResultStore(tmp_path / "results")
    real_run = grid_module.run_cell

    def run_and_let_the_other_finish_the_last(spec):
        record = real_run(spec)
        if spec is specs[0]:
            other.append(real_run(specs[-1]))  # another process records the last cell meanwhile
        return record

    monkeypatch.setattr(grid_module, "run_cell", run_and_let_the_other_finish_the_last)
    assert run_grid(specs, store) == (3, 1)
    assert len(store.read()[0]) == 4  # no cell recorded twice


def test_a_grid_attacks_the_inference_traffic_under_settings(tiny_data, tmp_path):
    inference = GRID.replace("n_eval: 20}", "n_eval: 20, traffic: inference}")
    specs = load_grid(write(tmp_path, inference))
    assert {s.traffic for s in specs} == {"inference"}
    assert not {s.config_hash() for s in specs} & {s.config_hash() for s in load_grid(write(tmp_path, GRID))}
    tokens = inference.replace("  - none\n", "  - {name: dchi-text, args: {eta: 60}}\n").replace("[rss]", "[inversion]")
    with pytest.raises(BenchError, match="not as inference traffic"):
        load_grid(write(tmp_path, tokens))
