"""The Streamlit leaderboard, driven headless with AppTest."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bench.leaderboard import summarize
from bench.store import ResultStore
from tests.unit.test_store import make_record

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
REPO_RESULTS = Path(__file__).resolve().parents[2] / "results"


def board_with_two_defenses(root: Path) -> None:
    store = ResultStore(root)
    for seed in range(2):
        store.append(make_record(seed))
        store.append(make_record(seed, defense="none", config_hash="def456",
                                 spec={**make_record().spec, "defense": "none", "defense_args": {}},
                                 metrics={"utility/accuracy": 0.8, "privacy/rss/identity": 1.0,
                                          "random/rss/identity": 0.01}))
    summarize(store)


def run_app(results: Path) -> AppTest:
    import os

    os.environ["BENCH_RESULTS_DIR"] = str(results)
    try:
        return AppTest.from_file(APP, default_timeout=60).run()
    finally:
        del os.environ["BENCH_RESULTS_DIR"]


def test_table_and_scatter(tmp_path):
    board_with_two_defenses(tmp_path)
    app = run_app(tmp_path)
    assert not app.exception
    table = app.dataframe[0].value
    assert set(table["defense"]) == {"none", "texthide"}
    assert "utility/accuracy" in table.columns
    assert any("rss" in header.value for header in app.subheader)
    charts = app.get("vega_lite_chart")
    assert len(charts) == 1
    proto = charts[0].proto
    data = "".join(d.data.data.decode("latin-1") for d in proto.datasets)  # Arrow bytes
    assert "texthide(m=256,k=4)" in data and "none" in data  # each point labelled with its defense
    assert '"rule"' in proto.spec and "random guess" in data  # the random-guess baseline


def test_filters_narrow_the_table(tmp_path):
    board_with_two_defenses(tmp_path)
    app = run_app(tmp_path)
    app.sidebar.multiselect(key="attack").set_value([]).run()
    assert not app.exception
    assert app.subheader.len == 0


def test_empty_results_explain_what_to_do(tmp_path):
    app = run_app(tmp_path)
    assert not app.exception
    assert "bench summarize" in app.info[0].value


@pytest.mark.skipif(not (REPO_RESULTS / "leaderboard.csv").is_file(), reason="no committed leaderboard")
def test_committed_leaderboard_renders():
    app = run_app(REPO_RESULTS)
    assert not app.exception
    assert len(app.dataframe[0].value) >= 4
