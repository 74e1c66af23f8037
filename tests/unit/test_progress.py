"""Progress of long steps: bars on a terminal, lines with the rate and the time left in a log, none when asked."""

import itertools

import pytest
from typer.testing import CliRunner

import bench.core.progress as progress
from bench.cli.main import app
from bench.core.progress import progress_bar, reporting, track

runner = CliRunner()


@pytest.fixture
def slow_steps(monkeypatch):
    """Every look at the clock is 30 s after the one before: each loop looks like a step of minutes."""
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)  # stderr is captured, not a terminal: lines, not bars
    ticks = itertools.count(0.0, 30.0)
    monkeypatch.setattr(progress, "_clock", lambda: next(ticks))


def test_a_budget_bar_shows_its_latest_description_on_a_terminal(monkeypatch, capsys):
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich then treats stderr as a terminal
    with progress_bar("training", 100.0, completed=25.0) as update:  # a run resumed a quarter of the way
        update(50.0, "training: step 50")
    assert "training: step 50" in capsys.readouterr().err


def test_no_bar_when_quiet_unless_asked(monkeypatch, capsys):
    monkeypatch.setenv("BENCH_QUIET", "1")
    monkeypatch.setenv("FORCE_COLOR", "1")
    with progress_bar("training", 1.0) as update:
        update(0.5, "training: step 50")
    assert capsys.readouterr().err == ""
    with reporting(True), progress_bar("training", 1.0) as update:  # --progress beats BENCH_QUIET
        update(0.5, "training: step 50")
    assert "training: step 50" in capsys.readouterr().err


def test_no_bar_when_the_caller_turns_it_off(monkeypatch, capsys):
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    with progress_bar("training", 1.0, enabled=False) as update:
        update(0.5, "training: step 50")
    with reporting(False), progress_bar("training", 1.0) as update:  # bench run --json
        update(0.5, "training: step 50")
    assert capsys.readouterr().err == ""


def test_a_log_line_gives_the_rate_and_the_time_left_at_this_runs_rate(monkeypatch, capsys):
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)  # stderr is captured, not a terminal
    clock = iter([0.0, 5.0, 60.0, 61.0, 121.0, 130.0])
    monkeypatch.setattr(progress, "_clock", lambda: next(clock))
    with progress_bar("rewriting", 100.0, completed=40.0, unit="spans") as update:  # resumed at 40
        update(41.0)  # 5 s in: too early for a line
        update(50.0, "rewriting: span 50")  # 10 spans in 60 s: 50 left take 5 min
        update(51.0)  # a second later: no line
        update(60.0)  # 20 spans in 121 s
    assert capsys.readouterr().err.splitlines() == [
        "rewriting: span 50: 50%, 50/100 spans, 10 spans/min, about 5 min 0 s left",
        "rewriting: span 50: 60%, 60/100 spans, 9.92 spans/min, about 4 min 2 s left",
        "rewriting: span 50: done, 60/100 spans in 2 min 10 s"]


def test_a_step_shorter_than_ten_seconds_says_nothing_in_a_log(monkeypatch, capsys):
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    ticks = itertools.count(0.0, 0.5)
    monkeypatch.setattr(progress, "_clock", lambda: next(ticks))
    assert list(track(["a", "b", "c"], "encoding", unit="batches")) == ["a", "b", "c"]
    assert capsys.readouterr().err == ""


def test_a_long_step_of_a_cell_reports_its_rate_and_time_left(tiny_data, slow_steps, capsys):
    """A cell with the mock encoder whose every step is slow: encoding and the head's training say how far they are,
    at what rate and how long is left; the cell's figures still come on stdout."""
    from bench.engine.runner import make_spec, run_cell

    run_cell(make_spec(defense="none", encoder="mock", training_args="epochs=4"))
    lines = capsys.readouterr().err.splitlines()
    encoding = [line for line in lines if line.startswith("encoding 400 texts (mock)")]
    assert encoding and "texts/min" in encoding[0] and "left" in encoding[0] and "/400 texts" in encoding[0]
    assert any(line.startswith("encoding") and ": done, 400/400 texts in" in line for line in lines)
    training = [line for line in lines if "epochs" in line and "left" in line]
    assert training and "/4 epochs" in training[0], lines


def test_json_turns_progress_off_unless_asked(tiny_data, slow_steps, tmp_path):
    args = ["run", "--encoder", "mock", "--train-args", "epochs=2", "--no-save", "--json"]
    quiet = runner.invoke(app, args)
    assert quiet.exit_code == 0, quiet.output
    assert "texts/min" not in quiet.stderr and quiet.stdout.lstrip().startswith("{")
    asked = runner.invoke(app, [*args, "--progress"])
    assert asked.exit_code == 0, asked.output
    assert "texts/min" in asked.stderr and asked.stdout.lstrip().startswith("{")


def test_a_grid_line_gives_the_cells_figures_and_the_cells_left(tiny_data, tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("tasks: [sst2]\nencoders: [mock]\ndefenses: [none]\nattacks: [rss]\nseeds: [0, 1]\n"
                    "settings: {training_args: 'epochs=1', attack_args: 'sbert=mock'}\n")
    result = runner.invoke(app, ["run", "--grid", str(grid), "--results-dir", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip().startswith("done")]
    assert len(lines) == 2 and "accuracy" in lines[0] and "rss identity 1.000 (random" in lines[0]
    assert "1 of 2 cells, about" in lines[0] and "left" in lines[0] and lines[1].endswith("2 of 2 cells")
