"""``bench dashboard``: the Streamlit leaderboard on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer

from bench.cli.common import ResultsOption, user_errors
from bench.core.errors import BenchError


@user_errors
def dashboard(
    port: int = typer.Option(8501, help="Port on 127.0.0.1 (1-65535)."),
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """Start the Streamlit leaderboard on 127.0.0.1: your runs (--results-dir, $BENCH_RESULTS_DIR or ./bench-results)
    and the published results/ of this checkout, switched in its sidebar or shown side by side."""
    if not 1 <= port <= 65535:
        raise BenchError(f"--port must be between 1 and 65535, got {port}.")
    app_path = Path(importlib.util.find_spec("bench.dashboard").origin).resolve().parent / "app.py"
    env = dict(os.environ)
    if results_dir is not None:
        from bench.results.store import ResultStore

        env["BENCH_RESULTS_DIR"] = str(ResultStore(results_dir).root.resolve())  # an empty --results-dir refused
    command = [sys.executable, "-m", "streamlit", "run", str(app_path), "--server.address", "127.0.0.1",
               "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
               "--client.toolbarMode", "viewer"]  # a local board: no "Deploy" button or developer menu
    raise typer.Exit(run_forwarding_signals(command, env))


def run_forwarding_signals(command: list[str], env: dict) -> int:
    """Run a child process and pass it this process's SIGTERM, SIGINT and SIGHUP.

    The child is then waited for, so stopping ``bench dashboard`` never leaves the server running.
    """
    child = subprocess.Popen(command, env=env)
    forwarded = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])

    def forward(signum, _frame):
        if child.poll() is None:
            child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in forwarded}
    try:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:  # only if SIGINT arrived before the handler was installed
                forward(signal.SIGINT, None)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child.poll() is None:
            child.kill()
            child.wait()

