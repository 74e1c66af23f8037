"""The Streamlit leaderboard, driven headless with AppTest."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bench.results.leaderboard import summarize
from bench.results.store import ResultStore
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


@pytest.fixture
def run_app(monkeypatch):
    """Start the app on a results folder (the variable stays set for later reruns of the app)."""

    def start(results: Path) -> AppTest:
        monkeypatch.setenv("BENCH_RESULTS_DIR", str(results))
        return AppTest.from_file(APP, default_timeout=60).run()

    return start


def test_table_and_scatter(tmp_path, run_app):
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


def test_filters_narrow_the_table(tmp_path, run_app):
    board_with_two_defenses(tmp_path)
    app = run_app(tmp_path)
    assert app.subheader.len == 1
    app.sidebar.multiselect(key="attack").set_value([]).run()
    assert not app.exception
    assert app.subheader.len == 0 and "No results match" in app.info[0].value  # every row has an attack
    app.sidebar.multiselect(key="attack").set_value(["rss"]).run()
    app.sidebar.multiselect(key="encoder").set_value([]).run()
    assert not app.exception and app.subheader.len == 0 and "No results match" in app.info[0].value


def test_empty_results_explain_what_to_do(tmp_path, run_app):
    app = run_app(tmp_path)
    assert not app.exception
    assert "bench summarize" in app.info[0].value


@pytest.mark.skipif(not (REPO_RESULTS / "leaderboard.csv").is_file(), reason="no committed leaderboard")
def test_committed_leaderboard_renders(run_app):
    app = run_app(REPO_RESULTS)
    assert not app.exception
    assert len(app.dataframe[0].value) >= 4


def board_with_a_sweep(root: Path) -> None:
    store = ResultStore(root)
    for seed in range(2):
        for eta, recovered in ((10, 0.01), (60, 0.3), (250, 0.99)):
            spec = {**make_record().spec, "defense": "dchi-text", "defense_args": {"eta": float(eta)},
                    "attack": "inversion"}
            store.append(make_record(seed, defense="dchi-text", config_hash=f"eta{eta}", spec=spec,
                                     metrics={"utility/accuracy": 0.5 + eta / 1000,
                                              "privacy/inversion/token_accuracy": recovered,
                                              "random/inversion/token_accuracy": 0.0}))
    summarize(store)


def test_sweeps_find_the_one_varying_parameter(tmp_path):
    import pandas as pd

    from dashboard.sweeps import sweeps

    board_with_a_sweep(tmp_path)
    board_with_two_defenses(tmp_path)  # texthide has one setting: not a sweep
    found = sweeps(pd.read_csv(tmp_path / "leaderboard.csv", keep_default_na=False, na_values=[""]))
    assert set(found["defense"]) == {"dchi-text"} and set(found["parameter"]) == {"eta"}
    assert sorted(found["value"].unique()) == [10.0, 60.0, 250.0]


def test_sweep_chart_plots_utility_and_inversion_against_eta(tmp_path, run_app):
    board_with_a_sweep(tmp_path)
    app = run_app(tmp_path)
    assert not app.exception
    assert any("sweeps" in header.value for header in app.subheader)
    charts = app.get("vega_lite_chart")
    spec = charts[-1].proto.spec
    assert '"log"' in spec and "eta" in spec
    data = "".join(d.data.data.decode("latin-1") for d in charts[-1].proto.datasets)
    assert "utility/accuracy" in data and "privacy/inversion/token_accuracy" in data


def write_deniability_report(root: Path) -> None:
    """A small synthetic `bench analyze deniability` file: N_w rises and S_w falls with eta."""
    per_eta = []
    for eta, kept, support in ((30.0, [0, 1, 2, 5], [180, 150, 120, 90]), (60.0, [200, 300, 400, 900], [60, 40, 30, 5]),
                               (120.0, [950, 990, 1000, 1000], [3, 2, 1, 1])):
        per_eta.append({"eta": eta, "mean_noise_radius": 384 / eta, "n_w": kept, "s_w": support})
    report = {
        "schema_version": 1, "analysis": "deniability", "mechanism": "dchi-text", "parameter": "eta",
        "encoder": "minilm", "trials": 1000, "tokens": 4, "token_sample": "seeded", "seed": 0,
        "etas": [30.0, 60.0, 120.0], "per_eta": per_eta,
        "thresholds": {"max_unchanged": 0.5, "min_support": 10, "quantile": 0.95},
        "selections": {
            "worst_case": {"eta": 30.0, "by_statistic": {"n_w": 30.0, "s_w": 30.0}, "rule": "0.95 quantile ..."},
            "average_case": {"eta": 60.0, "by_statistic": {"n_w": 60.0, "s_w": 60.0}, "rule": "mean ..."},
        },
        "command": "bench analyze deniability --tokens 4",
    }
    (root / "analysis").mkdir(parents=True)
    (root / "analysis" / "deniability-minilm.json").write_text(json.dumps(report))


def test_deniability_tab_plots_n_w_and_s_w_against_eta(tmp_path, run_app):
    write_deniability_report(tmp_path)
    (tmp_path / "analysis" / "deniability-broken.json").write_text("{not json")
    app = run_app(tmp_path)
    assert not app.exception
    assert [tab.label for tab in app.tabs] == ["Leaderboard", "Plausible deniability", "Paper vs ours"]
    assert "bench summarize" in app.info[0].value  # the leaderboard tab still explains itself
    assert "deniability\\-broken\\.json" in app.warning[0].value  # a bad file is named (shown literally) and skipped
    selections = app.dataframe[0].value.set_index("rule")
    assert selections.loc["worst case", "selected eta"] == "30"
    assert selections.loc["average case", "selected eta"] == "60"
    charts = app.get("vega_lite_chart")
    assert len(charts) == 2
    for chart, statistic in zip(charts, ("N_w", "S_w")):
        assert statistic in chart.proto.spec and '"eta"' in chart.proto.spec and '"rule"' in chart.proto.spec
    data = "".join(d.data.data.decode("latin-1") for d in charts[0].proto.datasets)
    assert "n_w" in data and "bound 0.5" in data  # the quantiles of N_w and the selection bound


def test_deniability_tab_without_analysis_says_how_to_make_one(tmp_path, run_app):
    app = run_app(tmp_path)
    assert not app.exception
    assert any("bench analyze deniability" in info.value for info in app.info)


@pytest.mark.skipif(not (REPO_RESULTS / "analysis" / "deniability-minilm.json").is_file(),
                    reason="no committed deniability analysis")
def test_committed_deniability_analysis_renders(run_app):
    app = run_app(REPO_RESULTS)
    assert not app.exception
    assert not app.warning  # the committed file reads cleanly
    assert any("N_w" in chart.proto.spec for chart in app.get("vega_lite_chart"))


def board_with_adaptation(root: Path) -> None:
    """dchi-token at three etas, unadapted and adapted (denoising gains 0.1, vanilla loses 0.02, denoising at
    adapt_lr 2e-4 gains 0.05)."""
    store = ResultStore(root)
    for seed in range(2):
        for eta in (60.0, 120.0, 1000.0):
            for adapt, lr, shift in (("", "", 0.0), ("denoising", "", 0.1), ("vanilla", "", -0.02),
                                     ("denoising", "0.0002", 0.05)):
                server = {**({"adapt": adapt} if adapt else {}), **({"adapt_lr": lr} if lr else {})}
                spec = {**make_record().spec, "defense": "dchi-token", "defense_args": {"eta": eta},
                        "server": server, "attack": "inversion"}
                store.append(make_record(seed, defense="dchi-token", config_hash=f"eta{eta}{adapt}{lr}", spec=spec,
                                         metrics={"utility/accuracy": 0.5 + eta / 4000 + shift + seed / 100,
                                                  "privacy/inversion/token_accuracy": min(1.0, eta / 200)}))
    summarize(store)


def test_adaptation_gains_pair_each_adapted_setting_with_its_unadapted_one(tmp_path):
    import pandas as pd

    from dashboard.adaptation import adaptation_gains, sweep_parameter
    from dashboard.sweeps import sweeps

    board_with_adaptation(tmp_path)
    board = pd.read_csv(tmp_path / "leaderboard.csv", keep_default_na=False, na_values=[""])
    gains = adaptation_gains(board)
    assert len(gains) == 9 and set(gains["objective"]) == {"denoising", "vanilla", "denoising (adapt_lr=0.0002)"}
    by_objective = gains.groupby("objective")["gain"]
    assert by_objective.min()["denoising"] == pytest.approx(0.1) == by_objective.max()["denoising"]
    assert by_objective.mean()["vanilla"] == pytest.approx(-0.02)
    assert by_objective.mean()["denoising (adapt_lr=0.0002)"] == pytest.approx(0.05)  # its own line, same reference
    assert set(gains["mechanism"]) == {"eta=60.0", "eta=120.0", "eta=1000.0"} and sweep_parameter(gains) == "eta"
    assert (gains["adapted_n"] == 2).all() and (gains["unadapted_n"] == 2).all()
    found = sweeps(board)  # adapted and unadapted settings are separate eta sweeps, not one broken sweep
    assert set(found["fixed"]) == {"", "adapt=denoising", "adapt=vanilla", "adapt=denoising,adapt_lr=0.0002"}
    assert adaptation_gains(board[board["server_args"].fillna("") == ""]).empty


def test_adaptation_section_charts_gain_against_eta(tmp_path, run_app):
    board_with_adaptation(tmp_path)
    app = run_app(tmp_path)
    assert not app.exception
    assert any("Privacy-adaptive pretraining" in header.value for header in app.subheader)
    chart = app.get("vega_lite_chart")[-1]
    assert '"log"' in chart.proto.spec and "gained" in chart.proto.spec
    data = "".join(d.data.data.decode("latin-1") for d in chart.proto.datasets)
    assert "denoising" in data and "vanilla" in data


def test_paper_vs_ours_tab_shows_rows_and_claims(tmp_path, run_app):
    from bench.analysis import reproduce
    from tests.unit.test_reproduce import toy_results

    store = toy_results(tmp_path)
    reproduce.write_report(tmp_path, reproduce.reproduce(tmp_path, "toy", store.read()[0]))
    (tmp_path / "reproduction" / "broken.json").write_text("{not json")
    app = run_app(tmp_path)
    assert not app.exception
    assert any("broken.json" in warning.value for warning in app.warning)  # named and skipped
    claims = app.dataframe[0].value.set_index("claim")
    assert claims.loc["hiding costs utility", "ours"] == "holds"
    assert claims.loc["hiding is free", "ours"] == "fails" and claims.loc["other below base", "ours"] == "no records"
    assert claims.loc["other below base", "paper"] == "holds"
    rows = app.dataframe[1].value.set_index("row")
    assert set(rows.index) == {"base", "hidden", "matched 50"}  # cells with records only, by default
    assert rows.loc["base", "paper"] == pytest.approx(0.8) and rows.loc["base", "ours"] == pytest.approx(0.805)
    assert rows.loc["base", "n"] == 2
    app.checkbox(key="reproduction-recorded").uncheck().run()
    assert not app.exception and "other" in set(app.dataframe[1].value["row"])


def test_paper_vs_ours_tab_without_reports_says_how_to_make_one(tmp_path, run_app):
    app = run_app(tmp_path)
    assert not app.exception
    assert any("bench reproduce" in info.value for info in app.info)


@pytest.mark.skipif(not list((REPO_RESULTS / "reproduction").glob("*.json")), reason="no committed reports")
def test_committed_reproduction_reports_render(run_app):
    app = run_app(REPO_RESULTS)
    assert not app.exception
    assert not [w for w in app.warning if "reproduction" in w.value]  # every committed report reads cleanly
    assert any(set(frame.value.columns) >= {"claim", "ours", "paper"} for frame in app.dataframe)
