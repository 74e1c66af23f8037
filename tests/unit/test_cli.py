"""The CLI: bad input exits 2 with one sentence and writes nothing; good input writes one record."""

import json

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core.errors import BenchError
from tests.conftest import files_under

runner = CliRunner()
MOCK = ["--encoder", "mock", "--attack-args", "sbert=mock", "--train-args", "epochs=2"]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_run_appends_one_valid_record(tiny_data, results):
    result = invoke("run", "--defense", "texthide", "--attack", "rss", *MOCK)
    assert result.exit_code == 0, result.output
    assert "privacy/rss/identity" in result.output and "random guess" in result.output
    lines = (results / "records" / "texthide.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["spec"]["defense_args"] == {"m": 256, "k": 4}
    majority = json.loads(lines[0])["notes"]["majority_utility"]  # the dashboard's majority-class reference
    assert set(majority) == {"accuracy"} and 0.0 < majority["accuracy"] < 1.0


def test_runs_go_to_bench_results_not_the_published_board(tiny_data, tmp_path, monkeypatch):
    """Without --results-dir or $BENCH_RESULTS_DIR a run lands in ./bench-results; results/ (the published
    board) changes only when named."""
    monkeypatch.delenv("BENCH_RESULTS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    assert invoke("run", "--defense", "none", "--attack", "rss", *MOCK).exit_code == 0
    assert (tmp_path / "bench-results" / "records" / "none.jsonl").is_file()
    assert files_under(tmp_path / "results") == []
    assert invoke("run", "--defense", "none", "--attack", "rss", "--results-dir", "results", *MOCK).exit_code == 0
    assert (tmp_path / "results" / "records" / "none.jsonl").is_file()


def test_json_output_is_the_record(tiny_data, results):
    result = invoke("run", "--defense", "none", "--attack", "rss", "--json", *MOCK)
    assert result.exit_code == 0
    record = json.loads(result.stdout)
    assert record["metrics"]["privacy/rss/identity"] == 1.0


def test_check_mode_saves_nothing(tiny_data, results):
    result = invoke("run", "--defense", "texthide", "--attack", "rss", "--check", *MOCK)
    assert result.exit_code == 0, result.output
    assert files_under(results) == []


@pytest.fixture
def model_only_plugin(tmp_path):
    path = tmp_path / "model_only.py"
    path.write_text(
        "from dataclasses import dataclass\n"
        "from bench import Attack, Metric, ReleaseKind, register_attack\n"
        "@register_attack()\n@dataclass\nclass ModelOnly(Attack):\n"
        "    accepts = (ReleaseKind.PREDICTIONS,)\n"  # which texthide never releases (it releases a model)
        "    metrics = (Metric('names', True, 'names extracted'),)\n"
    )
    return path


@pytest.mark.parametrize(
    "case, args, message",
    [
        ("unknown defense", ["--defense", "nope", "--attack", "rss"], "unknown defense 'nope'"),
        ("bad value", ["--defense", "texthide", "--defense-args", "m=-1", "--attack", "rss"], "must be >= 0"),
        ("unknown attack", ["--defense", "none", "--attack", "rs"], "Did you mean 'rss'"),
        ("bad mode", ["--defense", "none", "--mode", "gpu"], "mode must be"),
        ("bad objective", ["--defense", "dchi-token", "--server-args", "adapt=mlm"], "adapt must be"),
        ("bad adaptation rate", ["--defense", "santext", "--server-args", "adapt=prob,adapt_lr=0"],
         "adapt_lr must be > 0"),
        ("bad corpus", ["--defense", "dchi-text", "--server-args", "adapt=vanilla,adapt_corpus=wiki text"],
         "unknown public corpus 'wiki text'"),
        ("budget without objective", ["--defense", "dchi-text", "--server-args", "adapt_steps=5"],
         "need adapt=vanilla, prob or denoising"),
        ("adaptation of representations", ["--defense", "texthide", "--server-args", "adapt=prob"],
         "needs a text or token-vector release"),
        ("old adaptation place", ["--defense", "dchi-token", "--defense-args", "adapt=prob"],
         "has no parameter 'adapt'"),
        ("traffic a defense does not release", ["--defense", "texthide", "--attack", "gradient-matching",
                                                "--traffic", "inference"], "not as inference traffic"),
        ("inference traffic of tokens", ["--defense", "dchi-text", "--attack", "inversion", "--traffic", "inference"],
         "releases text as training traffic only"),
        ("unknown traffic", ["--defense", "texthide", "--attack", "rss", "--traffic", "eval"],
         "traffic must be one of training, inference"),
        ("traffic without an attack", ["--defense", "texthide", "--traffic", "inference"], "name an attack"),
    ],
)
def test_bad_input_exits_2_with_one_sentence(tiny_data, results, case, args, message):
    result = invoke("run", *args, "--encoder", "mock")
    assert result.exit_code == 2, case
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert files_under(results) == []


def test_incompatible_pair_exits_2(tiny_data, results, model_only_plugin):
    result = invoke("run", "--defense", "texthide", "--attack", "model_only", "--plugin", model_only_plugin, *MOCK)
    assert result.exit_code == 2
    assert "releases sentence_embeddings, gradients, model" in result.stderr
    assert "accepts predictions" in result.stderr
    assert files_under(results) == []


def test_missing_data_exits_2(tmp_path, results, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = invoke("run", "--defense", "none", "--attack", "rss", *MOCK)
    assert result.exit_code == 2
    assert "BENCH_DATA_DIR" in result.stderr and "hub" in result.stderr
    assert files_under(results) == []


def test_broken_plugin_exits_2(tiny_data, results, tmp_path):
    plugin = tmp_path / "oops.py"
    plugin.write_text("raise RuntimeError('boom')\n")
    result = invoke("run", "--plugin", plugin, *MOCK)
    assert result.exit_code == 2 and "failed to import" in result.stderr
    assert files_under(results) == []


def test_list_shows_parameters_and_pairs():
    result = invoke("list")
    assert result.exit_code == 0
    for text in ("texthide", "m=256", "rss", "sentence_embeddings", "compatible"):
        assert text in result.output


def test_summarize_reports_a_corrupt_line_and_keeps_the_rest(tmp_path):
    from bench.results.store import ResultStore
    from tests.unit.test_store import make_record

    store = ResultStore(tmp_path)
    store.append(make_record(0))
    with open(store.path_for("texthide"), "a") as handle:
        handle.write("not json\n")
    store.append(make_record(1))
    result = invoke("summarize", "--results-dir", tmp_path)
    assert result.exit_code == 0
    assert "texthide.jsonl:2" in result.stderr and "corrupt" in result.stderr
    assert "texthide(m=256,k=4)" in result.stdout and "random guess" in result.stdout
    assert (tmp_path / "leaderboard.csv").is_file()


def test_list_gives_a_defense_the_kinds_pairing_gives_it():
    # the pairing error says santext "releases text, predictions": the defenses table must not say text alone
    output = invoke("list").output
    kinds: dict[str, str] = {}
    name = None
    for line in output[output.index("defenses"): output.index("attacks")].splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) >= 4:  # a row of the table, or the wrapped continuation of one
            name = cells[1] or name
            kinds[name] = " ".join(filter(None, [kinds.get(name, ""), cells[2]]))
    server = "+ model (a trained server's model)"
    assert kinds["santext"] == f"text + predictions (a prediction API's training data) {server}"
    assert kinds["ndd"] == f"rewritten_text + predictions (a prediction API's training data) {server} on " \
                           "pretraining tasks: model only"
    assert kinds["texthide"] == f"sentence_embeddings, gradients {server}"


def test_check_shortens_pretraining_unless_its_steps_are_chosen(monkeypatch, tiny_data):
    # a smoke run in seconds: 300 adaptation steps took about 6 minutes, so --check takes a few, as it takes one
    # epoch; a pretraining task's further pretraining (200 steps) likewise
    import bench.engine.runner as runner
    from bench.engine.runner import CHECK_STEPS

    specs = []

    def capture(spec):
        specs.append(spec)
        raise BenchError("captured")

    monkeypatch.setattr(runner, "run_cell", capture)
    cell = ("run", "--defense", "dchi-token", "--attack", "inversion", "--check")
    for server_args, steps in (("adapt=denoising", CHECK_STEPS), ("adapt=denoising,adapt_steps=7", 7)):
        assert invoke(*cell, "--server-args", server_args).exit_code == 2
        assert specs[-1].server.adapt_steps == steps and specs[-1].training.epochs == 1
    invoke(*cell)
    assert specs[-1].server is None  # nothing to adapt: the spec keeps no server options
    clinical = ("run", "--task", "clinical-spl", "--defense", "none", "--attack", "name-generation", "--check")
    for extra, steps in (((), CHECK_STEPS), (("--server-args", "pretrain_steps=0"), 0)):
        assert invoke(*clinical, *extra).exit_code == 2
        assert specs[-1].task == "clinical-spl" and specs[-1].server.pretrain_steps == steps
    assert len(specs) == 5


def test_the_inference_traffic_is_attacked_and_named(tiny_data, results):
    """TextHide's inference queries are masked, not mixed: abs-rss finds every one, and the record says which
    traffic it attacked; the training traffic stays the default, under its own configuration."""
    records = {}
    for traffic in ("inference", "training"):
        result = invoke("run", "--defense", "texthide", "--attack", "abs-rss", "--traffic", traffic, "--json", *MOCK)
        assert result.exit_code == 0, result.output
        records[traffic] = json.loads(result.stdout)
        assert records[traffic]["notes"]["traffic"] == traffic
    inference, training = records["inference"], records["training"]
    assert inference["metrics"]["privacy/abs-rss/identity"] == 1.0
    assert training["metrics"]["privacy/abs-rss/identity"] < 1.0  # mixed with k - 1 others
    assert inference["spec"]["traffic"] == "inference" and "traffic" not in training["spec"]
    assert inference["config_hash"] != training["config_hash"]
    assert "inference traffic" in inference["notes"]["attacked_release"]
