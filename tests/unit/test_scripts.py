"""A smoke test per script in scripts/: each runs on tiny input and checks what it prints or returns.

The scripts are measurements a reader runs by hand. These tests keep them working, not their figures.
scripts/adaptation_table.py is tested where the dashboard and the docs use it (test_dashboard, test_docs).
"""

from __future__ import annotations

import importlib.util
import json
import re
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import write_tiny_glue

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def load(name: str):
    """The script ``scripts/<name>.py`` as a module (its ``main`` not run)."""
    spec = importlib.util.spec_from_file_location(f"script_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(name: str, *args: str, monkeypatch) -> int:
    """Run ``scripts/<name>.py`` as ``__main__`` with ``args``; its exit code (0 when it returns)."""
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / f"{name}.py"), *args])
    try:
        runpy.run_path(str(SCRIPTS / f"{name}.py"), run_name="__main__")
    except SystemExit as exc:
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    return 0


def test_every_script_has_a_smoke_test():
    tested = set(re.findall(r'(?:load|run_script)\("(\w+)"', Path(__file__).read_text(encoding="utf-8")))
    scripts = {p.stem for p in SCRIPTS.glob("*.py")}
    assert scripts - tested - {"adaptation_table"} == set()


def test_compare_cells_diff_exits_1_on_a_changed_metric(tmp_path, monkeypatch, capsys):
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps({"a": {"utility/accuracy": 0.8, "privacy/rss/identity": 0.1}}))
    after.write_text(json.dumps({"a": {"utility/accuracy": 0.8, "privacy/rss/identity": 0.1}}))
    assert run_script("compare_cells", "diff", str(before), str(after), monkeypatch=monkeypatch) == 0
    after.write_text(json.dumps({"a": {"utility/accuracy": 0.81, "privacy/rss/identity": 0.1}}))
    assert run_script("compare_cells", "diff", str(before), str(after), monkeypatch=monkeypatch) == 1
    assert "DIFFERS a utility/accuracy 0.8 0.81" in capsys.readouterr().out


def test_board_screenshot_runs_the_browser_test_with_the_target_and_passes_its_exit_code(tmp_path, monkeypatch):
    script = load("board_screenshot")
    calls = []

    def fake_run(command, cwd, env):
        calls.append((command, env))
        return type("Done", (), {"returncode": 3})()

    monkeypatch.setattr(script.subprocess, "run", fake_run)
    monkeypatch.setattr(sys, "argv", ["board_screenshot.py", str(tmp_path / "board.png")])
    assert script.main() == 3
    command, env = calls[0]
    assert command[-1] == "tests/browser" and env["BENCH_SCREENSHOT"] == str(tmp_path / "board.png")


def test_check_pairs_lists_the_variants_and_prints_each_timed_cell(tmp_path, monkeypatch, capsys):
    script = load("check_pairs")
    found = script.cells(False, ["sst2"], ["santext"], ["mask-inference", "rss"])
    assert found == [["--task", "sst2", "--defense", "santext", "--attack", "mask-inference"],
                     ["--task", "sst2", "--defense", "santext", "--attack", "mask-inference",
                      "--attack-args", "adapted=denoising"]]  # rss does not read tokens
    monkeypatch.setattr(script, "time_cell", lambda args, timeout: {
        "command": "bench run " + " ".join(args) + " --check", "seconds": 61.0, "exit": 0, "error": "",
        "smoke_budget": None, "load_before": 1.0, "load_after": 1.0})
    monkeypatch.setattr(sys, "argv", ["check_pairs.py", "--task", "sst2", "--defense", "santext", "--attack",
                                      "mask-inference", "--json", str(tmp_path / "rows.json")])
    script.main()
    assert "2 cells, 0 failed, 2 over 60 s" in capsys.readouterr().out
    assert len(json.loads((tmp_path / "rows.json").read_text())["rows"]) == 2


def test_head_step_cost_times_a_step_and_compares_the_adam_paths():
    import torch

    script = load("head_step_cost")
    with torch.random.fork_rng():  # the script seeds torch's global generator
        assert script.head_step_ms(8, epochs=1, steps_per_epoch=2) > 0 and script.products_ms(8, repeats=5) > 0
        foreach_s, fused_s, same = script.adam_paths(steps=3, width=8)
    assert foreach_s > 0 and fused_s > 0 and isinstance(same, bool)


def test_known_limits_gradient_signs_recovers_the_magnitudes(monkeypatch, capsys):
    import torch

    with torch.random.fork_rng():  # the script seeds torch's global generator
        assert run_script("known_limits", "gradient-signs", monkeypatch=monkeypatch) == 0
    lines = capsys.readouterr().out.splitlines()
    magnitudes = [float(re.search(r"mse of magnitudes ([\d.e+-]+)", line).group(1)) for line in lines]
    signs = [float(re.search(r"signs agreeing ([\d.]+)", line).group(1)) for line in lines]
    assert len(magnitudes) == 6 and np.median(magnitudes) < 1e-2 and np.mean(signs) < 0.8  # what the mask hides


def test_condition_link_says_which_checkpoints_are_not_cached(committed_records, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))  # an empty cache: no released checkpoint is there
    assert run_script("condition_link", "--results-dir", str(ROOT / "results"), monkeypatch=monkeypatch) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    probed = {r.config_hash for r in committed_records if r.spec["task"] == "clinical-spl"
              and r.spec["attack"] == "condition-probe" and "pretrain_key" in r.notes}
    assert len(rows) == len(probed) > 0 and all("not cached: rerun the cell" in row for row in rows)


def test_condition_baseline_prints_both_priors_per_task(monkeypatch, capsys):
    assert run_script("condition_baseline", "--n-train", "40", "--n-eval", "10", monkeypatch=monkeypatch) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        f"{task}, prior over {prior}" for task in ("clinical-deid", "clinical-spl")
        for prior in ("held-out patients (version 4)", "every patient (version 3)")]
    assert all(0 <= float(re.search(r"auc ([\d.]+)", line).group(1)) <= 1 for line in lines)


def test_main_job_phases_times_the_training_of_a_small_cell(tmp_path, monkeypatch, capsys):
    import bench.engine.runner as runner
    import bench.models.servers as servers
    import bench.models.training as training

    monkeypatch.setenv("BENCH_DATA_DIR", str(write_tiny_glue(tmp_path / "data")))
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(training, "train_loop", training.train_loop)  # the script replaces these: put them back
    monkeypatch.setattr(servers, "train_loop", servers.train_loop)
    monkeypatch.setattr(runner, "run_cell", runner.run_cell)
    assert run_script("main_job_phases", "--encoder", "mock", "--n-train", "64", "--n-eval", "32", "--train-args",
                      "epochs=1", monkeypatch=monkeypatch) == 0
    err = capsys.readouterr().err
    assert re.search(r"start to training [\d.]+ s, training [\d.]+ s", err) and "RSS identity" in err


def write_tiny_treebank(root: Path) -> Path:
    """``ptb/treebank.zip`` in NLTK's layout: two training files and one evaluation file of invented trees."""
    import zipfile

    trees = {1: ["( (S (NP-SBJ (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)) )",
                 "( (S (NP-SBJ (PRP It)) (VP (VBD rained)) (. .)) )"],
             2: ["( (S (NP-SBJ (NNP Ann)) (VP (VBD saw) (NP (NP (DT a) (NN dog)) (PP (IN with) (NP (NNS spots)))))"
                 " (. .)) )"],
             160: ["( (S (NP-SBJ (DT A) (NN bird)) (VP (VBD sang)) (. .)) )"]}
    (root / "ptb").mkdir(parents=True)
    with zipfile.ZipFile(root / "ptb" / "treebank.zip", "w") as archive:
        for number, sentences in trees.items():
            archive.writestr(f"treebank/combined/wsj_{number:04d}.mrg", "\n".join(sentences) + "\n")
    return root


def whitespace_tokenizer(texts):
    """Word pieces as words, with [CLS] and [SEP]: the tokenizer's interface at no loading cost."""
    return {"input_ids": [[101, *range(len(text.split())), 102] for text in texts]}


def test_ndd_ptb_cost_prints_the_cost_of_each_cap(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCH_DATA_DIR", str(write_tiny_treebank(tmp_path)))
    script = load("ndd_ptb_cost")
    monkeypatch.setattr(script, "load_encoder", lambda name: type("Encoder", (), {"tokenizer": whitespace_tokenizer}))
    words, pieces, counts = script.workload(script.PTB(), 10, whitespace_tokenizer)
    assert sorted(words) == [3, 7, 7] and (pieces == words + 2).all()
    assert sorted(counts["every NP"]) == [1, 2, 3] and np.allclose(counts["33% of the NPs"], 0.33 * counts["every NP"])
    monkeypatch.setattr(sys, "argv", ["ndd_ptb_cost.py", "--caps", "5", "0"])
    script.main()
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows["5"][1] == "1" and rows["none"][1] == "3" and rows["none"][-1] == "1.00×"  # the full-length unit


def test_ndd_precision_agreement_runs_both_precisions_on_the_same_candidates(tmp_path, monkeypatch, capsys):
    from bench.models import mlm as mlm_module

    from .tiny_models import tiny_masked_lm

    tiny = tiny_masked_lm(max_positions=64)
    script = load("ndd_precision_agreement")
    monkeypatch.setattr(mlm_module, "shared_mlm", lambda *args, **kwargs: tiny)  # what the defense loads
    monkeypatch.setattr(script, "shared_mlm", lambda *args, **kwargs: tiny)
    monkeypatch.setenv("BENCH_DATA_DIR", str(write_tiny_treebank(tmp_path)))
    monkeypatch.setattr(sys, "argv", ["ndd_precision_agreement.py", "--task", "ptb", "--pool", "own", "--n-train",
                                      "10", "--examples", "1", "--k", "2", "--window", "4"])
    script.main()
    out = capsys.readouterr().out
    spans = int(re.search(r"1 examples, (\d+) spans", out).group(1))
    assert spans > 0 and re.search(rf"same candidate kept in \d+ of {spans} spans", out)


def test_probe_tolerance_finds_no_spread_where_the_encoder_is_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_DIR", str(write_tiny_glue(tmp_path / "data")))
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "tolerance.json"
    assert run_script("probe_tolerance", "--tasks", "sst2", "--n-train", "48", "--n-eval", "24", "--noise-draws", "1",
                      "--encoder", "mock", "--epochs", "2", "--out", str(out), monkeypatch=monkeypatch) == 0
    [result] = json.loads(out.read_text())
    assert [v["variant"] for v in result["variants"]][-1] == "bf16-sized noise, draw 0" and len(result["variants"]) == 5
    encodings = [v for v in result["variants"] if v["kind"] == "encoding"]
    # the mock encoder ignores threads, batches and order: any spread would be the script's own doing
    assert all(v["max_feature_change_in_stds"] == 0 and v["probe_predictions_changed"] == 0 for v in encodings)
    assert set(result["spread"]["encodings"]["probe"].values()) == {0.0}


class FakeBench:
    """``executor_throughput.bench`` without cells: each process appends one committed record to the results."""

    def __init__(self, record_line: str, fail: bool = False) -> None:
        self.record_line, self.fail, self.calls = record_line, fail, []

    def __call__(self, args, env):
        import subprocess

        self.calls.append(args)
        folder = Path(args[args.index("--results-dir") + 1]) / "records"
        code = ("import sys, pathlib; folder = pathlib.Path(sys.argv[1]); folder.mkdir(parents=True, exist_ok=True); "
                "(folder / 'none.jsonl').open('a').write(sys.argv[2] + '\\n')")
        if self.fail:
            code = "import sys; sys.exit('error: the grid failed')"
        return subprocess.Popen([sys.executable, "-c", code, str(folder), self.record_line], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


def test_executor_throughput_launches_each_executor_and_reads_its_records(tmp_path, monkeypatch, capsys):
    script = load("executor_throughput")
    line = next(line for line in (ROOT / "results" / "records" / "none.jsonl").read_text().splitlines() if line)
    fake = FakeBench(line)
    monkeypatch.setattr(script, "bench", fake)
    grid = tmp_path / "grid.yaml"
    row = script.measure("shard2", grid, tmp_path, 2, timeout=60)
    assert [call[-1] for call in fake.calls] == ["1/2", "2/2"] and row["cells"] == 2
    assert row["mean_cell_s"] == pytest.approx(json.loads(line)["runtime_s"])
    script.measure("ray2", grid, tmp_path, 2, timeout=60)
    assert fake.calls[-1][-2:] == ["--executor", "ray"]
    with pytest.raises(script.Failed, match="the grid failed"):
        script.finish([FakeBench(line, fail=True)(["--results-dir", str(tmp_path)], {})], 60)
    from bench.engine.grid import load_grid

    grids = []
    monkeypatch.setattr(script, "measure", lambda name, grid, *rest: grids.append(load_grid(grid)) or {
        "executor": name, "cells": 4, "wall_s": 1.0, "cells_per_min": 240.0, "mean_cell_s": 0.1, "overhead_s": 0.2})
    monkeypatch.setattr(sys, "argv", ["executor_throughput.py", "--cells", "4", "--executors", "local"])
    script.main()
    assert len(grids[0]) == 4 and "| local | 1 | 4 | 1.0 | 240.0 |" in capsys.readouterr().out


def test_abs_rss_mixing_finds_every_unmixed_row_and_reads_the_members_off_the_targets(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCH_DATA_DIR", str(write_tiny_glue(tmp_path / "data")))
    figures = load("abs_rss_mixing").main(["--encoder", "mock", "--n-train", "40", "--n-eval", "40", "--ks", "1,3",
                                           "--candidates", "10"])
    unmixed, mixed = figures[1], figures[3]
    # k = 1 only masks: absolute values find every row, and every row's one member is its owner
    assert unmixed["abs"] == unmixed["ceiling"] == unmixed["nnls_recall"] == 1.0 and unmixed["rss"] < 1.0
    assert mixed["ceiling"] < 1.0 and 0.0 <= mixed["abs"] <= mixed["abs_member"] <= 1.0
    assert len(capsys.readouterr().out.strip().splitlines()) == 2


def test_estimate_error_estimates_each_recorded_configuration_from_the_others(tmp_path, monkeypatch, capsys):
    import shutil

    (tmp_path / "records").mkdir()
    shutil.copy(ROOT / "results" / "records" / "none.jsonl", tmp_path / "records")  # DP-SGD cells among them
    assert run_script("estimate_error", "--results-dir", str(tmp_path), monkeypatch=monkeypatch) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    assert [row[0].strip("| ") for row in rows] == ["all", "with server options", "with server options"]
    assert all(int(row[2]) > 0 and float(row[3]) >= 1.0 for row in rows)  # every error is at least 1 (exact)
