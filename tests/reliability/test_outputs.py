"""Classes 4 and 5 of issue 60, the rest: where summarize writes (a folder where leaderboard.csv goes, a full or
read-only disk, an empty --results-dir), and what is shown literally (Rich markup in summarize, bench list and a dry
run; HTML in bench report's Markdown; NaN as null under --json; the Paper-vs-ours tab's warnings)."""

from __future__ import annotations

import errno
import json
import os

import pytest

from bench.results.store import ResultStore
from tests.reliability.conftest import invoke, one_sentence
from tests.unit.test_store import make_record

HOSTILE = "[/x][bold]b[/bold]<script>alert(1)</script>"


def _store(root, value=HOSTILE):
    store = ResultStore(root)
    for seed in (0, 1):
        record = make_record(seed)
        record.spec["defense_args"] = {"m": value, "k": 4}
        store.append(record)
    return store


def test_a_folder_where_the_leaderboard_goes_is_one_sentence(tmp_path):
    _store(tmp_path)
    (tmp_path / "leaderboard.csv").mkdir()
    one_sentence(invoke("summarize", "--results-dir", tmp_path), "leaderboard.csv is a folder")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_summarize_on_a_full_or_read_only_disk_keeps_the_old_leaderboard(tmp_path, monkeypatch, code):
    _store(tmp_path)
    assert invoke("summarize", "--results-dir", tmp_path).exit_code == 0
    before = (tmp_path / "leaderboard.csv").read_bytes()
    import bench.core.files as files

    def full(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(files.os, "fsync", full)  # the write fails where a full disk fails it
    one_sentence(invoke("summarize", "--results-dir", tmp_path), "cannot write the leaderboard",
                 os.strerror(code), "previous leaderboard is kept")
    assert (tmp_path / "leaderboard.csv").read_bytes() == before


@pytest.mark.parametrize("command", [["summarize"], ["report"], ["run", "--encoder", "mock", "--check"]])
def test_an_empty_results_dir_is_refused_not_the_working_folder(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    _store(tmp_path)  # a store in the working folder, which "" used to mean
    one_sentence(invoke(*command, "--results-dir", ""), "--results-dir is empty")
    assert not (tmp_path / "leaderboard.csv").exists()


def test_summarize_prints_markup_in_a_record_literally(tmp_path):
    _store(tmp_path)
    result = invoke("summarize", "--results-dir", tmp_path)
    assert result.exit_code == 0, (result.output, result.exception)
    assert "[/x][bold]b[/bold]" in "".join(result.stdout.split())


def test_report_writes_html_in_a_record_as_text(tmp_path):
    _store(tmp_path)
    out = tmp_path / "report.md"
    assert invoke("report", "--results-dir", tmp_path, "--out", out).exit_code == 0
    text = out.read_text(encoding="utf-8")
    assert "<script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_json_writes_nan_as_null(tiny_data, results, monkeypatch):
    """A record whose notes hold a NaN (a reference figure of no cell) prints as strict JSON."""
    import bench.engine.runner as runner

    real = runner.run_cell

    def with_nan(spec, *args, **kwargs):
        record = real(spec, *args, **kwargs)
        record.notes["majority_utility"] = {"accuracy": float("nan")}
        return record

    monkeypatch.setattr(runner, "run_cell", with_nan)
    result = invoke("run", "--defense", "none", "--encoder", "mock", "--check", "--json")
    assert result.exit_code == 0, result.output
    parsed = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"bare {name} in --json"))
    assert parsed["notes"]["majority_utility"]["accuracy"] is None


MARKUP_PLUGIN = '''"""A defense whose metadata holds Rich markup [/x] [bold]b[/bold].

Paper: [/y] none.
Threat model: none.
"""

from dataclasses import dataclass

from bench import RepresentationDefense, register_defense
from bench.privacy.public import IdentityRepresentation


@register_defense("markup")
@dataclass
class Markup(RepresentationDefense):
    """The identity [/z] [red]red[/red]."""

    note: str = "[/w]"  # any text [/v]

    def representation_mechanism(self):
        """The identity."""
        return IdentityRepresentation()
'''


def test_list_and_dry_run_print_plugin_markup_literally(tmp_path):
    plugin = tmp_path / "markup.py"
    plugin.write_text(MARKUP_PLUGIN)
    listed = invoke("list", "--plugin", plugin)
    assert listed.exit_code == 0, (listed.output, listed.exception)
    shown = "".join(listed.stdout.replace("│", "").split())  # the table may wrap the cell: its pieces, literally
    assert "note='[/w]'" in shown and "[/v]" in shown
    grid = tmp_path / "g.yaml"
    grid.write_text("tasks: [sst2]\nencoders: [mock]\ndefenses: [{name: markup, args: {note: '[/u][bold]b'}}]\n")
    planned = invoke("run", "--grid", grid, "--plugin", plugin, "--dry-run", "--results-dir", tmp_path / "out")
    assert planned.exit_code == 0, (planned.output, planned.exception)
    assert "[/u][bold]b" in "".join(planned.stdout.split())


def test_paper_vs_ours_warnings_render_as_text(tmp_path, monkeypatch):
    """A reproduction file named like a Markdown link and image is warned about as text, never a live link or a
    fetched image."""
    from streamlit.testing.v1 import AppTest

    from tests.reliability.test_dashboard_markdown import rendered
    from tests.unit.test_dashboard import APP, board_with_two_defenses

    board_with_two_defenses(tmp_path)
    folder = tmp_path / "reproduction"
    folder.mkdir()
    name = "[a](javascript:x)![i](http:e.example)"
    (folder / f"{name}.json").write_text("{not json")
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path))
    app = AppTest.from_file(APP, default_timeout=60)
    app.query_params["tab"] = "Paper vs ours"
    app.run()
    assert not app.exception
    warnings = [rendered(warning.value) for warning in app.warning]
    assert any(name in w for w in warnings), warnings
