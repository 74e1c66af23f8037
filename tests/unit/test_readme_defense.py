"""The contributor guide's minimal defense module (docs/contributing.md), dropped into defenses/, works with no other
edit.

The check runs on a copy of the packages in a temporary folder, so the repository is never touched.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import write_tiny_glue

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bench", "defenses", "attacks", "tasks")


def readme_module() -> str:
    text = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- minimal-defense -->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, "docs/contributing.md must hold the minimal defense module after <!-- minimal-defense -->"
    return match.group(1)


def test_readme_module_is_listed_and_runs(tmp_path):
    copy = tmp_path / "checkout"
    for package in PACKAGES:
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "defenses" / "my_defense.py").write_text(readme_module(), encoding="utf-8")
    env = dict(os.environ, BENCH_DATA_DIR=str(write_tiny_glue(tmp_path / "data")), COLUMNS="200",
               PYTHONPATH=str(copy))

    def bench(*args):
        command = [sys.executable, "-c", "from bench.cli.main import main; main()", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, cwd=copy, timeout=300)

    imported = bench("list")
    assert imported.returncode == 0, imported.stderr
    assert "my_defense" in imported.stdout and "sigma" in imported.stdout
    ran = bench("run", "--defense", "my_defense", "--defense-args", "sigma=0.1", "--attack", "rss",
                "--encoder", "mock", "--attack-args", "sbert=mock", "--train-args", "epochs=2",
                "--results-dir", str(tmp_path / "results"))
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "results" / "records" / "my_defense.jsonl").is_file()
    bad = bench("run", "--defense", "my_defense", "--defense-args", "sigma=-1", "--encoder", "mock")
    assert bad.returncode == 2 and "sigma" in bad.stderr
    assert not (ROOT / "defenses" / "my_defense.py").exists()
