"""Reliability tests: bad input, faults and hostile names end in one sentence and exit code 2, and no finished
result is lost. Shared helpers; the fixtures tiny_data and results come from tests/conftest.py."""

from __future__ import annotations

from typer.testing import CliRunner

from bench.cli.main import app

runner = CliRunner()
MOCK_CHECK = ["--encoder", "mock", "--check"]


def invoke(*args):
    """Run the CLI in-process; the result keeps stdout and stderr apart."""
    return runner.invoke(app, [str(a) for a in args])


def one_sentence(result, *fragments: str) -> str:
    """Assert exit code 2 with one line on stderr containing every fragment, and no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    text = result.stderr.strip()
    assert len(text.splitlines()) == 1, text
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    return text
