"""What a newcomer meets first: one version, one results-folder rule, sizes shown where they differ, portable data
sources, the published board kept to committed code, Ray as an optional part, and what `bench list` tells."""

import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.results.leaderboard import aggregate, seed_frame
from bench.results.migrations import portable_source
from bench.results.store import ResultStore
from bench.results.views import report
from tests.unit.test_store import make_record

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_the_version_is_written_once_and_records_carry_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "bench.__version__"}
    from bench.engine import provenance

    assert "bench.__version__" in Path(provenance.__file__).read_text(encoding="utf-8")  # what a record stores


def test_licence_and_citation_are_there():
    import yaml

    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] and citation["title"] and citation["license"] == "MIT"
    assert "version" not in citation  # the version is written once, in bench/__init__.py


def test_ray_is_an_optional_part():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not any(d.startswith("ray") for d in project["dependencies"])
    assert any(d.startswith("ray") for d in project["optional-dependencies"]["ray"])
    assert ".[test,ray" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")  # CI installs what the tests need


def test_the_ray_executor_without_ray_is_one_sentence(tmp_path, monkeypatch):
    grid = tmp_path / "g.yaml"
    grid.write_text("tasks: [sst2]\nencoders: [mock]\ndefenses: [none]\n")
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError, as where it is not installed
    result = runner.invoke(app, ["run", "--grid", str(grid), "--executor", "ray", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2 and "--executor ray needs Ray" in result.output
    assert "textprivacy-bench[ray]" in result.output and not (tmp_path / "records").exists()


def test_old_absolute_data_sources_read_as_portable_names():
    assert portable_source("local:/work/shared/data/glue/SST-2") == "data:glue/SST-2"
    assert portable_source("offline /home/me/data/aia/blog") == "data:aia/blog"
    assert portable_source("hub:nyu-mll/glue/sst2") == "hub:nyu-mll/glue/sst2"
    assert portable_source("local:/x") == "local:/x"  # not under a data folder: kept as it is
    # a new record names the folder relative to the data folder the cell read, however that folder was spelled
    assert portable_source("local:../shared/data/glue/CoLA", "../shared/data") == "data:glue/CoLA"
    assert portable_source("local:/elsewhere/f.zip", "/srv/data") == "local:/elsewhere/f.zip"


def test_a_stored_record_loads_with_a_portable_source_and_its_file_is_not_rewritten(tmp_path):
    store = ResultStore(tmp_path)
    path = store.path_for("texthide")
    path.parent.mkdir(parents=True)
    line = make_record(0).model_dump_json().replace('"local:/x"', '"local:/abs/shared/data/glue/SST-2"')
    path.write_text(line + "\n", encoding="utf-8")  # as a record made before sources were portable
    before = path.read_bytes()
    assert b"local:/abs/shared/data/glue/SST-2" in before
    records, _ = store.read()
    assert records[0].data_source == "data:glue/SST-2" and records[0].data_hash == "d" * 64
    assert path.read_bytes() == before


def test_committed_records_name_their_data_portably(committed_records):
    assert not [r.data_source for r in committed_records if r.data_source.startswith(("local:/", "offline /"))]


def test_a_new_record_names_its_data_portably(tiny_data):
    from bench.engine.runner import make_spec, run_cell

    record = run_cell(make_spec(defense="none", encoder="mock", training_args="epochs=1", n_train=20, n_eval=10))
    assert record.data_source == "data:glue/SST-2"


def test_publishing_from_uncommitted_code_is_refused(tmp_path, monkeypatch):
    import bench.engine.provenance as provenance
    import bench.results.store as store_module

    published = tmp_path / "results"
    monkeypatch.setattr(store_module, "published_results_dir", lambda: published)
    monkeypatch.setattr(provenance, "git_sha", lambda: "0123abc-dirty")
    args = ["run", "--encoder", "mock", "--train-args", "epochs=1", "--results-dir", str(published)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "uncommitted changes" in result.output and not published.exists()
    monkeypatch.setattr(provenance, "git_sha", lambda: "0123abc")  # committed code: the check lets it through
    provenance.check_publishable(ResultStore(published))
    provenance.check_publishable(ResultStore(tmp_path / "mine"))  # any other folder takes dirty code's records
    monkeypatch.setattr(provenance, "git_sha", lambda: "0123abc-dirty")
    provenance.check_publishable(ResultStore(tmp_path / "mine"))


def _records_of_two_sizes():
    small = make_record(0)
    large = make_record(0, config_hash="big", sizes={"n_train": 8000, "n_eval": 872},
                        spec={**small.spec, "defense_args": {"m": 16, "k": 4}})
    return [small, large]


def test_the_report_shows_sizes_where_cells_of_different_sizes_meet():
    text = report(aggregate(seed_frame(_records_of_two_sizes()), with_order=True), "here/")
    assert "| train / eval |" in text and "| 8000 / 872 |" in text and "| 10 / 5 |" in text
    same = report(aggregate(seed_frame([make_record(0), make_record(1)]), with_order=True), "here/")
    assert "train / eval" not in same


def test_the_summary_shows_sizes_where_cells_of_different_sizes_meet(tmp_path):
    store = ResultStore(tmp_path)
    for record in _records_of_two_sizes():
        store.append(record)
    result = runner.invoke(app, ["summarize", "--results-dir", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "train / eval" in result.output and "8000 / 872" in result.output and "10 / 5" in result.output


def test_list_names_the_encoders_and_every_tasks_parameters():
    result = runner.invoke(app, ["list"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    titles = {line.split()[0]: i for i, line in enumerate(result.output.splitlines()) if line[:1].isalpha()}
    lines = result.output.splitlines()
    tasks = "\n".join(lines[titles["tasks"]:titles["defenses"]])
    encoders = "\n".join(lines[titles["encoders"]:titles["tasks"]])
    assert "n_train=8000, n_eval=1000" in tasks  # a GLUE task's sizes
    assert "evaluate_on='original'" in tasks  # conll2003 evaluates on original text
    rows = [line for line in tasks.splitlines() if line.startswith("│ ") and line.split("│")[1].strip()]
    assert rows and not any(line.rstrip("│ ").endswith("│ -") for line in rows)
    for name in ("minilm", "bilstm", "mock-<d>", "minilm-mlm"):
        assert name in encoders, name
    assert "hub id" in encoders and "bert-base-uncased" in encoders


@pytest.mark.parametrize("command", [["run", "--help"], ["summarize", "--help"], ["report", "--help"],
                                     ["reproduce", "--help"], ["dashboard", "--help"]])
def test_every_command_states_the_same_default_folder(command):
    result = runner.invoke(app, command, env={"COLUMNS": "300"})
    assert result.exit_code == 0 and "./bench-results" in " ".join(result.output.split())
