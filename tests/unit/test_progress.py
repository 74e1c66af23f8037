"""Progress bars show on a terminal only, and never when BENCH_QUIET is set."""

from bench.core.progress import progress_bar


def test_a_budget_bar_shows_its_latest_description_on_a_terminal(monkeypatch, capsys):
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich then treats stderr as a terminal
    with progress_bar("training", 1.0, completed=0.25) as update:  # a run resumed a quarter of the way
        update(0.5, "training: step 50")
    assert "training: step 50" in capsys.readouterr().err


def test_no_bar_when_quiet(monkeypatch, capsys):
    monkeypatch.setenv("BENCH_QUIET", "1")
    monkeypatch.setenv("FORCE_COLOR", "1")
    with progress_bar("training", 1.0) as update:
        update(0.5, "training: step 50")
    assert capsys.readouterr().err == ""


def test_no_bar_when_the_caller_turns_it_off(monkeypatch, capsys):
    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    with progress_bar("training", 1.0, enabled=False) as update:  # the caller prints its own progress lines
        update(0.5, "training: step 50")
    assert capsys.readouterr().err == ""
