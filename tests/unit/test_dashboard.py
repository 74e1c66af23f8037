"""The Streamlit leaderboard, driven headless with AppTest."""

import json
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from bench.results.leaderboard import summarize
from bench.results.store import ResultStore
from tests.unit.test_store import make_record

ROOT = Path(__file__).resolve().parents[2]

APP = str(ROOT / "dashboard" / "app.py")
REPO_RESULTS = ROOT / "results"


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

    def start(results: Path, tab: str | None = None) -> AppTest:
        monkeypatch.setenv("BENCH_RESULTS_DIR", str(results))
        app = AppTest.from_file(APP, default_timeout=60)
        if tab is not None:  # only the open tab renders; the URL opens one
            app.query_params["tab"] = tab
        return app.run()

    return start


def selectbox(part, label: str):
    """The selectbox labelled ``label`` (their keys carry the source and the task)."""
    return next(s for s in part.selectbox if s.label == label)


def sidebar_multiselect(app, label: str):
    return next(m for m in app.sidebar.multiselect if m.label == label)


def chart_data(chart) -> str:
    return "".join(d.data.data.decode("latin-1") for d in chart.proto.datasets)  # Arrow bytes


def test_table_and_scatter(tmp_path, run_app):
    board_with_two_defenses(tmp_path)
    app = run_app(tmp_path)
    assert not app.exception
    # the worst case opens: RSS alone does not cover what texthide and none release, so neither is ranked
    assert selectbox(app.sidebar, "attack").value == "worst case"
    worst = app.dataframe[0].value.set_index("defense")
    assert worst["rank"].isna().all() and worst.loc["texthide", "strongest attack"] == "rss"
    assert worst.loc["texthide", "missing attacks (incomplete)"] == "abs-rss, embedding-inversion, gradient-matching, membership, reprecon"
    assert worst.loc["none", "worst-case advantage ↓ safer"] == pytest.approx(1.0)
    assert "as good as guessing" in chart_data(app.get("vega_lite_chart")[0])
    selectbox(app.sidebar, "attack").set_value("rss").run()
    table = app.dataframe[0].value
    assert set(table["defense"]) == {"none", "texthide"}
    # texthide keeps RSS at its guess (band ≤ 0.05) and ranks first; none leaks everything however useful
    assert list(table["defense"]) == ["texthide", "none"] and list(table["rank"]) == [1, 2]
    assert list(table["frontier"]) == [1, 1]  # each wins on one axis
    assert "accuracy ↑" in table.columns and "rss identity ↓ safer" in table.columns  # numeric, with directions
    assert list(table.columns).index("accuracy ↑") < list(table.columns).index("rss identity ↓ safer")  # utility first
    assert table["accuracy ↑"].dtype.kind == "f" and set(table["seeds"]) == {2}
    assert any("rss" in header.value for header in app.subheader)
    charts = app.get("vega_lite_chart")
    assert len(charts) == 1
    proto, data = charts[0].proto, chart_data(charts[0])
    assert "texthide(m=256,k=4)" in data and "none" in data  # each point named (tooltip) by its setting
    assert '"rule"' in proto.spec and "random guess" in data  # the random-guess reference of these cells
    assert "Pareto frontier" in data
    assert "none (undefended)" in proto.spec and "better" in proto.spec  # in the legend and the title, off the data
    assert "higher = more useful" in proto.spec and "higher = more recovered" in proto.spec
    assert "majority class" not in data  # these records carry no majority_utility note


def test_majority_class_reference_comes_from_the_cells_notes(tmp_path, run_app):
    store = ResultStore(tmp_path)
    for seed, floor in ((0, 0.5), (1, 0.6)):
        store.append(make_record(seed, notes={"majority_utility": {"accuracy": floor}}))
    app = run_app(tmp_path)
    assert not app.exception
    assert "majority class 0.550 (1 cell)" in chart_data(app.get("vega_lite_chart")[0])  # in the legend


def test_filters_follow_the_data_and_narrow_the_table(tmp_path, run_app):
    board_with_two_defenses(tmp_path)
    app = run_app(tmp_path)
    assert sidebar_multiselect(app, "defense").options == ["none", "texthide"]
    sidebar_multiselect(app, "defense").set_value(["texthide"]).run()
    assert not app.exception and set(app.dataframe[0].value["defense"]) == {"texthide"}
    sidebar_multiselect(app, "encoder").set_value([]).run()
    assert not app.exception and app.subheader.len == 0 and "No results match" in app.info[0].value


def test_headline_metric_directions_and_mock_encoders(tmp_path, run_app):
    """CoLA opens on MCC (its records list it first), an MSE attack metric reads lower = more recovered, and
    mock encoders stay hidden while a real encoder has cells."""
    store = ResultStore(tmp_path)
    for seed in range(2):
        for encoder, defense, mse in (("minilm", "none", 0.01), ("minilm", "texthide", 0.9), ("mock-4", "none", 0.0)):
            spec = {**make_record().spec, "task": "cola", "encoder": encoder, "defense": defense,
                    "attack": "gradient-matching", "defense_args": {} if defense == "none" else {"m": 1, "k": 1}}
            store.append(make_record(seed, defense=defense, config_hash=f"{encoder}{defense}", spec=spec,
                                     metrics={"utility/mcc": 0.1 + seed / 100, "utility/accuracy": 0.7,
                                              "privacy/gradient-matching/mse": mse,
                                              "random/gradient-matching/mse": 0.3},
                                     higher_is_better={"utility/mcc": True, "utility/accuracy": True,
                                                       "privacy/gradient-matching/mse": False,
                                                       "random/gradient-matching/mse": False}))
    app = run_app(tmp_path)
    assert not app.exception
    assert selectbox(app, "utility metric").value == "utility/mcc"
    selectbox(app.sidebar, "attack").set_value("gradient-matching").run()
    table = app.dataframe[0].value
    assert set(table["encoder"]) == {"minilm"} and "gradient-matching mse ↑ safer" in table.columns
    spec = app.get("vega_lite_chart")[0].proto.spec
    assert "lower = more recovered" in spec
    next(c for c in app.sidebar.checkbox if c.label.startswith("show test encoders")).check().run()
    assert not app.exception and set(app.dataframe[0].value["encoder"]) == {"minilm", "mock-4"}


def test_provenance_of_a_row_shows_seeds_values_and_notes(tmp_path, run_app):
    board_with_two_defenses(tmp_path)
    app = run_app(tmp_path)
    box = app.selectbox(key="provenance")
    box.set_value(next(o for o in box.options if "texthide" in o)).run()
    assert not app.exception
    facts = app.dataframe[1].value
    assert list(facts.index) == [0, 1] and facts.loc[1, "utility/accuracy"] == pytest.approx(0.6)  # per seed
    assert "git_sha" in facts.columns and "data_hash" in facts.columns and "runtime_s" in facts.columns
    assert any("abc123" in caption.value for caption in app.caption)  # the config hash
    assert len(app.json) >= 2 and '"m": 256' in app.json[0].value
    assert {b.label for b in app.get("download_button")} >= {"download these rows (CSV)",
                                                             "download their records (JSON lines)"}


def test_view_state_comes_from_and_goes_to_the_url(tmp_path, monkeypatch):
    board_with_two_defenses(tmp_path)
    board_with_a_sweep(tmp_path)
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path))
    app = AppTest.from_file(APP, default_timeout=60)
    app.query_params.update({"attack": "inversion", "view": "Sweeps"})
    app.run()
    assert not app.exception
    assert selectbox(app.sidebar, "attack").value == "inversion" and app.radio(key="view").value == "Sweeps"
    selectbox(app.sidebar, "attack").set_value("rss").run()
    assert app.query_params["attack"] == "rss" and "task" not in app.query_params  # defaults stay out of the URL
    app.radio(key="view").set_value("Privacy vs utility").run()
    box = app.selectbox(key="provenance")
    box.set_value(box.options[1]).run()
    assert app.query_params["row"] == box.options[1].rsplit(" · ", 1)[-1]  # the row is shareable too


def test_empty_results_explain_what_to_do(tmp_path, run_app):
    app = run_app(tmp_path)
    assert not app.exception
    assert "bench run" in app.info[0].value


@pytest.mark.skipif(not (REPO_RESULTS / "leaderboard.csv").is_file(), reason="no committed leaderboard")
def test_committed_leaderboard_renders(run_app):
    app = run_app(REPO_RESULTS)
    assert not app.exception
    assert len(app.dataframe[0].value) >= 4
    assert selectbox(app.sidebar, "task").value == "sst2"  # the task with the most settings, not CoLA
    selectbox(app.sidebar, "attack").set_value("rss").run()  # the worst case: no setting is complete yet
    assert "Pareto frontier" in chart_data(app.get("vega_lite_chart")[0])
    selectbox(app.sidebar, "task").set_value("mrpc").run()
    assert not app.exception and selectbox(app, "utility metric").value == "utility/f1"
    selectbox(app.sidebar, "attack").set_value("rss").run()
    table = app.dataframe[0].value.set_index("defense")
    # the undefended frozen server: F1 0.75 against the majority answer's 0.81 carries no utility signal
    assert table.loc["none", "beats majority"].startswith("no (0.81")


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
    from bench.dashboard.sweeps import sweeps

    board_with_a_sweep(tmp_path)
    board_with_two_defenses(tmp_path)  # texthide has one setting: not a sweep
    found = sweeps(pd.read_csv(tmp_path / "leaderboard.csv", keep_default_na=False, na_values=[""]))
    assert set(found["defense"]) == {"dchi-text"} and set(found["parameter"]) == {"eta"}
    assert sorted(found["value"].unique()) == [10.0, 60.0, 250.0]


def test_sweep_chart_plots_utility_and_inversion_against_eta(tmp_path, run_app):
    board_with_a_sweep(tmp_path)
    app = run_app(tmp_path)
    app.radio(key="view").set_value("Sweeps").run()
    assert not app.exception
    assert any("sweeps" in header.value for header in app.subheader)
    charts = app.get("vega_lite_chart")
    assert len(charts) == 1  # one sweep at a time
    spec = charts[0].proto.spec
    assert '"log"' in spec and "eta" in spec and "vconcat" in spec  # utility above, attack success below
    data = chart_data(charts[0])
    assert "utility/accuracy" in data and "privacy/inversion/token_accuracy" in data
    assert "random/inversion/token_accuracy" in data  # the random reference is on by default
    assert "higher = more recovered" in data and "higher = more useful" in data


def test_sweeps_key_on_attack_arguments_and_handle_zero_and_infinity():
    from bench.dashboard.sweeps import sweep_chart, sweeps

    rows = []
    for m in ("0", "16", "256", "inf"):
        for attack_args in ("", "adapted=denoising"):
            for metric, value in (("utility/accuracy", 0.7), ("privacy/rss/identity", 0.1)):
                rows.append({"task": "sst2", "encoder": "minilm", "defense": "texthide", "defense_args": f"m={m},k=4",
                             "server_args": "", "attack": "rss", "attack_args": attack_args, "mode": "frozen",
                             "n_train": 10, "n_eval": 5, "config_hash": f"{m}{attack_args}", "metric": metric,
                             "higher_is_better": True, "mean": value, "std": 0.0, "n": 1})
    found = sweeps(pd.DataFrame(rows))
    m_sweeps = found[found["parameter"] == "m"]
    assert m_sweeps.groupby("attack_args")["config_hash"].nunique().to_dict() == {"": 4, "adapted=denoising": 4}
    spec = sweep_chart(m_sweeps[m_sweeps["attack_args"] == ""], ["utility/accuracy", "privacy/rss/identity"])
    text = spec.to_json()
    assert '"log"' not in text and "ordinal" in text and "value_label" in text  # 0 and inf on an ordinal axis


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
    assert "bench run" in app.info[0].value and not app.warning  # the leaderboard explains itself; one tab runs
    app = run_app(tmp_path, "Plausible deniability")
    assert not app.exception and not app.subheader
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
    app = run_app(tmp_path, "Plausible deniability")
    assert not app.exception
    assert any("bench analyze deniability" in info.value for info in app.info)


@pytest.mark.skipif(not (REPO_RESULTS / "analysis" / "deniability-minilm.json").is_file(),
                    reason="no committed deniability analysis")
def test_committed_deniability_analysis_renders(run_app):
    app = run_app(REPO_RESULTS, "Plausible deniability")
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
                                     ("denoising", 0.0002, 0.05)):
                server = {**({"adapt": adapt} if adapt else {}), **({"adapt_lr": lr} if lr else {})}
                spec = {**make_record().spec, "defense": "dchi-token", "defense_args": {"eta": eta},
                        "server": server, "attack": "inversion"}
                store.append(make_record(seed, defense="dchi-token", config_hash=f"eta{eta}{adapt}{lr}", spec=spec,
                                         metrics={"utility/accuracy": 0.5 + eta / 4000 + shift + seed / 100,
                                                  "privacy/inversion/token_accuracy": min(1.0, eta / 200)}))
    summarize(store)


def test_adaptation_gains_pair_each_adapted_setting_with_its_unadapted_one(tmp_path):
    from bench.dashboard.adaptation import adaptation_gains, sweep_parameter
    from bench.dashboard.sweeps import sweeps

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


def test_adaptation_gain_is_paired_by_seed_when_the_seed_sets_differ(tmp_path):
    from bench.dashboard.adaptation import adaptation_gains
    from bench.results.leaderboard import aggregate, seed_frame

    store = ResultStore(tmp_path)
    seed_effect = {0: 0.5, 1: 0.6, 2: 0.7}  # the head's seed moves utility far more than adaptation does
    for seed, base in seed_effect.items():
        for adapt, shift in (("", 0.0), ("prob", 0.01)):
            if adapt and seed == 2:
                continue  # the adapted setting has seeds 0-1 only, its twin 0-2
            spec = {**make_record().spec, "defense": "dchi-token", "defense_args": {"eta": 60.0},
                    "server": {"adapt": adapt} if adapt else {}, "attack": "inversion"}
            store.append(make_record(seed, defense="dchi-token", config_hash=f"eta60{adapt}", spec=spec,
                                     metrics={"utility/accuracy": base + shift}))
    seeds = seed_frame(store.read()[0])
    board = aggregate(seeds)
    paired = adaptation_gains(board, seeds).iloc[0]
    assert paired["gain"] == pytest.approx(0.01) and paired["gain_n"] == 2
    assert paired["gain_ci95"] == pytest.approx(0.0, abs=1e-9)
    assert paired["adapted_n"] == 2 and paired["unadapted_n"] == 3
    unpaired = adaptation_gains(board).iloc[0]  # leaderboard.csv alone: the difference of the means, said so
    assert unpaired["gain"] == pytest.approx(0.56 - 0.6) and unpaired["gain_n"] == 0


def test_the_adaptation_table_script_prints_the_dashboards_paired_gains(tmp_path):
    import importlib.util

    from bench.results.leaderboard import seed_frame

    spec = importlib.util.spec_from_file_location("adaptation_table", ROOT / "scripts" / "adaptation_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    board_with_adaptation(tmp_path)
    store = ResultStore(tmp_path)
    for seed in range(2):  # an unadapted BiLSTM twin (Qu T4's columns): same eta and attack, another encoder
        spec = {**make_record().spec, "encoder": "bilstm", "defense": "dchi-token", "defense_args": {"eta": 60.0},
                "server": {}, "attack": "inversion", "training": {"mode": "finetune"}}
        store.append(make_record(seed, defense="dchi-token", config_hash="bilstm60", spec=spec,
                                 metrics={"utility/accuracy": 0.9, "privacy/inversion/token_accuracy": 0.9}))
    frame = seed_frame(store.read()[0])
    rows = script.adaptation_rows(frame, "dchi-token", "sst2", [0, 1])
    # eta 60: inversion 0.3, unadapted 0.5 + 0.015 + seed / 100; vanilla -0.02, prob never run, denoising +0.1
    assert rows[0] == "| 60 (0.300) | 0.520 | 0.500 (-0.020 ± 0.000) | - | 0.620 (+0.100 ± 0.000) |"
    assert [row.split(" (")[0] for row in rows] == ["| 60", "| 120", "| 1000"]
    assert script.adaptation_rows(frame, "dchi-token", "sst2", [1])[0].endswith("| 0.625 (+0.100) |")


def test_adaptation_section_charts_gain_against_eta(tmp_path, run_app):
    board_with_adaptation(tmp_path)
    app = run_app(tmp_path)
    app.radio(key="view").set_value("Adaptation").run()
    assert not app.exception
    assert any("Privacy-adaptive pretraining" in header.value for header in app.subheader)
    chart = app.get("vega_lite_chart")[-1]
    assert '"log"' in chart.proto.spec and "gained" in chart.proto.spec
    data = "".join(d.data.data.decode("latin-1") for d in chart.proto.datasets)
    assert "denoising" in data and "vanilla" in data


def test_paper_vs_ours_tab_shows_rows_and_claims(tmp_path, run_app):
    from bench.reproduction import reproduce
    from tests.unit.test_reproduce import toy_results

    store = toy_results(tmp_path)
    reproduce.write_report(tmp_path, reproduce.reproduce(tmp_path, "toy", store.read()[0]))
    (tmp_path / "reproduction" / "broken.json").write_text("{not json")
    app = run_app(tmp_path, "Paper vs ours")
    assert not app.exception
    assert any("broken.json" in warning.value.replace("\\", "") for warning in app.warning)  # named (escaped), skipped
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
    app = run_app(tmp_path, "Paper vs ours")
    assert not app.exception
    assert any("bench reproduce" in info.value for info in app.info)


@pytest.mark.skipif(not list((REPO_RESULTS / "reproduction").glob("*.json")), reason="no committed reports")
def test_committed_reproduction_reports_render(run_app):
    app = run_app(REPO_RESULTS, "Paper vs ours")
    assert not app.exception
    assert not [w for w in app.warning if "reproduction" in w.value]  # every committed report reads cleanly
    assert any(set(frame.value.columns) >= {"claim", "ours", "paper"} for frame in app.dataframe)


# --- the board as a reader sees it: filters per source, palette, labels, axes, columns, your runs beside ---


def spec_of(chart) -> dict:
    return json.loads(chart.proto.spec)


def layers(spec: dict) -> list[dict]:
    """Every unit spec of a (nested) layered, concatenated or single chart."""
    found = []
    for key in ("layer", "vconcat", "hconcat"):
        for part in spec.get(key, []):
            found += layers(part)
    return found if found else [spec]


def mark_type(layer: dict) -> str:
    mark = layer.get("mark", "")
    return mark if isinstance(mark, str) else mark.get("type", "")


def defense_scale(spec: dict, channel: str) -> dict:
    """defense -> the value of ``channel`` (color, shape) in the chart's scale."""
    for layer in layers(spec):
        encoding = layer.get("encoding", {}).get(channel, {})
        scale = encoding.get("scale", {})
        if encoding.get("field") == "defense" and "domain" in scale:
            return dict(zip(scale["domain"], scale["range"]))
    return {}


def published_label(app) -> str:
    return next(o for o in app.sidebar.radio(key="source").options if o.startswith("published"))


def published_cells(records, task: str, attack: str) -> int:
    from bench.results.leaderboard import seed_frame
    from bench.results.views import is_test_encoder

    frame = seed_frame(list(records))
    rows = frame[(frame["task"] == task) & (frame["attack"] == attack) & ~frame["encoder"].map(is_test_encoder)]
    return rows["config_hash"].nunique()


def test_filters_follow_the_source_so_the_published_board_shows_all_its_rows(tmp_path, run_app, committed_records):
    """Your runs narrowed to texthide must not narrow the published board: its SST-2 x RSS shows every setting and
    SST-2 x inversion plots its cells."""
    board_with_two_defenses(tmp_path)
    app = run_app(tmp_path)
    sidebar_multiselect(app, "defense").set_value(["texthide"]).run()
    assert set(app.dataframe[0].value["defense"]) == {"texthide"}
    app.sidebar.radio(key="source").set_value(published_label(app)).run()
    assert not app.exception
    defense = sidebar_multiselect(app, "defense")
    assert defense.value == defense.options and "dchi-sequence" in defense.options
    selectbox(app.sidebar, "attack").set_value("rss").run()
    assert len(app.dataframe[0].value) == published_cells(committed_records, "sst2", "rss") == 16  # 12 on the training traffic, 4 on the inference traffic
    attack = selectbox(app.sidebar, "attack")
    attack.set_value("inversion").run()
    assert not app.exception
    assert not [i for i in app.info if "no utility or no attack metric" in i.value]
    assert len(app.dataframe[0].value) == published_cells(committed_records, "sst2", "inversion")
    assert app.get("vega_lite_chart")


def test_a_defense_keeps_its_colour_and_shape_on_both_sources(tmp_path, run_app):
    board_with_two_defenses(tmp_path)
    app = run_app(tmp_path)
    ours = defense_scale(spec_of(app.get("vega_lite_chart")[0]), "color")
    app.sidebar.radio(key="source").set_value(published_label(app)).run()
    selectbox(app.sidebar, "attack").set_value("rss").run()
    published = defense_scale(spec_of(app.get("vega_lite_chart")[0]), "color")
    assert ours["texthide"] == published["texthide"] and ours["none"] == published["none"]
    assert "dchi-sequence" in published and "dchi-sequence" not in ours  # the legend lists the view's defenses


def test_defense_styles_are_colour_blind_safe_fixed_and_distinct(committed_records):
    from bench.core.registry import DEFENSES
    from bench.dashboard.charts import NEUTRAL, OKABE_ITO, defense_style
    from bench.results.leaderboard import seed_frame
    from bench.results.views import defense_order

    order = defense_order()
    names = ["none", *order]  # the component folders' defenses (a plugin another test loaded is styled by name)
    styles = {name: defense_style(name, order) for name in names}
    assert len(set(styles.values())) == len(names)  # no two registered defenses drawn alike (colour and shape)
    assert {colour for colour, _ in styles.values()} <= {*OKABE_ITO, NEUTRAL} and styles["none"][0] == NEUTRAL
    by_kind = {}
    for name in names:
        if name != "none":
            by_kind.setdefault(DEFENSES.get(name).releases[0], []).append(styles[name][0])
    for kind, colours in by_kind.items():  # defenses compared on the same attacks take different colours
        assert len(set(colours)) == len(colours), kind
    clashes = set()  # the published board's views: one pair shares a colour (told apart by shape)
    for _, view in seed_frame(list(committed_records)).groupby(["task", "attack"]):
        shown = sorted(view["defense"].unique())
        clashes |= {(a, b) for a in shown for b in shown if a < b and styles[a][0] == styles[b][0]}
    assert clashes <= {("ndd", "reverse-sigmoid")}, clashes
    assert defense_style("my-plugin", order) == defense_style("my-plugin", order)  # a plugin's: from its name
    assert defense_style("my-plugin", order)[0] in OKABE_ITO


def scatter_table(utility_values, privacy_values, majority=None):
    """A ranked table of settings with the given utility and RSS identity (none first), random guess 0."""
    from bench.results.views import mark_utility_signal, ranked

    rows = []
    for i, (u, p) in enumerate(zip(utility_values, privacy_values)):
        defense = "none" if i == 0 else "texthide"
        for metric, value in (("utility/accuracy", u), ("privacy/rss/identity", p), ("random/rss/identity", 0.0)):
            rows.append({"task": "sst2", "encoder": "minilm", "defense": defense,
                         "defense_args": "" if i == 0 else f"m={i},k=4", "server_args": "", "attack": "rss",
                         "attack_args": "", "mode": "frozen", "n_train": 10, "n_eval": 5, "config_hash": f"h{i}",
                         "metric": metric, "higher_is_better": True, "mean": value, "std": 0.01, "n": 2})
    board = pd.DataFrame(rows)
    table = ranked(board, "sst2", "rss", "utility/accuracy", "privacy/rss/identity")
    if majority is not None:
        table = mark_utility_signal(table, {f"h{i}": {"accuracy": majority} for i in range(len(utility_values))},
                                    "utility/accuracy", True)
    return board, table


def test_scatter_labels_live_in_the_legend_and_title_not_over_points():
    from bench.dashboard.charts import scatter
    from bench.results.views import defense_order

    board, table = scatter_table([0.84, 0.80, 0.79], [1.0, 0.3, 0.2], majority=0.5)
    spec = scatter(table, "utility/accuracy", "privacy/rss/identity", {}, defense_order()).to_dict()
    assert not [layer for layer in layers(spec) if mark_type(layer) == "text"]  # nothing drawn over the data
    text = json.dumps(spec)
    assert "none (undefended)" in text  # the legend names the undefended setting
    title = json.dumps(spec.get("title", {}))
    assert "better" in title  # the better direction, above the plot
    references = [layer["encoding"]["strokeDash"] for layer in layers(spec)
                  if "strokeDash" in layer.get("encoding", {})]
    assert references and all(r.get("legend", {}).get("title") == "references" for r in references)
    data = json.dumps(spec.get("datasets", {}))
    assert "random guess" in data and "majority class" in data


def test_scatter_axes_fit_the_points_not_the_references():
    from bench.dashboard.charts import scatter
    from bench.results.views import defense_order

    board, table = scatter_table([0.84, 0.80, 0.79], [0.40, 0.35, 0.30], majority=0.5)  # random 0, majority 0.5
    spec = scatter(table, "utility/accuracy", "privacy/rss/identity", {}, defense_order()).to_dict()
    x = next(layer["encoding"]["x"]["scale"]["domain"] for layer in layers(spec)
             if "domain" in layer.get("encoding", {}).get("x", {}).get("scale", {}))
    y = next(layer["encoding"]["y"]["scale"]["domain"] for layer in layers(spec)
             if "domain" in layer.get("encoding", {}).get("y", {}).get("scale", {}))
    assert 0.76 < x[0] < 0.78 and 0.85 < x[1] < 0.87, x  # 0.78-0.85 with the bars, padded
    assert 0.26 < y[0] < 0.29 and 0.41 < y[1] < 0.44, y
    data = json.dumps(spec.get("datasets", {}))
    assert "below the axis" in data and "left of the axis" in data  # the references off the axes are named


def test_sweep_axis_titles_are_one_title_per_panel():
    from bench.dashboard.sweeps import sweep_chart, sweeps

    rows = []
    for eta, value in ((10, 0.6), (100, 0.8)):
        for metric in ("utility/accuracy", "privacy/inversion/token_accuracy", "random/inversion/token_accuracy"):
            rows.append({"task": "sst2", "encoder": "minilm", "defense": "dchi-text", "defense_args": f"eta={eta}",
                         "server_args": "", "attack": "inversion", "attack_args": "", "mode": "frozen",
                         "n_train": 10, "n_eval": 5, "config_hash": f"e{eta}", "metric": metric,
                         "higher_is_better": True, "mean": value, "std": 0.02, "n": 2})
    found = sweeps(pd.DataFrame(rows))
    spec = sweep_chart(found, sorted(found["metric"].unique())).to_dict()
    for panel in spec["vconcat"]:
        titles = {json.dumps(layer["encoding"]["y"].get("title")) for layer in layers(panel)}
        assert len(titles) == 1 and "null" not in titles, titles  # no ", low" merged from the error bars' field


def test_arguments_column_is_wide_enough_to_tell_settings_apart(tmp_path, run_app):
    store = ResultStore(tmp_path)
    for seed in range(2):
        for scheme in ("", ",scheme=inter,public=qnli"):
            args = {"m": 256, "k": 4, **({"scheme": "inter", "public": "qnli"} if scheme else {})}
            spec = {**make_record().spec, "defense_args": args}
            store.append(make_record(seed, config_hash=f"th{scheme}", spec=spec))
    app = run_app(tmp_path)
    assert not app.exception
    assert set(app.dataframe[0].value["arguments"]) == {"m=256,k=4", "m=256,k=4,scheme=inter,public=qnli"}
    width = json.loads(app.dataframe[0].proto.columns)["arguments"]["width"]
    assert isinstance(width, int) and width >= 7 * len("m=256,k=4,scheme=inter,public=qnli")


def test_paper_vs_ours_for_your_runs_advises_a_command_that_writes_there(tmp_path, run_app):
    app = run_app(tmp_path, "Paper vs ours")
    assert any(f"--results-dir {tmp_path}" in info.value for info in app.info)


def test_dashboard_command_hides_the_deploy_button(monkeypatch):
    from typer.testing import CliRunner

    from bench.cli.commands import dashboard
    from bench.cli.main import app

    commands = []
    monkeypatch.setattr(dashboard, "run_forwarding_signals", lambda command, env: commands.append(command) or 0)
    result = CliRunner().invoke(app, ["dashboard", "--port", "8599"])
    assert result.exit_code == 0, result.output
    command = commands[0]
    assert command[command.index("--client.toolbarMode") + 1] == "viewer"


def test_your_runs_beside_the_published_board(tmp_path, run_app, committed_records):
    board_with_two_defenses(tmp_path)
    app = run_app(tmp_path)
    assert set(app.dataframe[0].value.columns).isdisjoint({"source"})  # your runs alone by default here
    app.sidebar.checkbox(key="beside").check().run()
    assert not app.exception
    selectbox(app.sidebar, "attack").set_value("rss").run()
    next(c for c in app.sidebar.checkbox if c.label.startswith("show test encoders")).check().run()  # ours: mock
    table = app.dataframe[0].value
    assert table["source"].value_counts().to_dict() == {
        "published": published_cells(committed_records, "sst2", "rss"), "your runs": 2}
    assert "your runs" in chart_data(app.get("vega_lite_chart")[0])
    assert app.query_params["beside"] == "1"
    box = app.selectbox(key="provenance")  # a row of your runs opens your records
    box.set_value(next(o for o in box.options if "abc123" in o)).run()
    assert not app.exception and app.dataframe[1].value.loc[1, "utility/accuracy"] == pytest.approx(0.6)


def test_utility_that_does_not_beat_the_majority_class_is_marked():
    from bench.results.views import majority_by_config, mark_utility_signal

    majority = majority_by_config([("h1", {"majority_utility": {"accuracy": 0.6}}),
                                   ("h1", {"majority_utility": {"accuracy": 0.62}}), ("h2", {})])
    assert majority == {"h1": {"accuracy": pytest.approx(0.61)}}
    table = pd.DataFrame({"config_hash": ["h1", "h1", "h2"], "utility/accuracy": [0.55, 0.7, 0.9]})
    marked = mark_utility_signal(table, majority, "utility/accuracy", True)
    assert list(marked["beats majority"]) == ["no (0.610)", "yes", ""]
    lower = mark_utility_signal(table, majority, "utility/accuracy", False)  # lower = more useful: 0.55 beats it
    assert list(lower["beats majority"]) == ["yes", "no (0.610)", ""]


def test_board_marks_cells_without_utility_signal(tmp_path, run_app):
    from bench.dashboard.charts import NO_SIGNAL

    store = ResultStore(tmp_path)
    for seed in range(2):  # accuracy 0.5 and 0.6 against a majority class at 0.7: no signal
        store.append(make_record(seed, notes={"majority_utility": {"accuracy": 0.7}}))
    app = run_app(tmp_path)
    assert not app.exception
    assert list(app.dataframe[0].value["beats majority"]) == ["no (0.700)"]
    spec = spec_of(app.get("vega_lite_chart")[0])
    assert "no utility signal" in json.dumps(spec.get("title", {}))
    crossed = [layer for layer in layers(spec) if isinstance(layer.get("mark"), dict)
               and layer["mark"].get("shape") == NO_SIGNAL]
    assert len(crossed) == 1 and "beats majority" in json.dumps(crossed[0]["encoding"]["tooltip"])


def test_bench_dashboard_opens_your_runs_beside_the_published_board(tmp_path, monkeypatch):
    """Without a named folder, ./bench-results with runs opens beside the published board (the README's promise)."""
    board_with_two_defenses(tmp_path / "bench-results")
    monkeypatch.delenv("BENCH_RESULTS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    app = AppTest.from_file(APP, default_timeout=60).run()
    assert not app.exception
    assert app.sidebar.radio(key="source").value.startswith("your runs") and app.sidebar.checkbox(key="beside").value
    assert "beside" not in app.query_params  # the default stays out of the URL


def test_one_scale_view(tmp_path, run_app):
    """The one-scale view draws one line per family and reads utility at matched membership success."""
    from tests.unit.test_one_scale import membership_record

    store = ResultStore(tmp_path)
    rows = [("none", {}, {"dp_epsilon": 1.0}, 0.02, 0.6), ("none", {}, {"dp_epsilon": 8.0}, 0.3, 0.7),
            ("dchi-token", {"eta": 10.0}, None, 0.1, 0.55), ("dchi-token", {"eta": 100.0}, None, 0.3, 0.7)]
    for i, row in enumerate(rows):
        store.append(membership_record(0, *row, config_hash=f"h{i}"))
    summarize(store)
    app = run_app(tmp_path)
    app.radio(key="view").set_value("One scale").run()
    assert not app.exception
    assert any("One scale on sst2" in header.value for header in app.subheader)
    data = chart_data(app.get("vega_lite_chart")[0])
    assert "dp-sgd" in data and "dchi-token" in data  # one line per family
    app.radio(key="onescale:sst2").set_value("membership TPR at 1% FPR").run()
    matched_table = app.dataframe[0].value.set_index("family")
    assert matched_table.loc["dchi-token", "accuracy at 0.25"] == pytest.approx(0.6625)  # (0.1, .55)..(0.3, .7)
    assert pd.isna(matched_table.loc["dp-sgd", "accuracy at 0.5"])  # beyond the curve: blank
    audited = app.dataframe[-1].value  # the published audits close the view when the folder has none of its own
    assert "largest audited" in audited and len(audited) and (audited["pairs above claim"] == 0).all()


def test_one_scale_view_reads_the_folders_own_audits(tmp_path, run_app):
    import json

    from tests.unit.test_one_scale import audit_report, membership_record

    store = ResultStore(tmp_path)
    store.append(membership_record(0, "dchi-token", {"eta": 10.0}, None, 0.1, 0.55, config_hash="h0"))
    summarize(store)
    (tmp_path / "audits").mkdir()
    (tmp_path / "audits" / "mine.json").write_text(json.dumps(audit_report(defense="my-sanitizer")))
    app = run_app(tmp_path)
    app.radio(key="view").set_value("One scale").run()
    assert not app.exception
    assert list(app.dataframe[-1].value["defense"]) == ["my-sanitizer"]


def test_an_attack_view_opens_on_its_declared_headline(tmp_path, run_app):
    """Membership's view opens on TPR at 1% FPR, its declared headline: a record is read in the declared order,
    whatever order it was written in (AUC first here)."""
    from tests.unit.test_one_scale import membership_record

    store = ResultStore(tmp_path)
    record = membership_record(0, "none", {}, None, 0.1, 0.7, config_hash="h0")
    auc_first = {"privacy/membership/auc": 0.6, **{k: v for k, v in record.metrics.items() if "/auc" not in k}}
    store.append(record.model_copy(update={"metrics": auc_first}))
    summarize(store)
    app = run_app(tmp_path)
    selectbox(app.sidebar, "attack").set_value("membership").run()
    assert not app.exception
    assert selectbox(app, "attack metric").value == "privacy/membership/tpr_at_fpr_1pct"
