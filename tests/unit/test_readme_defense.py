"""The README's minimal defense module, dropped into defenses/, works with no other edit."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_tiny_glue

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "defenses" / "my_defense.py"


def readme_module() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- minimal-defense -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, "README must hold the minimal defense module after <!-- minimal-defense -->"
    return match.group(1)


def bench(*args, env):
    command = [sys.executable, "-c", "from bench.cli import main; main()", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


@pytest.mark.skipif(TARGET.exists(), reason="defenses/my_defense.py already exists")
def test_readme_module_is_listed_and_runs(tmp_path):
    env = dict(os.environ, BENCH_DATA_DIR=str(write_tiny_glue(tmp_path / "data")), COLUMNS="200")
    TARGET.write_text(readme_module(), encoding="utf-8")
    try:
        listed = bench("list", env=env)
        assert listed.returncode == 0, listed.stderr
        assert "my_defense" in listed.stdout and "sigma" in listed.stdout
        ran = bench(
            "run", "--defense", "my_defense", "--defense-args", "sigma=0.1", "--attack", "rss",
            "--encoder", "mock", "--attack-args", "sbert=mock", "--train-args", "epochs=2",
            "--results-dir", str(tmp_path / "results"), env=env,
        )
        assert ran.returncode == 0, ran.stderr
        assert (tmp_path / "results" / "records" / "my_defense.jsonl").is_file()
        bad = bench("run", "--defense", "my_defense", "--defense-args", "sigma=-1", "--encoder", "mock", env=env)
        assert bad.returncode == 2 and "sigma" in bad.stderr
    finally:
        TARGET.unlink(missing_ok=True)
