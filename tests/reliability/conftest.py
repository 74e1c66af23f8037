"""Reliability tests: bad input, faults and hostile names end in one sentence and exit code 2, and no finished
result is lost. Shared helpers; the fixtures tiny_data and results come from tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

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


ROOT = Path(__file__).resolve().parents[2]
CLI = "import sys; from bench.cli.main import main; sys.argv = sys.argv[1:]; main()"
SLOW_PLUGIN = '''"""An identity defense that pauses in setup: reliability tests get cells to overlap or kill."""

import os
import time
from dataclasses import dataclass

from bench import RepresentationDefense, register_defense
from bench.privacy.public import IdentityRepresentation


@register_defense("slow-none")
@dataclass
class SlowNone(RepresentationDefense):
    """The identity on representations, after a pause."""

    seconds: float = 0.5  # pause at the start of each cell

    def representation_mechanism(self):
        """The identity."""
        return IdentityRepresentation()

    def setup(self, dim, generator):
        """Note the start (SLOW_NONE_MARKER), then pause."""
        marker = os.environ.get("SLOW_NONE_MARKER")
        if marker:
            with open(marker, "a") as handle:
                handle.write(f"{os.getpid()}\\n")
        time.sleep(self.seconds)
'''


def slow_grid(folder: Path, seconds: float, seeds: int) -> tuple[Path, Path]:
    """The slow plugin file and a grid of ``seeds`` cells of it (mock encoder, tiny sizes)."""
    plugin = folder / "slow_none.py"
    plugin.write_text(SLOW_PLUGIN)
    grid = folder / "slow.yaml"
    grid.write_text(f"tasks: [sst2]\nencoders: [mock]\ndefenses: [{{name: slow-none, args: {{seconds: {seconds}}}}}]\n"
                    f"seeds: {list(range(seeds))}\n"
                    "settings: {training_args: {epochs: 1}, n_train: 40, n_eval: 20}\n")
    return plugin, grid


def cli_process(args, env_extra: dict | None = None, **popen):
    """``bench <args>`` in a fresh process (stdout and stderr piped, text)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "1000", **(env_extra or {})}
    return subprocess.Popen([sys.executable, "-c", CLI, "bench", *[str(a) for a in args]], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def stored_seeds(results: Path, defense: str) -> list[int]:
    """The seed of every valid record of ``defense``, sorted, and no corrupt line anywhere."""
    from bench.results.store import ResultStore

    records, problems = ResultStore(results).read()
    assert problems == [], problems
    return sorted(r.seed for r in records if r.defense == defense)


def grid_error(result, *fragments: str) -> str:
    """Like ``one_sentence`` for ``bench run --grid``, whose progress lines come first: exit code 2, one error line,
    the last on stderr, containing every fragment."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    return errors[0]
