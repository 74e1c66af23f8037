"""`bench reproduce`: mapping rows to records, claims' verdicts, the atomic report, and the committed tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core.errors import BenchError
from bench.reproduction import reproduce as rep
from bench.results.store import ResultStore
from tests.unit.test_store import make_record

REPO_RESULTS = Path(__file__).resolve().parents[2] / "results"
runner = CliRunner(env={"COLUMNS": "200"})  # rich wraps to the terminal: the same width in every shell and worker

REFERENCE = {
    "source": {"paper": "A. Author. A toy paper.", "table": "Table 9"},
    "scale": 100,
    "values": {"base": {"accuracy": {"mean": 80.0, "std": 1.0}}, "hidden": {"accuracy": {"mean": 75.0, "std": 2.0}},
               "other": {"accuracy": 70.0}, "inversion": {"50": 25.0, "90": 99.0}},
}
MAPPING = {
    "title": "Toy Table 9",
    "paper_setting": {"encoder": "big", "seeds": 5},
    "defaults": {"encoder": "mock", "training.mode": "frozen"},
    "schemes": {"base": {"select": {"defense": "none", "defense_args": {}}},
                "hidden": {"select": {"defense": "texthide", "defense_args": {"m": 256, "k": 4}}}},
    "rows": [
        {"for": {"scheme": ["base", "hidden"]}, "id": "{scheme}", "paper": "{scheme}.accuracy", "scheme": "{scheme}",
         "select": {"task": "sst2"}, "metric": "utility/accuracy"},
        {"id": "other", "paper": "other.accuracy", "metric": "utility/accuracy",
         "select": {"task": "sst2", "defense": "dchi-token", "defense_args": {"eta": 60.0}, "attack": "rss"}},
        {"for": {"eta": [50, 90]}, "id": "matched {eta}", "metric": "utility/accuracy",
         "select": {"task": "sst2", "defense": "dchi-text"},
         "match": {"by": "privacy/inversion/token_accuracy", "over": "eta", "paper_at": "inversion.{eta}",
                   "run": [10.0, 60.0, 120.0]}},
    ],
    "claims": [
        {"id": "hiding costs utility", "text": "base above hidden",
         "checks": [{"left": "base", "op": "gt", "right": "hidden"}]},
        {"id": "hiding is free", "text": "hidden within 0.01 of base",
         "checks": [{"left": "hidden", "op": "within", "right": "base", "margin": 0.01}]},
        {"id": "other below base", "checks": [{"left": "other", "op": "lt", "right": "base"}]},
    ],
}


def toy_results(root: Path) -> ResultStore:
    """A results folder with the toy reference, its mapping, two seeds of base and hidden, and a dchi-text sweep."""
    (root / "reference").mkdir(parents=True)
    (root / "reference" / "toy.json").write_text(json.dumps(REFERENCE))
    (root / "reproduction").mkdir()
    (root / "reproduction" / "toy.yaml").write_text(yaml.safe_dump(MAPPING))
    store = ResultStore(root)
    base_spec = {**make_record().spec, "defense": "none", "defense_args": {}}
    for seed in range(2):
        store.append(make_record(seed, defense="none", config_hash="base", spec=base_spec,
                                 metrics={"utility/accuracy": 0.8 + seed / 100}))
        store.append(make_record(seed, config_hash="hidden", metrics={"utility/accuracy": 0.7 + seed / 100}))
        for eta, utility, inversion in ((10.0, 0.5, 0.0), (60.0, 0.7, 0.5)):
            spec = {**make_record().spec, "defense": "dchi-text", "defense_args": {"eta": eta}, "attack": "inversion"}
            store.append(make_record(seed, defense="dchi-text", config_hash=f"eta{eta}", spec=spec,
                                     metrics={"utility/accuracy": utility,
                                              "privacy/inversion/token_accuracy": inversion}))
    store.append(make_record(0, config_hash="other-encoder",  # a different encoder never enters a row
                             spec={**make_record().spec, "encoder": "minilm"}, metrics={"utility/accuracy": 0.1}))
    return store


def test_rows_pair_the_paper_with_our_mean_std_and_n(tmp_path):
    store = toy_results(tmp_path)
    records, _ = store.read()
    report = rep.reproduce(tmp_path, "toy", records)
    rows = {row["id"]: row for row in report["rows"]}
    assert rows["base"]["paper"] == {"value": 0.8, "std": 0.01, "path": "base.accuracy"}
    assert rows["base"]["ours"]["mean"] == pytest.approx(0.805) and rows["base"]["ours"]["n"] == 2
    assert rows["base"]["ours"]["std"] == pytest.approx(0.00707, abs=1e-4) and rows["base"]["ours"]["seeds"] == [0, 1]
    assert rows["hidden"]["ours"]["mean"] == pytest.approx(0.705)  # the minilm record is another setting
    assert rows["hidden"]["difference"] == pytest.approx(0.705 - 0.75)
    assert rows["other"]["ours"]["mean"] is None and rows["other"]["ours"]["note"] == "no records"
    # matched privacy: the paper's inversion 0.25 lies halfway between eta 10 (0.0) and 60 (0.5)
    assert rows["matched 50"]["ours"]["mean"] == pytest.approx(0.6)
    assert "between eta 10 (0.000) and 60 (0.500)" in rows["matched 50"]["ours"]["note"]
    assert rows["matched 90"]["ours"]["mean"] is None and "outside our range" in rows["matched 90"]["ours"]["note"]
    assert report["summary"] == {"rows": 5, "rows_with_records": 3,
                                 "claims": {"holds": 1, "fails": 1, "unresolved": 0, "not applicable": 0,
                                            "no records": 1}}


def test_std_is_a_spread_over_seeds_and_absent_for_one_seed(tmp_path):
    store = toy_results(tmp_path)
    spec = {**make_record().spec, "defense": "dchi-token", "defense_args": {"eta": 60.0}, "attack": "rss"}
    store.append(make_record(0, defense="dchi-token", config_hash="other", spec=spec,
                             metrics={"utility/accuracy": 0.66}))
    for seed in range(2):  # a second eta 60 configuration whose utility differs by seed: 0.70 and 0.74
        spec = {**make_record().spec, "defense": "dchi-text", "defense_args": {"eta": 60.0}, "attack": "inversion"}
        store.append(make_record(seed, defense="dchi-text", config_hash="eta60.x", spec=spec,  # chosen over eta60.0
                                 metrics={"utility/accuracy": 0.70 + 0.04 * seed,
                                          "privacy/inversion/token_accuracy": 0.5}))
    records, _ = store.read()
    rows = {row["id"]: row["ours"] for row in rep.reproduce(tmp_path, "toy", records)["rows"]}
    assert rows["other"]["n"] == 1 and rows["other"]["std"] is None  # not 0: one seed has no spread
    assert "±" not in rep.markdown(rep.reproduce(tmp_path, "toy", records)).split("| other |")[1].split("\n")[0]
    # halfway between eta 10 (0.5 on both seeds) and 60 (0.70, 0.74): 0.60 and 0.62 per seed, whose std is 0.0141;
    # the larger endpoint std (0.0283, eta 60's) is not a spread of the interpolated values
    assert rows["matched 50"]["mean"] == pytest.approx(0.61)
    assert rows["matched 50"]["std"] == pytest.approx(0.01414, abs=1e-4)


def test_a_matched_row_is_a_mean_over_the_seeds_both_endpoints_have(tmp_path):
    store = toy_results(tmp_path)  # eta 10 and 60 on seeds 0-1
    for seed in (2, 3):  # eta 60 alone gains two seeds, far from the others
        spec = {**make_record().spec, "defense": "dchi-text", "defense_args": {"eta": 60.0}, "attack": "inversion"}
        store.append(make_record(seed, defense="dchi-text", config_hash="eta60.0", spec=spec,
                                 metrics={"utility/accuracy": 0.9, "privacy/inversion/token_accuracy": 0.5}))
    records, _ = store.read()
    row = {row["id"]: row["ours"] for row in rep.reproduce(tmp_path, "toy", records)["rows"]}["matched 50"]
    # halfway between 0.5 and 0.7 on seeds 0 and 1; eta 60's mean over four seeds (0.8) would give 0.65
    assert row["mean"] == pytest.approx(0.6) and row["n"] == 2 and row["seeds"] == [0, 1]


def test_markdown_lists_recorded_rows_and_every_claim(tmp_path):
    store = toy_results(tmp_path)
    records, _ = store.read()
    report = rep.reproduce(tmp_path, "toy", records)
    text = rep.markdown(report)
    assert "| base | accuracy | 0.800 ± 0.010 | 0.805 ± 0.007 (n=2) | +0.005 |" in text
    assert "| other |" not in text  # no records: left out of the recorded view
    assert "| other |" in rep.markdown(report, recorded=False)
    claim_lines = [line for line in text.splitlines() if line.startswith("| ") and line.count("|") == 4]
    assert len(claim_lines) == len(report["claims"]) + 1  # the header and one line per claim


def test_claims_hold_fail_or_have_no_records_on_ours_and_on_the_paper(tmp_path):
    store = toy_results(tmp_path)
    claims = {c["id"]: c for c in rep.reproduce(tmp_path, "toy", store.read()[0])["claims"]}
    assert claims["hiding costs utility"]["verdict"] == "holds"
    assert claims["hiding is free"]["verdict"] == "fails"
    assert "0.705 within base 0.805 ± 0.01" in claims["hiding is free"]["checks"][0]["detail"]
    assert claims["other below base"]["verdict"] == "no records"
    assert claims["other below base"]["paper_verdict"] == "holds"  # the same check on the paper's numbers
    assert claims["hiding is free"]["paper_verdict"] == "fails"


def with_majority(store: ResultStore, root: Path, majority: float) -> ResultStore:
    """A copy of the toy records whose notes give the majority answer's accuracy."""
    moved = ResultStore(root)
    for record in store.read()[0]:
        moved.append(record.model_copy(update={"notes": {"majority_utility": {"accuracy": majority}}}))
    return moved


@pytest.mark.parametrize("majority, verdict", [(0.70, "holds"), (0.79, "not applicable"), (0.90, "not applicable")])
def test_an_ordering_whose_higher_row_is_at_the_majority_answer_is_not_applicable(tmp_path, majority, verdict):
    """base (0.805) must beat the majority answer by more than CHANCE_MARGIN for 'base above hidden' to count."""
    toy = toy_results(tmp_path / "toy")
    shutil.copytree(tmp_path / "toy" / "reference", tmp_path / "moved" / "reference")
    shutil.copytree(tmp_path / "toy" / "reproduction", tmp_path / "moved" / "reproduction")
    records = with_majority(toy, tmp_path / "moved", majority).read()[0]
    report = rep.reproduce(tmp_path / "moved", "toy", records)
    claims = {c["id"]: c for c in report["claims"]}
    assert claims["hiding costs utility"]["verdict"] == verdict
    assert claims["hiding costs utility"]["paper_verdict"] == "holds"  # the paper's side has no majority answer
    assert claims["hiding is free"]["verdict"] == "fails"  # 'within' expects no row higher: always applicable
    rows = {row["id"]: row for row in report["rows"]}
    assert rows["base"]["ours"]["chance"] == pytest.approx(majority)
    assert rows["matched 50"]["ours"]["chance"] == pytest.approx(majority)  # interpolated on the same data
    assert report["summary"]["claims"]["not applicable"] == (verdict == "not applicable")
    if verdict == "not applicable":
        assert "does not beat its chance level 0." in claims["hiding costs utility"]["checks"][0]["detail"]


def test_an_attacks_chance_level_is_the_random_guess_of_the_same_cells():
    """For an attack's metric where higher means more leakage the chance level is the recorded random guess."""
    records = [make_record(seed, metrics={"privacy/rss/identity": 0.05, "random/rss/identity": 0.10 + seed / 10,
                                          "privacy/gradient-matching/mse": 0.3, "random/gradient-matching/mse": 0.9},
                           higher_is_better={"privacy/rss/identity": True, "privacy/gradient-matching/mse": False})
               for seed in range(2)]
    assert rep._chance(records, "privacy/rss/identity") == pytest.approx(0.15)  # the mean over seeds
    assert rep._chance(records, "privacy/gradient-matching/mse") is None  # lower is more leakage: no floor
    assert rep._chance(records[:1] + [make_record(1, metrics={"privacy/rss/identity": 0.05})],
                       "privacy/rss/identity") is None  # one record without its random guess: none
    # an ordering whose expected-higher row (the undefended attack, 0.05) is below the guess compares noise
    claim = [{"id": "hiding lowers leakage", "checks": [{"left": "hidden", "op": "lt", "right": "base"}]}]
    judged = rep.judge(claim, {"hidden": 0.0, "base": 0.05}, {"hidden": 0.0, "base": 0.05}, "t",
                       chance={"hidden": 0.15, "base": 0.15})[0]
    assert judged["verdict"] == "not applicable" and judged["paper_verdict"] == "holds"
    assert "does not beat its chance level 0.150" in judged["checks"][0]["detail"]


def test_the_convex_probes_chance_level_is_the_majority_answer_of_its_metric():
    """probe_accuracy scores another predictor by the same metric on the same data: its floor is the majority's
    accuracy; a metric the note does not hold has none."""
    records = [make_record(seed, notes={"majority_utility": {"accuracy": 0.63 + seed / 100, "f1": 0.0}})
               for seed in range(2)]
    assert rep._chance(records, "utility/probe_accuracy") == pytest.approx(0.635)
    assert rep._chance(records, "utility/probe_f1") == pytest.approx(0.0)
    assert rep._chance(records, "utility/accuracy") == pytest.approx(0.635)
    assert rep._chance(records, "utility/probe_mcc") is None


def test_a_row_can_name_the_metric_that_holds_its_chance_level():
    """An attack that measures its own chance level (name-generation's em_chance) overrides the random guess."""
    records = [make_record(seed, metrics={"privacy/g/em": 0.2, "privacy/g/em_chance": 0.18 + seed / 100,
                                          "random/g/em": 0.6},
                           higher_is_better={"privacy/g/em": True, "privacy/g/em_chance": True})
               for seed in range(2)]
    assert rep._chance(records, "privacy/g/em") == pytest.approx(0.6)
    assert rep._chance(records, "privacy/g/em", "privacy/g/em_chance") == pytest.approx(0.185)
    cell = rep.summarize_cell(records, "privacy/g/em", "privacy/g/em_chance")
    assert cell.mean == pytest.approx(0.2) and cell.chance == pytest.approx(0.185)
    with pytest.raises(BenchError, match="unknown keys"):
        rep.expand_rows({"rows": [{"id": "r", "metric": "m", "chance_of": "x"}]}, "t")
    rows = rep.expand_rows({"rows": [{"for": {"m": ["em"]}, "id": "{m}", "metric": "privacy/g/{m}",
                                      "chance": "privacy/g/{m}_chance"}]}, "t")
    assert rows[0]["chance"] == "privacy/g/em_chance"


def test_a_claim_is_judged_on_its_applicable_checks():
    means = {"a": 0.80, "b": 0.70, "c": 0.51, "d": 0.52}
    chance = {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5}
    claims = [{"id": "mixed", "checks": [{"left": "a", "op": "gt", "right": "b"},      # applicable, holds
                                         {"left": "c", "op": "gt", "right": "d"}]},    # c at chance: n/a
              {"id": "all at chance", "checks": [{"left": "d", "op": "gt", "right": "c"}]},
              {"id": "a failing check still fails", "checks": [{"left": "b", "op": "gt", "right": "a"},
                                                               {"left": "c", "op": "gt", "right": "d"}]},
              {"id": "rising", "checks": [{"op": "increasing", "rows": ["c", "d", "a"]}]},
              {"id": "falling to chance", "checks": [{"op": "decreasing", "rows": ["c", "b"]}]}]
    judged = {c["id"]: c for c in rep.judge(claims, means, means, "t", chance=chance)}
    assert judged["mixed"]["verdict"] == "holds"
    assert [c["verdict"] for c in judged["mixed"]["checks"]] == ["holds", "not applicable"]
    assert judged["all at chance"]["verdict"] == "not applicable"
    assert judged["a failing check still fails"]["verdict"] == "fails"
    assert judged["rising"]["verdict"] == "holds"  # the expected-highest row (a) is informative
    assert judged["falling to chance"]["verdict"] == "not applicable"  # its expected-highest row (c) is not
    assert {c["paper_verdict"] for c in judged.values()} <= {"holds", "fails"}
    report = {"title": "t", "command": "bench reproduce t", "rows": [], "claims": list(judged.values())}
    # on the paper's side (no majority answer) the same c > d check is judged, and fails
    assert "| mixed | holds (1 of 2 checks at chance) | fails |" in rep.markdown(report)


def test_without_records_every_claim_has_no_records(tmp_path):
    toy_results(tmp_path)
    report = rep.reproduce(tmp_path, "toy", [])
    assert {c["verdict"] for c in report["claims"]} == {"no records"}
    assert all(row["ours"]["mean"] is None for row in report["rows"])


def test_missing_cells_are_what_run_would_run(tmp_path):
    store = toy_results(tmp_path)
    cells = rep.missing_cells(tmp_path, "toy", store.read()[0])
    # base and hidden lack seed 2; other lacks all; the matched rows' sweep lacks seed 2 and eta 120 (listed once)
    assert [c["seed"] for c in cells] == [2, 2, 0, 1, 2, 2, 2, 0, 1, 2]
    sweep = [(c["defense_args"]["eta"], c["seed"]) for c in cells if c["defense"] == "dchi-text"]
    assert sweep == [(10.0, 2), (60.0, 2), (120.0, 0), (120.0, 1), (120.0, 2)]
    other = [c for c in cells if c["defense"] == "dchi-token"]
    assert other[0] == {"encoder": "mock", "mode": "frozen", "task": "sst2", "defense": "dchi-token",
                        "defense_args": {"eta": 60.0}, "attack": "rss", "seed": 0}
    assert rep._spec_kwargs({"training.mode": "finetune", "training.epochs": 3, "server.adapt": "prob",
                             "task": "qqp"}) == {"mode": "finetune", "training_args": {"epochs": 3},
                                                 "server_args": {"adapt": "prob"}, "task": "qqp"}


def test_report_is_written_atomically_and_parses(tmp_path):
    store = toy_results(tmp_path)
    report = rep.reproduce(tmp_path, "toy", store.read()[0])
    path = rep.write_report(tmp_path, report)
    assert path == tmp_path / "reproduction" / "toy.json"
    assert json.loads(path.read_text()) == report
    before = path.read_bytes()
    broken = {**report, "rows": [{"ours": float("nan")}]}  # cannot be written as JSON
    with pytest.raises(ValueError):
        rep.write_report(tmp_path, broken)
    assert path.read_bytes() == before  # the old report survives a failed write
    assert [p.name for p in path.parent.iterdir() if p.suffix == ".tmp"] == []


def test_bad_mappings_are_one_sentence(tmp_path):
    toy_results(tmp_path)
    with pytest.raises(BenchError, match="no reference table 'nope'"):
        rep.reproduce(tmp_path, "nope", [])
    (tmp_path / "reference" / "bare.json").write_text(json.dumps(REFERENCE))
    with pytest.raises(BenchError, match="has no mapping"):
        rep.reproduce(tmp_path, "bare", [])
    (tmp_path / "reproduction" / "bare.yaml").write_text("not_mapped: no such task in the harness.\n")
    with pytest.raises(BenchError, match="not mapped to harness cells: no such task"):
        rep.reproduce(tmp_path, "bare", [])
    bad = {**MAPPING, "claims": [{"id": "x", "checks": [{"left": "nowhere", "op": "gt", "right": "base"}]}]}
    (tmp_path / "reproduction" / "toy.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(BenchError, match="unknown row 'nowhere'"):
        rep.reproduce(tmp_path, "toy", [])


def test_cli_prints_the_table_and_writes_the_report(tmp_path):
    toy_results(tmp_path)
    result = runner.invoke(app, ["reproduce", "toy", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Toy Table 9" in result.output and "0.805 ± 0.007 (n=2)" in result.output
    assert "hiding is free" in result.output and "fails" in result.output
    assert (tmp_path / "reproduction" / "toy.json").is_file()
    listing = runner.invoke(app, ["reproduce", "--results-dir", str(tmp_path)])
    assert listing.exit_code == 0 and "toy" in listing.output and "3 / 5" in listing.output


def test_cli_unknown_table_exits_2_with_one_sentence(tmp_path):
    toy_results(tmp_path)
    result = runner.invoke(app, ["reproduce", "nope", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "no reference table 'nope'" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) <= 3  # one sentence, wrapped at most


def test_every_reference_table_has_a_mapping_or_a_reason():
    for table in rep.tables(REPO_RESULTS):
        mapping = rep.load_mapping(REPO_RESULTS, table)
        if mapping.get("not_mapped"):
            assert isinstance(mapping["not_mapped"], str) and len(mapping["not_mapped"]) > 20, table
            assert set(mapping) == {"not_mapped"}, table
            continue
        rows = rep.expand_rows(mapping, table)
        assert rows and mapping.get("claims"), table
        assert 1 <= len(mapping["claims"]) <= 12, table  # a few named claims per table (qu2021_dchi maps three)
        reference = rep.load_reference(REPO_RESULTS, table)
        for row in rows:  # every paper path names a transcribed value
            rep.paper_value(reference, row.get("paper"))


@pytest.fixture
def committed_copy(tmp_path):
    """The committed reference files, mappings, reports and records in a scratch results folder."""
    for folder in ("reference", "reproduction", "records"):
        shutil.copytree(REPO_RESULTS / folder, tmp_path / folder)
    return tmp_path


def test_reproduce_runs_every_mapped_table_over_the_committed_records(committed_copy):
    mapped = [t for t in rep.tables(committed_copy) if not rep.load_mapping(committed_copy, t).get("not_mapped")]
    assert {"texthide", "texthide_table1", "qu2021_dchi", "yue2021_santext", "li_ndd_table1"} <= set(mapped)
    for table in mapped:
        committed = json.loads((REPO_RESULTS / "reproduction" / f"{table}.json").read_text())
        result = runner.invoke(app, ["reproduce", table, "--results-dir", str(committed_copy)])
        assert result.exit_code == 0, (table, result.output)
        assert committed["title"] in result.output
        written = json.loads((committed_copy / "reproduction" / f"{table}.json").read_text())
        assert written == committed, f"results/reproduction/{table}.json is stale: run `bench reproduce {table}`"
    listing = runner.invoke(app, ["reproduce", "--results-dir", str(committed_copy)])
    assert listing.exit_code == 0 and "not mapped" in listing.output


def test_run_runs_the_missing_cells_then_reports_them(tiny_data, results):
    (results / "reference").mkdir(parents=True)
    (results / "reference" / "toy.json").write_text(json.dumps(REFERENCE))
    (results / "reproduction").mkdir()
    mapping = {"title": "Toy run", "run": {"seeds": [0]},
               "rows": [{"id": "base", "paper": "base.accuracy", "metric": "utility/accuracy",
                         "select": {"task": "sst2", "defense": "none", "defense_args": {}, "encoder": "mock",
                                    "attack": "rss", "attack_args": {"sbert": "mock"}, "training.epochs": 2}}],
               "claims": [{"id": "base above 0", "checks": [{"left": "base", "op": "gt", "right": 0.0}]}]}
    (results / "reproduction" / "toy.yaml").write_text(yaml.safe_dump(mapping))
    before = runner.invoke(app, ["reproduce", "toy"])
    assert before.exit_code == 0 and "no records" in before.output and not (results / "records").exists()
    after = runner.invoke(app, ["reproduce", "toy", "--run"])
    assert after.exit_code == 0, after.output
    records, _ = ResultStore(results).read()
    assert len(records) == 1 and records[0].spec["training"]["epochs"] == 2 and records[0].seed == 0
    report = json.loads((results / "reproduction" / "toy.json").read_text())
    assert report["rows"][0]["ours"]["n"] == 1 and report["claims"][0]["verdict"] == "holds"
    again = runner.invoke(app, ["reproduce", "toy", "--run"])  # nothing left to run
    assert again.exit_code == 0 and len(ResultStore(results).read()[0]) == 1


@pytest.mark.parametrize("spec, verdict", [
    ({"left": "a", "op": "gt", "right": "b"}, "holds"),
    ({"left": "a", "op": "gt", "right": "b", "margin": 0.2}, "fails"),  # beats it, but not by the margin
    ({"left": "b", "op": "ge", "right": "a", "margin": 0.2}, "holds"),  # below it, within the allowed margin
    ({"left": "b", "op": "ge", "right": "a", "margin": 0.05}, "fails"),
    ({"left": "a", "op": "le", "right": "b", "margin": 0.2}, "holds"),
    ({"left": "a", "op": "lt", "right": "b"}, "fails"),
    ({"left": ["a", "b"], "op": "within", "right": 0.65, "margin": 0.001}, "holds"),  # the mean of two rows
    ({"op": "increasing", "rows": ["b", "a"]}, "holds"),
    ({"op": "decreasing", "rows": ["b", "a"]}, "fails"),
    ({"left": "a", "op": "gt", "right": "missing"}, "no records"),
])
def test_check_ops(spec, verdict):
    assert rep.check(spec, {"a": 0.7, "b": 0.6, "missing": None}, "toy")["verdict"] == verdict


def test_a_failing_check_shows_the_relation_its_numbers_have_beside_the_claimed_one():
    failed = rep.check({"left": "a", "op": "gt", "right": "b", "margin": 0.01}, {"a": 0.51, "b": 0.6}, "toy")
    assert failed["verdict"] == "fails" and failed["detail"] == "a 0.510 < b 0.600 (claimed > + 0.01)"


def test_rows_recorded_on_different_seeds_are_compared_on_the_seeds_they_share():
    # a has seeds 0-4, b only 0-2; on all seeds a's mean (0.62) is above b's (0.603), but on the shared seeds a
    # (0.58) is below b (0.603) on every seed: the paired comparison decides, and says so
    by_seed = {"a": {0: 0.58, 1: 0.57, 2: 0.59, 3: 0.70, 4: 0.66}, "b": {0: 0.60, 1: 0.60, 2: 0.61},
               "c": {0: 0.50, 1: 0.52, 2: 0.51}}
    means = {k: sum(v.values()) / len(v) for k, v in by_seed.items()}
    unpaired = rep.check({"left": "a", "op": "gt", "right": "b"}, means, "toy")
    paired = rep.check({"left": "a", "op": "gt", "right": "b"}, means, "toy", by_seed)
    assert unpaired["verdict"] == "holds" and "paired" not in unpaired["detail"]
    assert paired["verdict"] == "fails" and paired["detail"].endswith("(paired on seeds 0-2)")
    assert paired["left"] == pytest.approx(0.58) and paired["right"] == pytest.approx(0.6033, abs=1e-4)
    trend = rep.check({"op": "decreasing", "rows": ["a", "b", "c"]}, means, "toy", by_seed)
    assert trend["verdict"] == "fails" and trend["values"] == pytest.approx([0.58, 0.6033, 0.51], abs=1e-4)
    # equal seed sets, a number or a list of rows: the rows' own means, no pairing
    same = rep.check({"left": "b", "op": "gt", "right": "c"}, means, "toy", by_seed)
    assert same["verdict"] == "holds" and "paired" not in same["detail"]
    assert "paired" not in rep.check({"left": "a", "op": "gt", "right": 0.5}, means, "toy", by_seed)["detail"]
    assert "paired" not in rep.check({"left": ["a"], "op": "gt", "right": "b"}, means, "toy", by_seed)["detail"]


def test_an_ordering_the_seeds_do_not_resolve_is_unresolved_not_held_or_failed():
    # a beats b on the mean of five paired seeds, but the seeds disagree: the 95% interval of the paired difference
    # straddles 0, so neither "a > b" nor "a < b" is a finding; with differences that agree it is decided
    noisy = {"a": {0: 0.70, 1: 0.50, 2: 0.66, 3: 0.52, 4: 0.64}, "b": {0: 0.55, 1: 0.62, 2: 0.58, 3: 0.60, 4: 0.57}}
    steady = {"a": {0: 0.60, 1: 0.66, 2: 0.61, 3: 0.64, 4: 0.62}, "b": noisy["b"]}
    for by_seed, gt, lt in ((noisy, "unresolved", "unresolved"), (steady, "holds", "fails")):
        means = {k: sum(v.values()) / len(v) for k, v in by_seed.items()}
        assert rep.check({"left": "a", "op": "gt", "right": "b"}, means, "toy", by_seed)["verdict"] == gt
        assert rep.check({"left": "a", "op": "lt", "right": "b"}, means, "toy", by_seed)["verdict"] == lt
        assert rep.check({"op": "increasing", "rows": ["b", "a"]}, means, "toy", by_seed)["verdict"] == gt
        assert rep.check({"left": "a", "op": "gt", "right": "b"}, means, "toy")["verdict"] == "holds"  # means only
    detail = rep.check({"left": "a", "op": "gt", "right": "b"}, {"a": 0.604, "b": 0.584}, "toy", noisy)["detail"]
    assert "paired difference (left - right) over seeds 0-4 is +0.020 ± " in detail and "straddles 0" in detail
    # "a <= b + margin" reads as a - b against +margin, the way its numbers are printed just before
    detail = rep.check({"left": "a", "op": "le", "right": "b", "margin": 0.01}, {"a": 0.604, "b": 0.584}, "toy",
                       noisy)["detail"]
    assert "a 0.604 > b 0.584 (claimed <= + 0.01)" in detail
    assert "is +0.020 ± " in detail and "straddles +0.01" in detail
    # a margin moves the threshold the interval is held against
    means = {k: sum(v.values()) / len(v) for k, v in steady.items()}
    assert rep.check({"left": "a", "op": "gt", "right": "b", "margin": 0.04}, means, "toy", steady)["verdict"] == \
        "unresolved"
    assert rep.combine(["holds", "unresolved", "not applicable"]) == "unresolved"
    assert rep.combine(["fails", "unresolved"]) == "fails" and rep.combine(["holds", "not applicable"]) == "holds"


def test_an_equivalence_is_held_against_its_spread_as_an_ordering_is():
    """``within``: holds when the paired differences' 95% interval lies inside ±margin, fails when it lies outside,
    and is unresolved when it crosses the margin (the mean alone would decide it either way)."""
    base = {0: 0.60, 1: 0.62, 2: 0.61}
    cases = [({0: 0.61, 1: 0.63, 2: 0.615}, "holds"),  # +0.008 ± 0.007: inside ±0.03
             ({0: 0.70, 1: 0.72, 2: 0.705}, "fails"),  # +0.098 ± 0.007: outside
             ({0: 0.64, 1: 0.64, 2: 0.62}, "unresolved")]  # +0.023 ± 0.038: the mean is inside, the interval not
    for left, verdict in cases:
        by_seed = {"a": left, "b": base}
        means = {k: sum(v.values()) / len(v) for k, v in by_seed.items()}
        found = rep.check({"left": "a", "op": "within", "right": "b", "margin": 0.03}, means, "toy", by_seed)
        assert found["verdict"] == verdict, found["detail"]


def test_texthide_t6_offline_the_two_public_corpora_are_unresolved_and_mnli_waits_for_a_hub(committed_records):
    """grids/texthide_table6.yaml: SST-2 TextHide-inter with QNLI or QQP mixed in, on the committed seeds with the
    inter labels normalised (texthide version 2): 0.713 and 0.681, paired +0.032 ± 0.035 over three seeds, which
    neither confirms nor rules out "within 0.03", so the offline claim is unresolved (it held at version 1, 0.708 and
    0.695); MNLI has no offline copy, so the paper's own claim has no records rather than a verdict made up from
    another corpus."""
    report = rep.reproduce(REPO_RESULTS, "texthide_table6", list(committed_records))
    claims = {claim["id"]: claim for claim in report["claims"]}
    assert claims["TextHide T6 (offline corpora): QNLI and QQP as public corpus agree"]["verdict"] == "unresolved"
    assert claims["TextHide T6: the public corpus hardly matters"]["verdict"] == "no records"


@pytest.mark.parametrize("text", ['{"source": {"paper": "A', "[1, 2]"])
def test_an_unreadable_reference_table_is_one_sentence(tmp_path, text):
    toy_results(tmp_path)
    (tmp_path / "reference" / "toy.json").write_text(text)
    result = runner.invoke(app, ["reproduce", "toy", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2 and "reference table" in result.output and "Traceback" not in result.output


def test_a_nan_seed_leaves_the_row_without_a_value_as_the_leaderboard_does():
    records = [make_record(s, metrics={"utility/accuracy": v}) for s, v in enumerate([0.8, float("nan"), 0.7])]
    cell = rep.summarize_cell(records, "utility/accuracy")
    assert cell.mean is None and cell.n == 3 and "NaN in seed(s) 1 of 3" in cell.note


def test_ours_scale_rescales_the_chance_level_with_our_values(tmp_path):
    """A row in the paper's unit (x 100) compares our mean with the chance level in that unit too (the chance stayed
    in the record's unit, so a claim on the row could come out 'not applicable')."""
    toy_results(tmp_path)
    mapping = {"title": "Scaled", "defaults": {"encoder": "mock", "training.mode": "frozen"},
               "rows": [{"id": "base", "metric": "privacy/rss/identity", "ours_scale": 100,
                         "select": {"task": "sst2", "defense": "texthide", "defense_args": {"m": 256, "k": 4}}}]}
    (tmp_path / "reference" / "scaled.json").write_text(json.dumps({"source": {"paper": "x", "table": "1"},
                                                                    "values": {}}))
    (tmp_path / "reproduction" / "scaled.yaml").write_text(yaml.safe_dump(mapping))
    ResultStore(tmp_path).append(make_record(0, config_hash="scaled", metrics={
        "privacy/rss/identity": 50.0, "random/rss/identity": 10.0}))
    records, _ = ResultStore(tmp_path).read()
    table = rep.reproduce(tmp_path, "scaled", [r for r in records if r.config_hash == "scaled"])
    ours = table["rows"][0]["ours"]
    assert ours["mean"] == 0.5 and ours["chance"] == 0.1


def test_the_best_covered_configuration_is_counted_by_its_seeds_with_the_metric():
    """Configuration a has five seeds but only two report the probe's metric; b has three that do: b is chosen
    (counting every seed chose a, whose mean rests on two values)."""
    a = [make_record(s, config_hash="a", metrics={"utility/accuracy": 0.5,
                                                  **({"utility/probe_accuracy": 0.1} if s < 2 else {})})
         for s in range(5)]
    b = [make_record(s, config_hash="b", metrics={"utility/probe_accuracy": 0.9}) for s in range(3)]
    cell = rep.summarize_cell(a + b, "utility/probe_accuracy")
    assert cell.n == 3 and cell.mean == 0.9 and cell.setting["config_hash"] == "b"
    assert "1 other matching configuration(s) ignored" in cell.note


def test_records_kept_elsewhere_are_held_against_the_published_tables(tmp_path, monkeypatch):
    # a user whose runs go to BENCH_RESULTS_DIR (a folder with records/ only) still reproduces the papers' tables:
    # the tables and mappings come from the published folder, the report is written beside the user's records
    shutil.copytree(REPO_RESULTS / "records", tmp_path / "records")
    elsewhere = tmp_path / "another-project"
    (elsewhere / "results").mkdir(parents=True)  # a folder of another project's: never read for the tables
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path))
    result = runner.invoke(app, ["reproduce", "texthide_table2"])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "reproduction" / "texthide_table2.json").read_text())
    published = json.loads((REPO_RESULTS / "reproduction" / "texthide_table2.json").read_text())
    assert written["rows"] == published["rows"] and written["claims"] == published["claims"]
    assert not (tmp_path / "reference").exists()


def test_the_docs_verdict_table_is_the_committed_reproductions():
    # the docs' reproduction index lists every table's coverage and verdicts; a re-run that moves one must move the
    # doc too (bench report --results-dir results --pages docs/results)
    text = (REPO_RESULTS.parent / "docs" / "results" / "reproduction" / "index.md").read_text(encoding="utf-8")
    block = text.split("<!-- reproduction-verdicts -->\n", 1)[1].split("\n\n", 1)[0]
    documented = {}
    for line in block.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        documented[cells[0].split("`")[1]] = cells[1:]
    committed = {}
    for path in sorted((REPO_RESULTS / "reproduction").glob("*.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        summary, claims = report["summary"], report["claims"]
        failing = "; ".join(c["id"] for c in claims if c["verdict"] == "fails") or "-"
        committed[report["table"]] = [f"{summary['rows_with_records']} / {summary['rows']}",
                                      *(str(summary["claims"][v]) for v in ("holds", "fails", "unresolved",
                                                                             "not applicable", "no records")),
                                      failing]
    assert documented == committed


def test_every_command_reads_one_default_folder_and_the_published_board_when_asked(tmp_path, monkeypatch):
    # bench report and bench reproduce defaulted to the published results/ while bench summarize and bench run used
    # ./bench-results; now every command has the one rule, and the published board is --results-dir results
    from bench.results.store import published_results_dir

    monkeypatch.delenv("BENCH_RESULTS_DIR", raising=False)
    monkeypatch.chdir(REPO_RESULTS.parent)
    assert published_results_dir() == Path("results")  # in the checkout, printed as before
    monkeypatch.chdir(tmp_path)
    assert published_results_dir() == REPO_RESULTS
    for command in (["report"], ["reproduce"], ["summarize"]):
        refused = runner.invoke(app, command)
        assert refused.exit_code == 2 and "results folder bench-results does not exist" in refused.output, command
    report = runner.invoke(app, ["report", "--results-dir", str(REPO_RESULTS)])
    assert report.exit_code == 0, report.output
    assert f"from the records in `{REPO_RESULTS.as_posix()}`" in report.output
    listing = runner.invoke(app, ["reproduce", "--results-dir", str(REPO_RESULTS)], env={"COLUMNS": "250"})
    assert listing.exit_code == 0 and "texthide_table2" in listing.output and "/ 19" in listing.output
    assert list(tmp_path.iterdir()) == []
