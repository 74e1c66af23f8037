"""``bench dashboard``: SIGTERM to the command stops the Streamlit server it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_stops_the_streamlit_child(tmp_path):
    port = _free_port()
    code = "import sys; from bench.cli.main import main; sys.argv = sys.argv[1:]; main()"
    parent = subprocess.Popen(
        [sys.executable, "-c", code, "bench", "dashboard", "--port", str(port), "--results-dir", str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (child and _listening(port)):
            child = child or next(iter(_children(parent.pid)), None)
            assert parent.poll() is None, "bench dashboard exited early"
            time.sleep(0.5)
        assert child is not None and _listening(port), "the Streamlit server did not start"
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=60)
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(child), "the Streamlit child still runs after SIGTERM to bench dashboard"
        assert not _listening(port)
    finally:
        for pid in (child, parent.pid):
            if pid and _alive(pid):
                os.kill(pid, signal.SIGKILL)
        parent.wait(timeout=10)
