"""`bench report`: the ranked tables of every task and attack, printed from the records (docs/results/ is its
--pages output; tests/unit/test_docs.py holds the committed pages to the committed records)."""

from pathlib import Path

from typer.testing import CliRunner

from bench.cli.main import app
from bench.engine.applicable import applicable_attacks
from bench.results.leaderboard import aggregate, seed_frame
from bench.results.store import ResultStore
from bench.results.views import BEGIN, END, GENERATED, frontier_layers, majority_by_config, report, splice
from tests.unit.test_dashboard import board_with_two_defenses

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_frontier_layers_follow_each_metric_direction():
    utility, leakage = [0.8, 0.7, 0.6, 0.9, None], [1.0, 0.0, 0.5, 1.0, 0.1]
    assert frontier_layers(utility, leakage) == [2, 1, 2, 1, 0]  # higher utility, lower leakage are better
    assert frontier_layers(utility, leakage, leakage_up=False) == [2, 3, 3, 1, 0]  # e.g. an MSE: lower = recovered


def test_report_ranks_with_mean_std_and_random(tmp_path):
    board_with_two_defenses(tmp_path)
    records, _ = ResultStore(tmp_path).read()
    text = report(aggregate(seed_frame(records), with_order=True), "here/", applicable=applicable_attacks)
    assert "### sst2 · rss" in text and "| rank | band | frontier | defense |" in text
    assert text.index("### sst2 · worst case") < text.index("### sst2 · rss")  # the worst case first
    # none leaks everything: advantage (1 - 0.01) / (1 - 0.01) = 1, the last band, after the private setting
    assert ("| 2 | above 0.50 | 1 | none |  | 0.800 ± 0.000 [0.800, 0.800] | 1.000 ± 0.000 [1.000, 1.000] | 0.010 "
            "| 1.000 | 2 |" in text)
    # two seeds: t(0.975, 1) = 12.71, so the interval of the mean is wide; below its guess, the advantage is 0
    assert ("| 1 | ≤ 0.05 | 1 | texthide | m=256,k=4 | 0.550 ± 0.071 [-0.085, 1.185] | 0.000 ± 0.000 [0.000, 0.000] "
            "| 0.010 | 0.000 | 2 |" in text)
    # in the worst case, texthide was not attacked by every attack on sentence representations: no rank, no frontier
    assert ("|  | ≤ 0.05 |  | texthide | m=256,k=4 | 0.550 ± 0.071 [-0.085, 1.185] | 0.000 | rss "
            "| abs-rss, embedding-inversion, gradient-matching, membership, reprecon | 2 |" in text)
    single = report(aggregate(seed_frame([r for r in records if r.seed == 0]), with_order=True), "here/")
    assert "| 1 | ≤ 0.05 | 1 | texthide | m=256,k=4 | 0.500 | 0.000 | 0.010 | 0.000 | 1 |" in single  # no ±


def test_out_replaces_only_the_marked_block(tmp_path):
    board_with_two_defenses(tmp_path)
    page = tmp_path / "page.md"
    page.write_text(f"# Title\n\nbefore\n\n{BEGIN}\nold\n{END}\n\nafter\n")
    result = runner.invoke(app, ["report", "--results-dir", str(tmp_path), "--out", str(page)])
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert text.startswith("# Title\n\nbefore\n\n") and text.endswith("\n\nafter\n") and "old" not in text
    assert "### sst2 · rss" in text
    assert splice(text, "new\n").count(BEGIN) == 1


def test_pages_write_one_page_per_task_with_the_command_above_each_table(tmp_path):
    board_with_two_defenses(tmp_path / "board")
    pages = tmp_path / "site"
    pages.mkdir()
    (pages / "gone.md").write_text(f"{GENERATED}\n# a task no longer on the board\n")  # written by an earlier run
    (pages / "mine.md").write_text("# a page of the user's own\n")
    result = runner.invoke(app, ["report", "--results-dir", str(tmp_path / "board"), "--pages", str(pages)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in pages.glob("*.md")) == [
        "index.md", "known-limits.md", "mine.md", "one-scale.md", "sst2.md"]
    page = (pages / "sst2.md").read_text()
    command = f"bench report --results-dir {(tmp_path / 'board').as_posix()} --pages {pages.as_posix()}"
    assert page.startswith(GENERATED) and "## sst2 · rss" in page
    assert f"Cells of 10 training and 5 evaluation examples. Regenerate: `{command}`." in page
    assert "| 1 | ≤ 0.05 | 1 | texthide | m=256,k=4 |" in page and "[sst2](sst2.md)" in (pages / "index.md").read_text()
    assert not (pages / "reproduction").exists() or not list((pages / "reproduction").glob("*.md"))
    both = runner.invoke(app, ["report", "--results-dir", str(tmp_path / "board"), "--pages", str(pages),
                               "--out", str(tmp_path / "x.md")])
    assert both.exit_code == 2 and "give one of them" in both.output


def test_a_metric_with_fewer_seeds_than_its_row_gets_its_own_interval():
    """Three seeds report accuracy, two the attack: the attack's interval uses two seeds (t = 12.71, not 4.30)."""
    from tests.unit.test_store import make_record

    metrics = [{"utility/accuracy": 0.5, "privacy/rss/identity": 0.1, "random/rss/identity": 0.0},
               {"utility/accuracy": 0.7, "privacy/rss/identity": 0.3, "random/rss/identity": 0.0},
               {"utility/accuracy": 0.6}]
    records = [make_record(seed, metrics=m, run_id=f"r{seed}") for seed, m in enumerate(metrics)]
    text = report(aggregate(seed_frame(records), with_order=True), "here/")
    # accuracy: 0.6 ± 0.1 over 3 (t 4.303: ± 0.248); identity: 0.2 ± 0.141 over 2 (t 12.706: ± 1.271)
    assert "| 0.600 ± 0.100 [0.352, 0.848] | 0.200 ± 0.141 [-1.071, 1.471] (n = 2) |" in text
    assert text.rstrip().endswith("| 3 |")


def test_report_marks_utility_that_does_not_beat_the_majority_class(tmp_path):
    from tests.unit.test_store import make_record

    records = [make_record(seed, notes={"majority_utility": {"accuracy": 0.58}}) for seed in range(2)]
    records += [make_record(seed, defense="none", config_hash="def456", run_id=f"n{seed}",
                            spec={**make_record().spec, "defense": "none", "defense_args": {}},
                            metrics={"utility/accuracy": 0.8, "privacy/rss/identity": 1.0, "random/rss/identity": 0.01},
                            notes={"majority_utility": {"accuracy": 0.58}}) for seed in range(2)]
    board = aggregate(seed_frame(records), with_order=True)
    text = report(board, "here/", majority_by_config((r.config_hash, r.notes) for r in records))
    assert "| beats majority |" in text.splitlines()[6]  # the worst case's header, below its caption
    # texthide's advantage is 0, but its utility carries no signal: it follows the useful setting
    assert "| 1 | above 0.50 | 1 | none |  | 0.800 ± 0.000 [0.800, 0.800] | yes |" in text
    assert "| 2 | ≤ 0.05 | 1 | texthide | m=256,k=4 | 0.550 ± 0.071 [-0.085, 1.185] | no (0.580) |" in text


def test_bench_report_reads_the_majority_class_from_the_records(tmp_path):
    from tests.unit.test_store import make_record

    store = ResultStore(tmp_path)
    for seed in range(2):
        store.append(make_record(seed, notes={"majority_utility": {"accuracy": 0.58}}))
    result = runner.invoke(app, ["report", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "no (0.580)" in result.output


def test_the_inference_traffic_is_its_own_row_and_says_so():
    from tests.unit.test_store import make_record

    training = make_record(0)
    inference = make_record(0, config_hash="inf123", spec={**training.spec, "traffic": "inference"}, run_id="r-inf")
    table = aggregate(seed_frame([training, inference]))
    rows = table[table["metric"] == "privacy/rss/identity"].set_index("config_hash")["attack_args"]
    assert "traffic=inference" in rows["inf123"] and "traffic" not in rows[training.config_hash]


def test_one_table_with_the_metrics_and_notes_asked_for(tmp_path):
    from tests.unit.test_store import make_record

    store = ResultStore(tmp_path)
    for seed, seconds in ((0, 10.0), (1, 14.0)):
        store.append(make_record(seed, runtime_s=seconds, notes={"release": "tokens"},
                                 metrics={"utility/accuracy": 0.5, "privacy/rss/identity": 0.2,
                                          "privacy/rss/top5": 0.3 + seed / 10, "random/rss/identity": 0.01}))
    result = runner.invoke(app, ["report", "--results-dir", str(tmp_path), "--task", "sst2", "--attack", "rss",
                                 "--metric", "top5", "--note", "runtime_s", "--note", "release"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "### sst2 · rss" and "worst case" not in result.output  # one table, no legend
    header = next(line for line in lines if line.startswith("| rank"))
    assert header.index("rss identity") < header.index("rss top5") < header.index("runtime_s") < \
        header.index("release") < header.index("seeds")
    assert "| 0.350 ± 0.071 [-0.285, 0.985] |" in result.output  # the extra metric over both seeds
    assert "| 10–14 | tokens | 2 |" in result.output  # the seeds' run times differ: their range


def test_one_table_refuses_what_the_board_does_not_have(tmp_path):
    board_with_two_defenses(tmp_path)
    cases = [(["--task", "qqp"], "no record of task 'qqp'"),
             (["--attack", "reprecon"], "no record of attack 'reprecon'"),
             (["--attack", "rss", "--metric", "top9"], "records no metric 'top9'; its metrics: accuracy, identity"),
             (["--metric", "identity"], "give --attack too"),
             (["--note", "nothing"], "has the note 'nothing'"),
             (["--attack", "rss", "--note", "release"], "has the note"),
             (["--task", "sst2", "--pages", str(tmp_path / "site")], "--pages writes the whole board")]
    for args, phrase in cases:
        result = runner.invoke(app, ["report", "--results-dir", str(tmp_path), *args])
        assert result.exit_code == 2 and phrase in " ".join(result.output.split()), (args, result.output)
    assert not (tmp_path / "site").exists()
