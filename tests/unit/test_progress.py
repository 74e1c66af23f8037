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


def test_a_log_gets_a_progress_line_with_the_time_left_at_this_runs_rate(monkeypatch, capsys):
    import bench.core.progress as progress

    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)  # stderr is captured, not a terminal
    clock = iter([0.0, 60.0, 61.0, 120.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    with progress_bar("rewriting", 100.0, completed=40.0, log_every=60) as update:  # resumed at 40%
        update(50.0, "rewriting: span 7")  # 10 units in 60 s: 50 left take 5 min
        update(55.0)  # a second later: no line
        update(60.0)
    assert capsys.readouterr().err.splitlines() == ["rewriting: span 7: 50% done, about 5 min left at this run's rate",
                                                   "rewriting: 60% done, about 4 min left at this run's rate"]


def test_a_long_loop_in_a_log_prints_a_line_every_log_every_seconds(monkeypatch, capsys):
    import bench.core.progress as progress
    from bench.core.progress import track

    monkeypatch.delenv("BENCH_QUIET", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    clock = iter([0.0, 1.0, progress.LOG_EVERY, progress.LOG_EVERY + 1.0])  # the bar's start, then one per item
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    assert list(track(["a", "b", "c"], "encoding")) == ["a", "b", "c"]
    minutes = progress.LOG_EVERY / 60  # the first item took LOG_EVERY seconds, so two more take twice that
    assert capsys.readouterr().err == f"encoding: 33% done, about {2 * minutes:.0f} min left at this run's rate\n"
    monkeypatch.setenv("BENCH_QUIET", "1")
    assert list(track(iter("ab"), "quiet")) == ["a", "b"] and capsys.readouterr().err == ""
