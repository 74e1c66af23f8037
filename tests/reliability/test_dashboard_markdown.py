"""Markdown in names and arguments from result files renders literally in the dashboard's headings, captions, labels
and notes: the app is driven headless (Streamlit's AppTest, as tests/unit/test_dashboard.py) and each string it hands
to Markdown is rendered with a CommonMark renderer, which must give back exactly the text, with no link, image,
heading or emphasis."""

from __future__ import annotations

import html
import json
import re
import shutil

import pandas as pd
import pytest
from markdown_it import MarkdownIt

from bench.dashboard.markdown import code, literal
from tests.unit.test_dashboard import (
    APP,
    board_with_a_sweep,
    board_with_two_defenses,
    write_deniability_report,
)

TASK = "# h **x**"
ATTACK = "[a](javascript:alert(1))"
SWEPT = "![i](http://e.example/x.png)"
HOSTILE = ["**x**", "# h", "[a](javascript:alert(1))", "![img](x.png)", "<b>bold</b>", "`tick` ``two``",
           "a\nb", "*em* _em_ ~~s~~", ":red[red] $x^2$", "&lt;tag&gt; \\*", "| a | b |", "1. item", "- item",
           "> quote", "www.example.com https://example.com", "<https://example.com>", "x = 1 \\"]


def rendered(source: str, allow: tuple[str, ...] = ()) -> str:
    """The text CommonMark renders ``source`` to, asserting it is one paragraph with no other tag but ``allow``."""
    output = MarkdownIt("commonmark", {"html": True}).render(source).strip()
    assert output.startswith("<p>") and output.endswith("</p>"), output
    inner = output[3:-4]
    tags = set(re.findall(r"</?([a-zA-Z0-9]+)", inner))
    assert tags <= set(allow), (source, output)
    return html.unescape(re.sub(r"</?(?:%s)>" % "|".join(allow or ("p",)), "", inner))


@pytest.mark.parametrize("text", HOSTILE)
def test_literal_renders_as_its_text(text):
    assert rendered(literal(text)) == " ".join(text.split())


@pytest.mark.parametrize("text", HOSTILE)
def test_code_span_holds_any_text(text):
    assert rendered(code(text), ("code",)) == " ".join(text.split())


def _hostile_board(root):
    board_with_two_defenses(root)
    board_with_a_sweep(root)
    path = root / "leaderboard.csv"
    board = pd.read_csv(path, keep_default_na=False)
    board["task"] = TASK
    board["attack"] = board["attack"].replace({"rss": ATTACK, "inversion": ATTACK})
    board["metric"] = board["metric"].str.replace(r"^(privacy|random)/(rss|inversion)/", rf"\1/{ATTACK}/", regex=True)
    board["defense"] = board["defense"].replace({"dchi-text": SWEPT})
    shutil.rmtree(root / "records")  # the dashboard reads the records when there are any; here only the CSV
    board.to_csv(path, index=False)


@pytest.fixture
def app(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    _hostile_board(tmp_path)
    write_deniability_report(tmp_path)
    report_path = tmp_path / "analysis" / "deniability-minilm.json"
    report = json.loads(report_path.read_text())
    report.update(mechanism="**m**", encoder="[e](javascript:x)", command="bench `x` ``y`` <b>z</b>")
    report_path.write_text(json.dumps(report))
    (tmp_path / "analysis" / "deniability-[x](javascript:y).json").write_text("{not json")
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path))
    running = AppTest.from_file(APP, default_timeout=60).run()
    assert not running.exception
    return running


def test_headings_render_names_literally(app):
    headings = [rendered(header.value) for header in app.subheader]
    assert f"Worst case: privacy against utility on {TASK}" in headings  # the default view
    next(box for box in app.sidebar.selectbox if box.label == "attack").set_value(ATTACK).run()
    assert not app.exception
    assert f"{ATTACK}: privacy against utility on {TASK}" in [rendered(header.value) for header in app.subheader]
    app.radio(key="view").set_value("Sweeps").run()
    assert not app.exception
    assert f"Privacy parameter sweeps on {TASK}" in [rendered(header.value) for header in app.subheader]


def test_widget_labels_render_names_literally(app):
    """Widget labels are Markdown; options are plain text, so names stay as they are there."""
    app.radio(key="view").set_value("Sweeps").run()
    labels = [rendered(widget.label) for widget in [*app.selectbox, *app.multiselect]]
    assert "sweep" in labels and "metrics" in labels
    sweep = next(widget for widget in app.selectbox if widget.label == "sweep")
    assert sweep.options and all(option.startswith(f"{SWEPT} (") for option in sweep.options), sweep.options
    assert any(f"{ATTACK}" in option and option.endswith(": eta") for option in sweep.options)


def test_captions_and_notes_render_file_contents_literally(app):
    app.query_params["tab"] = "Plausible deniability"  # only the open tab renders
    app.run()
    assert not app.exception
    captions = [rendered(caption.value, ("code",)) for caption in app.caption]
    assert any(c.startswith("**m** · [e](javascript:x) · 4 tokens × T=1000") for c in captions), captions
    assert any("bench `x` ``y`` <b>z</b>" in c for c in captions), captions
    warnings = [rendered(warning.value) for warning in app.warning]
    assert any("deniability-[x](javascript:y).json" in w for w in warnings), warnings
