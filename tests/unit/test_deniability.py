"""Plausible deniability statistics on a tiny synthetic table where the answer is known, the eta
selection rules, the JSON report, and bad input through the CLI (exit 2, one sentence)."""

import inspect
import json
import os

import numpy as np
import pytest
from typer.testing import CliRunner

import bench.reproduction.deniability as den
from bench.cli.commands.analyze import deniability as deniability_command
from bench.cli.main import app
from tests.conftest import files_under

runner = CliRunner()
TRIALS = 200


@pytest.fixture(scope="module")
def space():
    """50 random 8-dimensional token vectors, ids 2..51 (ids 0 and 1 play special tokens, never used)."""
    table = np.random.default_rng(1).standard_normal((52, 8)).astype(np.float32)
    table[0], table[1] = 50.0, -50.0  # far out: nearest to most very noisy points, were they candidates
    return den.TokenSpace(table, np.arange(2, 52), "synthetic-1", lambda ids: [f"t{i}" for i in ids])


def stats_at(space, etas, seed=0, tokens=None, trials=TRIALS):
    tokens = space.candidates if tokens is None else tokens
    return den.perturbation_statistics(tokens, space.table, space.candidates, etas, trials, seed)


def test_counts_of_a_known_output_matrix():
    outputs = np.array([[5, 5, 5, 5], [1, 2, 3, 4], [7, 8, 7, 8]])
    unchanged, distinct = den.token_statistics(outputs, np.array([5, 3, 9]))
    assert unchanged.tolist() == [4, 1, 0] and distinct.tolist() == [1, 4, 2]


def test_huge_eta_never_changes_a_token(space):
    unchanged, distinct = stats_at(space, [1e7])[1e7]
    assert (unchanged == TRIALS).all() and (distinct == 1).all()


def test_tiny_eta_hides_every_token(space):
    unchanged, distinct = stats_at(space, [1e-3])[1e-3]
    assert unchanged.mean() < 0.1 * TRIALS  # about 1/|V| of the releases, by chance
    assert distinct.mean() > 10 and distinct.max() <= len(space.candidates)


def test_outputs_are_regular_tokens_only(space):
    rng = np.random.default_rng(0)
    outputs = den.dchi_text_trials(space.candidates[:5], 50, space.table, space.candidates, 1e-3, rng)
    assert outputs.shape == (5, 50) and np.isin(outputs, space.candidates).all()


def test_unchanged_count_grows_with_eta(space):
    stats = stats_at(space, [0.5, 2.0, 8.0])
    means = [stats[eta][0].mean() for eta in (0.5, 2.0, 8.0)]
    assert means[0] < means[1] < means[2]


def test_same_seed_same_figures_other_seed_other_figures(space):
    first, again, other = stats_at(space, [2.0], 0), stats_at(space, [2.0], 0), stats_at(space, [2.0], 1)
    assert all(np.array_equal(a, b) for a, b in zip(first[2.0], again[2.0]))
    assert not np.array_equal(first[2.0][0], other[2.0][0])


def test_an_eta_does_not_depend_on_the_rest_of_the_grid(space):
    alone, in_grid = stats_at(space, [2.0]), stats_at(space, [1.0, 2.0, 4.0])
    assert all(np.array_equal(a, b) for a, b in zip(alone[2.0], in_grid[2.0]))


def test_token_sample_is_seeded_and_distinct():
    candidates = np.arange(100, 200)
    sample = den.sample_tokens(candidates, 30, seed=0)
    assert len(set(sample.tolist())) == 30 and np.isin(sample, candidates).all()
    assert np.array_equal(sample, den.sample_tokens(candidates, 30, seed=0))
    assert not np.array_equal(sample, den.sample_tokens(candidates, 30, seed=1))
    assert np.array_equal(den.sample_tokens(candidates, None, seed=0), candidates)
    with pytest.raises(den.BenchError, match="use --tokens all"):
        den.sample_tokens(candidates, 101, seed=0)


def synthetic_stats(trials=100):
    """Per eta: N_w rising and S_w falling with eta, one outlier token always unchanged."""
    stats = {}
    for eta, kept, support in ((10.0, 5, 60), (20.0, 30, 30), (40.0, 45, 12), (80.0, 90, 3)):
        unchanged = np.full(20, kept)
        unchanged[0] = trials  # an isolated token: never changed
        distinct = np.full(20, support)
        distinct[0] = 1
        stats[eta] = (unchanged, distinct)
    return stats


def test_average_case_keeps_the_largest_eta_meeting_the_means():
    chosen = den.select_etas(synthetic_stats(), 100, den.Thresholds(0.5, 10, 0.95))["average_case"]
    assert chosen["eta"] == 40.0  # mean N_w/T: 0.0975, 0.335, 0.4775, 0.905; mean S_w: 57, 28.5, 11.45, 2.9
    assert chosen["by_statistic"] == {"n_w": 40.0, "s_w": 40.0}


def test_worst_case_is_decided_by_the_quantile():
    stats = synthetic_stats()
    strict = den.select_etas(stats, 100, den.Thresholds(0.5, 10, 1.0))["worst_case"]
    assert strict["eta"] is None  # the isolated token is never changed at any eta
    assert strict["by_statistic"] == {"n_w": None, "s_w": None}
    loose = den.select_etas(stats, 100, den.Thresholds(0.5, 10, 0.9))["worst_case"]
    assert loose["eta"] == 40.0 and "0.9 quantile of N_w/T <= 0.5" in loose["rule"]


def test_a_blip_above_a_failing_eta_is_not_selected():
    stats = synthetic_stats()
    stats[160.0] = (np.zeros(20, dtype=int), np.full(20, 50))  # passes, but 80 fails below it
    assert den.select_etas(stats, 100, den.Thresholds(0.5, 10, 0.9))["average_case"]["eta"] == 40.0


def test_report_json_round_trips_and_is_written_atomically(space, tmp_path, monkeypatch):
    monkeypatch.setattr(den, "load_space", lambda name: space)
    report = den.run_deniability("synthetic", tokens=20, trials=50, etas=[4.0, 0.5], seed=3)
    assert report["etas"] == [0.5, 4.0] and report["tokens"] == 20 and report["trials"] == 50
    assert len(report["per_eta"][0]["n_w"]) == 20 == len(report["token_ids"]) == len(report["token_names"])
    assert report["command"].startswith("bench analyze deniability --encoder synthetic")
    assert "--eta 0.5 --eta 4" in report["command"] and report["encoder_revision"] == "synthetic-1"
    path = den.write_report(report, den.report_path(tmp_path, "org/model"))
    whole = den.report_path(tmp_path, "org/model", "santext", whole=True)
    assert whole.name == "deniability-org_model-santext-all.json"
    assert path.name == "deniability-org_model.json"
    assert json.loads(path.read_text()) == json.loads(json.dumps(report))
    assert files_under(tmp_path) == [path]  # no temporary file left behind
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # readable like any other results file


def invoke(*args):
    return runner.invoke(app, ["analyze", "deniability", *map(str, args)])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--eta", "0"], "eta must be > 0"),
        (["--eta", "60", "--eta", "-5"], "eta must be > 0"),
        (["--trials", "0"], "--trials must be >= 1"),
        (["--tokens", "0"], "--tokens must be >= 1"),
        (["--tokens", "many"], "--tokens must be a positive number or 'all'"),
        (["--mechanism", "dchi-txt"], "Did you mean 'dchi-text'"),
        (["--max-unchanged", "1.5"], "--max-unchanged must be in [0, 1]"),
        (["--quantile", "0"], "--quantile must be in (0, 1]"),
    ],
)
def test_bad_values_exit_2_with_one_sentence(results, monkeypatch, args, message):
    monkeypatch.setattr(den, "load_space", lambda name: pytest.fail("loaded the encoder for bad input"))
    result = invoke(*args)
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert files_under(results) == []


def test_command_prints_the_table_and_writes_the_json(space, results, monkeypatch):
    monkeypatch.setattr(den, "load_space", lambda name: space)
    result = invoke("--encoder", "synthetic", "--tokens", "10", "--trials", "40", "--eta", "0.5", "--eta", "1e6")
    assert result.exit_code == 0, result.output
    assert "worst case: eta = 0.5" in result.stdout and "planned: 10 tokens" in result.stderr
    report = json.loads((results / "analysis" / "deniability-synthetic.json").read_text())
    assert report["per_eta"][1]["always_unchanged"] == 1.0 and report["per_eta"][1]["s_w_mean"] == 1.0


def test_cli_defaults_are_the_library_defaults():
    options = {name: p.default.default for name, p in inspect.signature(deniability_command).parameters.items()}
    assert options["tokens"] == str(den.DEFAULT_TOKENS) and options["trials"] == den.DEFAULT_TRIALS
    assert options["mechanism"] == den.DEFAULT_MECHANISM
    eta_help = inspect.signature(deniability_command).parameters["eta"].default.help
    for grid in den.DEFAULT_PARAMETERS.values():
        assert " ".join(f"{value:g}" for value in grid) in eta_help
    assert den.DEFAULT_PARAMETERS[den.DEFAULT_MECHANISM] == den.DEFAULT_ETAS
    bounds = den.Thresholds()
    assert (options["max_unchanged"], options["min_support"], options["quantile"]) == (
        bounds.max_unchanged, bounds.min_support, bounds.quantile)


def test_santext_statistics_follow_eps(space):
    """SanText: unchanged releases grow with eps; outputs stay regular tokens; huge eps keeps every token."""
    means = []
    for eps in (0.5, 4.0, 1e6):
        found = den.perturbation_statistics(space.candidates, space.table, space.candidates, [eps], TRIALS, 0,
                                            mechanism="santext")[eps]
        means.append(found[0].mean())
    assert means[0] < means[1] < means[2] == TRIALS
    outputs = den.santext_trials(space.candidates[:5], 50, space.table, space.candidates, 0.5, np.random.default_rng(0))
    assert outputs.shape == (5, 50) and np.isin(outputs, space.candidates).all()


def test_default_rule_is_qus_every_token_modified_at_least_half_the_time():
    stats = synthetic_stats()
    chosen = den.select_etas(stats, 100, den.Thresholds())["worst_case"]
    assert chosen["rule"] == "every token's N_w/T <= 0.5"
    assert chosen["eta"] is None  # the isolated token is never changed at any eta
    stats = {eta: (np.minimum(n_w, 50), s_w) for eta, (n_w, s_w) in stats.items()}  # now at most 50 of 100
    assert den.select_etas(stats, 100, den.Thresholds())["worst_case"]["eta"] == max(stats)


def test_an_interrupted_run_resumes_its_finished_chunks_with_the_same_figures(space, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    whole = den.perturbation_statistics(space.candidates, space.table, space.candidates, [2.0, 8.0], 40, 0,
                                        chunk_queries=400)  # 10 tokens a call: 5 chunks per eta
    assert not list(tmp_path.rglob("*.jsonl"))  # a finished run keeps no checkpoint
    real, calls = den.MECHANISMS["dchi-text"], []

    def stopping(*args):
        if len(calls) == 7:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args)

    monkeypatch.setitem(den.MECHANISMS, "dchi-text", stopping)
    with pytest.raises(KeyboardInterrupt):
        den.perturbation_statistics(space.candidates, space.table, space.candidates, [2.0, 8.0], 40, 0,
                                    chunk_queries=400)
    calls.clear()
    monkeypatch.setitem(den.MECHANISMS, "dchi-text", lambda *args: (calls.append(1), real(*args))[1])
    lines, tally = [], {}
    resumed = den.perturbation_statistics(space.candidates, space.table, space.candidates, [2.0, 8.0], 40, 0,
                                          chunk_queries=400, log=lines.append, tally=tally)
    assert len(calls) == 3 and lines == ["resuming: 7 token chunks were finished by an earlier run"]
    assert tally == {"chunks": 10, "resumed_chunks": 7}  # the report says its runtime is the last run's only
    for eta in whole:
        assert np.array_equal(resumed[eta][0], whole[eta][0]) and np.array_equal(resumed[eta][1], whole[eta][1])


def test_merge_adds_etas_to_the_same_run_as_one_run_over_all_of_them(space, results, monkeypatch):
    monkeypatch.setattr(den, "load_space", lambda name: space)
    common = ("--encoder", "synthetic", "--tokens", "10", "--trials", "40")
    assert invoke(*common, "--eta", "0.5", "--eta", "1e6").exit_code == 0
    together = json.loads((results / "analysis" / "deniability-synthetic.json").read_text())
    assert invoke(*common, "--eta", "1e6").exit_code == 0  # without --merge: replaced
    result = invoke(*common, "--eta", "0.5", "--merge")
    assert result.exit_code == 0, result.output
    assert "merged with the 1 earlier run(s)" in result.stderr
    merged = json.loads((results / "analysis" / "deniability-synthetic.json").read_text())
    for field in ("etas", "per_eta", "selections", "command"):
        assert merged[field] == together[field], field
    assert [run["etas"] for run in merged["earlier_runs"]] == [[1e6]]
    assert merged["queries"] == together["queries"]  # 10 tokens × 40 trials, once per eta


def test_merge_refuses_another_run_before_any_work_and_keeps_the_file(space, results, monkeypatch):
    monkeypatch.setattr(den, "load_space", lambda name: space)
    assert invoke("--encoder", "synthetic", "--tokens", "10", "--trials", "40", "--eta", "2").exit_code == 0
    path = results / "analysis" / "deniability-synthetic.json"
    before = path.read_bytes()
    monkeypatch.setattr(den, "load_space", lambda name: pytest.fail("loaded the encoder for a refused merge"))
    result = invoke("--encoder", "synthetic", "--tokens", "10", "--trials", "50", "--eta", "4", "--merge")
    assert result.exit_code == 2 and "it is another run (its trials differ)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and path.read_bytes() == before
    path.write_text("{not json")
    result = invoke("--encoder", "synthetic", "--tokens", "10", "--trials", "40", "--eta", "4", "--merge")
    assert result.exit_code == 2 and "is not a readable report" in result.stderr
    assert path.read_text() == "{not json"


def test_merging_counts_that_disagree_is_refused(space, monkeypatch):
    monkeypatch.setattr(den, "load_space", lambda name: space)
    first = den.run_deniability("synthetic", tokens=10, trials=40, etas=[2.0], seed=0)
    second = json.loads(json.dumps(first))
    second["per_eta"][0]["n_w"][0] += 1
    with pytest.raises(den.BenchError, match="eta 2 is in both reports with different counts"):
        den.merge_reports(first, second)
    assert den.merge_reports(first, json.loads(json.dumps(first)))["etas"] == [2.0]
