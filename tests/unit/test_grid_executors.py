"""Grid options around the executors, without a Ray cluster: --dry-run estimates, the resources: key, devices of grid
cells, the body of a Ray task run in-process, and option combinations that are refused."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from bench import BenchError
from bench.cli.main import app
from bench.engine.grid import grid_resources, load_grid
from bench.results.record import ResultRecord
from bench.results.store import ResultStore

GRID = """tasks: [sst2]
encoders: [mock]
defenses: [none]
seeds: [0, 1]
settings: {training_args: {epochs: 1}, n_train: 40, n_eval: 20}
"""


def write(tmp_path, text, name="grid.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_dry_run_lists_recorded_cells_and_estimates_from_past_records(tiny_data, results, tmp_path):
    assert invoke("run", "--grid", write(tmp_path, GRID)).exit_code == 0
    before = sorted(p.read_bytes() for p in (results / "records").glob("*.jsonl"))
    bigger = GRID.replace("seeds: [0, 1]", "seeds: [0, 1, 2]").replace(
        "defenses: [none]", "defenses: [none, {name: texthide, args: {m: 0, k: 4}}]")
    bigger = bigger.replace("tasks: [sst2]", "tasks: [sst2, cola]")
    result = CliRunner().invoke(app, ["run", "--grid", str(write(tmp_path, bigger, "big.yaml")), "--dry-run"],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.count("│") >= 4}
    assert "recorded" in rows["sst2 / none / - / seed 0"] and "this configuration (2 records)" in rows[
        "sst2 / none / - / seed 0"]
    assert "to run" in rows["sst2 / none / - / seed 2"] and "this configuration" in rows["sst2 / none / - / seed 2"]
    assert "?" in rows["sst2 / texthide(m=0,k=4) / - / seed 0"]  # no record of sst2 + texthide
    assert "no past record" in rows["cola / none / - / seed 0"]
    assert "10 cells to run, 2 already recorded" in result.stdout
    assert sorted(p.read_bytes() for p in (results / "records").glob("*.jsonl")) == before  # nothing ran


def test_dry_run_uses_task_and_defense_when_the_configuration_is_new(tiny_data, results, tmp_path):
    assert invoke("run", "--grid", write(tmp_path, GRID)).exit_code == 0
    other = GRID.replace("n_eval: 20", "n_eval: 24")  # a new configuration of the same task and defense
    result = CliRunner().invoke(app, ["run", "--grid", str(write(tmp_path, other, "o.yaml")), "--dry-run"],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert result.stdout.count("its task and defense (2 records)") == 2
    assert "2 cells to run, 0 already recorded" in result.stdout


def test_dry_run_on_an_empty_results_folder_writes_nothing(tiny_data, tmp_path):
    results = tmp_path / "nothing-here"
    result = invoke("run", "--grid", write(tmp_path, GRID), "--dry-run", "--results-dir", results)
    assert result.exit_code == 0, result.output
    assert not results.exists()


def test_grid_resources_defaults_and_validation(tmp_path):
    assert grid_resources(write(tmp_path, GRID)) == {"num_cpus": 1.0, "num_gpus": 0.0, "memory_gb": 0.0}
    given = grid_resources(write(tmp_path, GRID + "resources: {num_cpus: 4, num_gpus: 1, memory_gb: 16}\n"))
    assert given == {"num_cpus": 4.0, "num_gpus": 1.0, "memory_gb": 16.0}
    for bad, fragment in (("{gpus: 1}", "must be a mapping with keys"), ("{num_gpus: -1}", "at least 0"),
                          ("{num_cpus: 0}", "more than 0"), ("{num_gpus: yes}", "must be a number")):
        with pytest.raises(BenchError, match=fragment):
            grid_resources(write(tmp_path, GRID + f"resources: {bad}\n"))


def test_grid_devices_for_this_machine_and_for_remote_workers(tiny_data, tmp_path):
    cuda = write(tmp_path, GRID.replace("n_eval: 20}", "n_eval: 20, device: cuda}"))
    assert {s.device for s in load_grid(cuda, device="cpu")} == {"cpu"}  # --device replaces the grid's
    assert {s.device for s in load_grid(cuda, here=False)} == {"cuda"}  # checked on the worker, not here
    gpus = write(tmp_path, GRID + "resources: {num_gpus: 1}\n", "gpus.yaml")
    assert {s.device for s in load_grid(gpus, here=False)} == {"cuda"}  # auto with declared GPUs
    assert {s.device for s in load_grid(write(tmp_path, GRID, "cpu.yaml"), here=False)} == {"cpu"}
    with pytest.raises(BenchError, match="no CUDA GPU is available"):
        load_grid(cuda)
    assert {s.device for s in load_grid(gpus, device="cpu")} == {"cpu"}  # as the refusal advises: --device cpu


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks a machine without a CUDA GPU")
def test_a_gpu_grid_dry_runs_on_a_machine_without_a_gpu(tiny_data, tmp_path):
    # the GPU grids' headers start with --dry-run (cells, recorded, estimates): nothing runs, so no GPU is needed here
    gpus = write(tmp_path, GRID + "resources: {num_gpus: 1}\n", "gpus.yaml")
    result = CliRunner().invoke(app, ["run", "--grid", str(gpus), "--dry-run"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "2 cells to run, 0 already recorded" in result.stdout
    refused = invoke("run", "--grid", gpus, "--results-dir", tmp_path / "results")  # running them here still needs one
    assert refused.exit_code == 2 and "no CUDA GPU is available" in refused.output
    assert not (tmp_path / "results").exists()


def test_the_body_of_a_ray_task_returns_a_record_or_the_sentence_it_refused_with(tiny_data, tmp_path):
    from bench.engine.ray_executor import run_remote_cell
    from bench.engine.runner import run_cell

    spec = load_grid(write(tmp_path, GRID))[0]
    result = run_remote_cell(spec.to_dict(), [], threads=1)
    record = ResultRecord.model_validate_json(result["record"])
    local = run_cell(spec)
    drop = {"run_id", "created_at", "runtime_s", "hardware"}
    assert record.model_dump(exclude=drop) == local.model_dump(exclude=drop)
    refused = run_remote_cell(dataclasses.replace(spec, device="cuda").to_dict(), [], threads=1)
    assert "record" not in refused and "no CUDA GPU is available on worker" in refused["refused"]
    json.dumps(refused)  # travels back to the driver as plain data


@pytest.mark.parametrize("args, fragment", [
    (["--executor", "spark"], "--executor must be local or ray"),
    (["--address", "auto"], "add --executor ray"),
    (["--executor", "ray", "--shard", "1/2"], "drop --shard"),
    (["--executor", "ray", "--address", "nonsense"], "--address must be auto or HOST:PORT"),
    (["--executor", "ray", "--retries", "-1"], "--retries must be at least 0"),
])
def test_refused_option_combinations(tiny_data, results, tmp_path, args, fragment):
    result = invoke("run", "--grid", write(tmp_path, GRID), *args)
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr
    assert ResultStore(results).read() == ([], [])


def test_executor_options_need_a_grid(tiny_data, results):
    result = invoke("run", "--encoder", "mock", "--check", "--dry-run")
    assert result.exit_code == 2 and "use them with --grid" in result.stderr


def test_the_gpu_grid_asks_for_a_gpu_per_cell_and_resolves_with_a_mock_encoder(tiny_data, tmp_path):
    from pathlib import Path

    source = Path(__file__).resolve().parents[2] / "grids" / "gpu_texthide_bert.yaml"
    assert grid_resources(source) == {"num_cpus": 4.0, "num_gpus": 1.0, "memory_gb": 16.0}
    offline = write(tmp_path, source.read_text().replace("encoders: [bert-base-cased]", "encoders: [mock]"))
    specs = load_grid(offline, here=False)  # the driver need not have the GPU
    assert len(specs) == 36 and {s.device for s in specs} == {"cuda"}
    assert {s.training.mode for s in specs} == {"finetune"} and {s.pooling for s in specs} == {"pooler"}


def test_a_new_pretraining_budget_is_estimated_from_its_budget_not_from_the_defense():
    """A cell with server options takes its estimate from records of the same server options (a 6,400-step
    pretraining) before records of the same defense at another budget."""
    from types import SimpleNamespace

    from bench.core.spec import RunSpec
    from bench.engine.grid import estimate_cells

    def record(defense, steps, seconds):
        spec = RunSpec(task="clinical-spl", defense=defense, attack="condition-probe", encoder="minilm",
                       server={"pretrain_steps": steps})
        return SimpleNamespace(config_hash=spec.config_hash(), seed=0, component_versions=lambda: "",
                               hardware={"device": "cpu"}, spec=spec.to_dict(), runtime_s=seconds)

    records = [record("ndd", 200, 80.0), record("none", 200, 70.0), record("none", 6400, 4000.0)]
    twin = RunSpec(task="clinical-spl", defense="ndd", attack="condition-probe", encoder="minilm",
                   server={"pretrain_steps": 6400})
    (estimate,) = estimate_cells([twin], records)
    assert (estimate.seconds, estimate.basis) == (4000.0, "its task and server options (1 records)")
    at_200 = RunSpec(task="clinical-spl", defense="ndd", attack="condition-probe", encoder="minilm",
                     server={"pretrain_steps": 200}, seed=1)
    (estimate,) = estimate_cells([at_200], records)
    assert (estimate.seconds, estimate.basis) == (80.0, "this configuration (1 records)")
    fresh = RunSpec(task="clinical-spl", defense="ndd", attack="name-generation", encoder="minilm",
                    server={"pretrain_steps": 200})
    (estimate,) = estimate_cells([fresh], records)
    assert (estimate.seconds, estimate.basis) == (80.0, "its task, defense and server options (1 records)")


def test_a_dp_sgd_cell_at_a_new_epsilon_is_estimated_from_its_attack_at_other_epsilons():
    """Membership inference retrains a DP-SGD server per shadow: at a new epsilon its cells at other epsilons say
    more than the defense's cells without it."""
    from types import SimpleNamespace

    from bench.core.spec import RunSpec
    from bench.engine.grid import estimate_cells

    def spec(epsilon, attack, seed=0):
        return RunSpec(task="sst2", defense="none", attack=attack, encoder="minilm", n_train=2000, n_eval=500,
                       server={"dp_epsilon": epsilon}, seed=seed)

    def record(epsilon, attack, seconds):
        cell = spec(epsilon, attack)
        return SimpleNamespace(config_hash=cell.config_hash(), seed=0, component_versions=lambda: "",
                               hardware={"device": "cpu"}, spec=cell.to_dict(), runtime_s=seconds)

    records = [record(8.0, "membership", 600.0), record(8.0, None, 45.0), record(1.0, None, 40.0)]
    (new,) = estimate_cells([spec(4.0, "membership")], records)
    assert (new.seconds, new.basis) == (600.0, "its task, defense and attack with other values of its server "
                                               "options (1 records)")


def test_an_attack_at_a_new_size_is_estimated_from_its_own_cells_scaled_by_training_size():
    """Membership inference retrains the server per shadow: its cells at 200 examples say more of a cell at 8,000
    than the defense's other cells at 8,000 do."""
    from types import SimpleNamespace

    from bench.core.spec import RunSpec
    from bench.engine.grid import estimate_cells

    def record(attack, n_train, seconds):
        spec = RunSpec(task="sst2", defense="dchi-token", attack=attack, encoder="minilm", n_train=n_train, n_eval=100)
        return SimpleNamespace(config_hash=spec.config_hash(), seed=0, component_versions=lambda: "", notes={},
                               hardware={"device": "cpu"}, spec=spec.to_dict(), runtime_s=seconds)

    records = [record("membership", 200, 16.0), record("membership", 400, 40.0), record("inversion", 8000, 70.0)]
    cell = RunSpec(task="sst2", defense="dchi-token", attack="membership", encoder="minilm", n_train=8000, n_eval=100)
    (estimate,) = estimate_cells([cell], records)
    assert estimate.seconds == 720.0  # the median of 640 and 800
    assert estimate.basis == "its task, defense and attack at other sizes, scaled by training size (2 records)"
    other = RunSpec(task="sst2", defense="dchi-token", attack="inversion", encoder="minilm", n_train=4000, n_eval=100)
    (estimate,) = estimate_cells([other], records)
    assert estimate.seconds == 35.0


def test_dry_run_counts_the_adapted_checkpoints_a_grid_would_pretrain_first(tmp_path, monkeypatch):
    import bench.data.public_corpus as public
    from bench.engine.builds import pending_builds
    from bench.engine.runner import make_spec
    from bench.models.adaptation import AdaptationConfig

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(public, "public_corpus", lambda *a, **k: (["a public sentence"], "tiny corpus", "hash"))
    adapted = [make_spec(task="sst2", defense="dchi-text", defense_args={"eta": 60.0}, seed=seed,
                         server_args="adapt=denoising") for seed in (0, 1)]
    other = make_spec(task="sst2", defense="dchi-text", defense_args={"eta": 120.0}, server_args="adapt=denoising")
    plain = make_spec(task="sst2", defense="dchi-text", defense_args={"eta": 60.0})
    pending = pending_builds([*adapted, other, plain])
    assert len(pending) == 2 and {b.seconds for b in pending} == {None}  # one per mechanism; nothing times it
    assert {b.what for b in pending} == {"adapted server checkpoint"}
    attacked = [make_spec(task="sst2", defense="dchi-text", defense_args={"eta": eta}, attack="inversion",
                          server_args="adapt=denoising") for eta in (60.0, 120.0)]
    assert pending_builds(attacked) == pending  # run in full, each cell pretrains its server first
    assert pending_builds(attacked, lambda spec: "regenerated release") == []  # inversion reads the table alone

    past = tmp_path / "cache" / "adapted" / "0123456789abcdef"  # an adaptation cached before, at 4 sequences/s
    past.mkdir(parents=True)
    budget = AdaptationConfig("denoising")
    (past / "adaptation.json").write_text(json.dumps({"config": dataclasses.asdict(budget), "sequences_per_s": 4.0}))
    first = pending[0].folder
    first.mkdir()
    (first / "adaptation.json").write_text("{}")  # the eta=60 checkpoint is now cached
    (left,) = pending_builds([*adapted, other, plain])
    assert left.folder == pending[1].folder and left.seconds == budget.steps * budget.batch_size / 4.0


def test_dry_run_counts_the_offline_mlms_a_defense_or_attack_would_train_first(tmp_path, monkeypatch):
    import bench.data.public_corpus as public
    from bench.engine.builds import pending_builds
    from bench.engine.runner import make_spec

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(public, "public_corpus", lambda *a, **k: (["a public sentence"], "tiny corpus", "hash"))
    cells = [make_spec(task="sst2", defense="dp-mlm", defense_args={"eps": eps}, attack="inversion")
             for eps in (10.0, 50.0)]
    (mlm,) = pending_builds(cells)  # one MLM for SST-2, whatever eps
    assert mlm.what == "offline MLM" and mlm.seconds is None
    assert pending_builds(cells, lambda spec: "stored release") == []  # the defense does not run again
    attacked = make_spec(task="sst2", defense="dchi-text", defense_args={"eta": 60.0}, attack="mask-inference",
                         attack_args="mlm=minilm-mlm@200")
    (weaker,) = pending_builds([attacked], lambda spec: "stored release")  # the attack's own MLM is still needed
    assert weaker.folder != mlm.folder
    assert pending_builds([make_spec(task="sst2", defense="dchi-text", defense_args={"eta": 60.0},
                                     attack="inversion")]) == []

    past = tmp_path / "mlm" / "0123456789abcdef"  # an MLM cached before: 800 steps in 400 s
    past.mkdir(parents=True)
    (past / "info.json").write_text(json.dumps({"recipe": {"smoke": False}, "steps": 800, "seconds": 400.0}))
    assert pending_builds([attacked])[0].seconds == 100.0  # 200 steps at half a second each
    mlm.folder.mkdir()
    (mlm.folder / "info.json").write_text("{}")
    assert pending_builds(cells) == []


def test_a_grids_time_left_is_the_median_cell_and_the_checkpoints_still_to_pretrain(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from bench.cli.commands.run import _GridProgress

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    from bench.core.files import Build

    builds = [Build("adapted server checkpoint", tmp_path / "adapted" / key, "adaptation.json", seconds)
              for key, seconds in (("aaaa", 600.0), ("bbbb", None))]  # bbbb: no past adaptation to time it
    progress = _GridProgress(6, builds)
    lines = []
    for runtime in (700.0, 60.0, 60.0):  # the first cell pretrained a checkpoint the others share
        progress.record(None, SimpleNamespace(metrics={"utility/accuracy": 0.5}, runtime_s=runtime))
        lines.append(progress.after("done"))
    assert "1 of 6 cells, about 68 min left" in lines[0]  # 700 s for each of 5 cells, and 600 s for aaaa
    assert "3 of 6 cells, about 13 min left" in lines[2]  # 60 s for each of 3 cells, and 600 s for aaaa
    (tmp_path / "adapted" / "aaaa").mkdir(parents=True)
    (tmp_path / "adapted" / "aaaa" / "adaptation.json").write_text("{}")
    assert "4 of 6 cells, about 2 min left" in progress.after("skipped")  # aaaa is built
