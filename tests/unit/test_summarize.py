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


def _versioned(seed, attack_version, metrics):
    return make_record(seed, versions={"bench": "0.1.0", "task": "sst2@1", "defense": "texthide@1",
                                       "attack": f"rss@{attack_version}"}, metrics=metrics)


def test_only_a_configurations_newest_component_versions_count(tmp_path):
    """A version bump re-run on seeds 0-2 replaces seeds 0-4 of the old version: the old seeds 3-4 neither join the
    mean nor keep a metric the new version dropped (they gave mean 0.645 over n = 5 before)."""
    from bench.reproduction.reproduce import summarize_cell
    from bench.results.leaderboard import leaderboard_frame

    old = [_versioned(s, 1, {"privacy/rss/identity": 0.27, "privacy/rss/tfidf": 0.3}) for s in range(5)]
    new = [_versioned(s, 2, {"privacy/rss/identity": 0.9}) for s in range(3)]
    for records in (old + new, new + old):  # file order does not decide
        board = leaderboard_frame(records).set_index("metric")
        assert board.at["privacy/rss/identity", "mean"] == 0.9 and board.at["privacy/rss/identity", "n"] == 3
        assert "privacy/rss/tfidf" not in board.index
        cell = summarize_cell(records, "privacy/rss/identity")
        assert (cell.mean, cell.n) == (0.9, 3)


def test_the_summary_pools_a_random_guess_only_within_one_encoder(tmp_path):
    from rich.console import Console

    from bench.cli.commands.summarize import summary_table
    from bench.results.leaderboard import leaderboard_frame

    records = []
    for encoder, guess in (("minilm", 0.1), ("mock-4", 0.3)):
        spec = {**make_record().spec, "encoder": encoder}
        records += [make_record(0, config_hash=encoder, spec=spec, metrics={
            "utility/accuracy": 0.7, "privacy/rss/identity": 0.0, "random/rss/identity": guess})]
    console = Console(width=200, record=True)
    console.print(summary_table(leaderboard_frame(records)))
    lines = console.export_text().splitlines()
    assert any("random guess (minilm)" in line and "0.100" in line for line in lines)
    assert any("random guess (mock-4)" in line and "0.300" in line for line in lines)
    assert not any("0.200" in line for line in lines)  # the pooled mean of both, which matches neither
