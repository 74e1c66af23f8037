"""Refresh the README's picture of the board, docs/img/board.png, from the committed results.

Usage (needs the test extra and Debian's chromium, as tests/browser does):

    python scripts/board_screenshot.py                 # writes docs/img/board.png
    python scripts/board_screenshot.py /tmp/board.png  # or another path

It runs tests/browser with ``BENCH_SCREENSHOT`` set: the test starts ``bench dashboard`` on ``results/``, checks the
board as a reader uses it and saves its first view (1400 x 1000 pixels) there. The exit code is the test's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "img" / "board.png").resolve()
    env = {**os.environ, "BENCH_SCREENSHOT": str(target), "BENCH_BROWSER_TEST": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/browser"],
                          cwd=ROOT, env=env)
    if done.returncode == 0:
        print(f"wrote {target} ({target.stat().st_size // 1024} KB)")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
