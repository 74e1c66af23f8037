"""Work is never lost after it is done: every command checks where it will write before it works, nothing printed
after a save can fail the command, and no report is written outside its folder."""

from __future__ import annotations

import os

import pytest

from tests.conftest import files_under
from tests.reliability.conftest import MOCK_CHECK, invoke, one_sentence

RUN = ["run", "--defense", "none", "--encoder", "mock", "--n-train", "40", "--n-eval", "20", "--train-args",
       "epochs=1"]


@pytest.mark.parametrize("make, phrase", [
    (lambda records: (records / "none.jsonl").mkdir(), "none.jsonl is not a file"),
    (lambda records: os.symlink(records / "gone.jsonl", records / "none.jsonl"), "is a symbolic link to nothing"),
    (lambda records: (records / "none.jsonl.lock").mkdir(), "none.jsonl.lock is not a file"),
], ids=["records file a folder", "records file a dangling link", "lock file a folder"])
def test_a_records_file_that_cannot_take_the_record_is_refused_before_the_cell(tiny_data, tmp_path, make, phrase):
    records = tmp_path / "r" / "records"
    records.mkdir(parents=True)
    make(records)
    result = invoke(*RUN, "--results-dir", tmp_path / "r")
    one_sentence(result, phrase)
    assert "utility/accuracy" not in result.stdout  # refused before the cell ran


def test_a_grid_checks_every_records_file_before_its_first_cell(tiny_data, tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("tasks: [sst2]\nencoders: [mock]\ndefenses: [none]\nseeds: [0, 1]\n"
                    "settings: {training_args: {epochs: 1}, n_train: 40, n_eval: 20}\n")
    (tmp_path / "r" / "records" / "none.jsonl").mkdir(parents=True)
    result = invoke("run", "--grid", grid, "--results-dir", tmp_path / "r")
    assert result.exit_code == 2 and "none.jsonl is not a file" in result.stderr
    assert "done" not in result.stderr


MARKUP_PLUGIN = '''from dataclasses import dataclass

from bench import RepresentationDefense, register_defense


@register_defense("tagged-none")
@dataclass
class TaggedNone(RepresentationDefense):
    """The identity, with a free-text tag."""

    tag: str = "x"  # any text, kept in the record
'''


def test_markup_in_a_saved_record_prints_literally(tiny_data, tmp_path):
    plugin = tmp_path / "tagged.py"
    plugin.write_text(MARKUP_PLUGIN)
    result = invoke("run", "--plugin", plugin, "--defense", "tagged-none", "--defense-args", "tag=[/x][bold]y",
                    *RUN[3:], "--results-dir", tmp_path / "r")
    assert result.exit_code == 0, (result.output, result.exception)
    assert "tag=[/x][bold]y" in result.stdout and "record appended" in result.stdout
    assert len((tmp_path / "r" / "records" / "tagged-none.jsonl").read_text().splitlines()) == 1


def test_reproduce_never_writes_outside_reproduction(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for table in ("../../../../tmp/x", "../x", ".hidden", "a/b"):
        one_sentence(invoke("reproduce", table), "is not a reference table name")
    assert files_under(tmp_path) == []


def test_deniability_checks_its_report_path_before_the_work(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "analysis").write_text("a file where the folder goes")
    one_sentence(invoke("analyze", "deniability", "--encoder", "mock", "--tokens", "4", "--trials", "2",
                        "--results-dir", tmp_path / "r"), "deniability report")


def test_a_check_run_is_not_refused_for_a_records_file(tiny_data, tmp_path):
    """--check saves nothing, so a records folder in the way does not stop it."""
    (tmp_path / "r" / "records" / "none.jsonl").mkdir(parents=True)
    assert invoke("run", "--defense", "none", *MOCK_CHECK, "--results-dir", tmp_path / "r").exit_code == 0


@pytest.mark.parametrize("text, key, line", [
    ("tasks: [sst2]\nencoders: [mock]\ndefenses: [none]\ndefenses: [texthide]\n", "defenses", 4),
    ("tasks: [sst2]\ndefenses: [{name: texthide, args: {m: 4, m: 16}}]\n", "m", 2),
], ids=["top-level key", "nested argument"])
def test_a_grid_with_a_duplicate_key_is_refused(tmp_path, text, key, line):
    grid = tmp_path / "dup.yaml"
    grid.write_text(text)
    one_sentence(invoke("run", "--grid", grid, "--dry-run"), f"dup.yaml:{line} gives key '{key}' twice")
