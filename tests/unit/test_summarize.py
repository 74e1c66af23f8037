"""Leaderboard: mean, std and n over seeds per configuration."""

import pandas as pd
from scipy import stats

from bench.results.leaderboard import summarize
from bench.results.store import ResultStore
from tests.unit.test_store import make_record


def test_aggregates_seeds(tmp_path):
    store = ResultStore(tmp_path)
    for seed in range(3):
        store.append(make_record(seed))
    path, rows, problems = summarize(store)
    table = pd.read_csv(path)
    accuracy = table[table["metric"] == "utility/accuracy"].iloc[0]
    assert accuracy["n"] == 3
    assert abs(accuracy["mean"] - 0.6) < 1e-9 and abs(accuracy["std"] - 0.1) < 1e-9
    # the 95% interval of the mean over 3 seeds: t(0.975, 2) = 4.303, so 4.303 x 0.1 / sqrt(3)
    low, high = stats.t.interval(0.95, 2, loc=0.6, scale=0.1 / 3**0.5)
    assert abs(accuracy["ci95"] - (high - 0.6)) < 1e-6 and abs((0.6 - accuracy["ci95"]) - low) < 1e-6  # csv: 6 places
    assert accuracy["defense_args"] == "m=256,k=4"
    assert rows == 3 and problems == []


def test_rerun_of_one_seed_counts_once(tmp_path):
    store = ResultStore(tmp_path)
    store.append(make_record(0))
    store.append(make_record(0))
    path, _, _ = summarize(store)
    table = pd.read_csv(path)
    assert set(table["n"]) == {1} and table["ci95"].isna().all()  # no interval from one seed


def test_summarizing_the_committed_records_reproduces_the_committed_leaderboard(tmp_path):
    """Every committed record loads (migrated where needed) and the leaderboard built from them is, byte for byte,
    the committed results/leaderboard.csv."""
    import shutil
    from pathlib import Path

    from bench.results.leaderboard import summarize
    from bench.results.store import ResultStore

    results = Path(__file__).resolve().parents[2] / "results"
    shutil.copytree(results / "records", tmp_path / "records")
    path, rows, problems = summarize(ResultStore(tmp_path))
    assert not problems and rows > 0
    assert path.read_bytes() == (results / "leaderboard.csv").read_bytes()
