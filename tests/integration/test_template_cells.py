"""Each family's `bench new` template runs one `--check` cell as a plugin, on the real offline encoder (token
releases need its WordPieces): the cheapest pair of each family, the generated components run together."""

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core.examples import data_dir
from bench.core.registry import ATTACKS, DEFENSES, TASKS

runner = CliRunner()
MADE = (("defense", "--family", "token"), ("defense", "--family", "span"), ("defense", "--family", "output"),
        ("attack", "--release", "text"), ("attack", "--release", "token_embeddings"),
        ("attack", "--release", "rewritten_text"), ("attack", "--release", "predictions"),
        ("task", "--family", "classification"), ("task", "--family", "tagging"))


@pytest.fixture
def plugins(tmp_path):
    """Every template above written as gen-<family> into one folder; the registries forget them afterwards."""
    saved = {r: dict(r._items) for r in (DEFENSES, ATTACKS, TASKS) if r.names() is not None}  # discovered first
    arguments = []
    for kind, flag, choice in MADE:
        result = runner.invoke(app, ["new", kind, f"gen-{choice}", flag, choice, "--dir", str(tmp_path)])
        assert result.exit_code == 0, result.output
        arguments += ["--plugin", str(tmp_path / f"gen_{choice}.py")]
    yield arguments
    for registry, items in saved.items():
        registry._items.clear()
        registry._items.update(items)


@pytest.mark.parametrize("task, defense, attack, metric", [
    ("gen-classification", "gen-token", "gen-text", "token_accuracy"),
    ("gen-classification", "dchi-token", "gen-token_embeddings", "token_accuracy"),
    ("gen-tagging", "gen-span", "gen-rewritten_text", "span_accuracy"),
    ("trustpilot", "gen-output", "gen-predictions", "attribute_accuracy"),
], ids=["token", "token-vectors", "span", "output"])
def test_a_family_template_runs_a_check_cell(task, defense, attack, metric, plugins, tmp_path):
    if task == "trustpilot" and not (data_dir() / "aia" / "trustpilot").is_dir():
        pytest.skip("BENCH_DATA_DIR has no aia/trustpilot")
    result = runner.invoke(app, ["run", "--task", task, "--defense", defense, "--attack", attack, "--check",
                                 "--results-dir", str(tmp_path / "results"), *plugins])
    assert result.exit_code == 0, result.output
    assert f"privacy/{attack}/{metric}" in result.output
