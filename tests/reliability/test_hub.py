"""Without the Hugging Face hub and with its offline variables unset, a hub id or dataset that is not cached fails in
seconds with one sentence (``bench.core.hub``: one short probe, then offline mode), never after minutes of retries;
an id in the local cache still resolves."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import bench.core.hub as hub
from bench import BenchError

ROOT = Path(__file__).resolve().parents[2]
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the block ends: connections are refused


@pytest.fixture
def no_hub(monkeypatch):
    """Offline variables unset, the hub endpoint a closed local port, a fresh probe; all restored afterwards."""
    import huggingface_hub.constants as constants

    for name in OFFLINE_VARIABLES:
        monkeypatch.setenv(name, "")  # set (so monkeypatch restores it), but not true
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", constants.HF_HUB_OFFLINE)
    monkeypatch.setattr(hub, "_state", {})


def _clean_env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARIABLES}
    return {**env, "PYTHONPATH": str(ROOT), "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
            "HF_HOME": str(tmp_path / "hf-home"), "COLUMNS": "1000"}


def test_unreachable_hub_is_found_in_a_moment(no_hub):
    start = time.perf_counter()
    assert hub.offline_unless_reachable() is True
    assert time.perf_counter() - start < hub.PROBE_TIMEOUT_S + 1
    assert os.environ["HF_HUB_OFFLINE"] == "1" and hub.hub_unreachable()
    assert "could not be reached" in hub.unreachable_note()


def test_any_http_answer_means_reachable(monkeypatch):
    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 (the handler's required name)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert hub._probe(f"http://127.0.0.1:{server.server_address[1]}", 2.0) is True
    finally:
        server.shutdown()
        server.server_close()


def test_offline_variables_skip_the_probe(monkeypatch):
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setattr(hub, "_state", {})
    monkeypatch.setattr(hub, "_probe", lambda *a: pytest.fail("probed although offline mode was chosen"))
    assert hub.offline_unless_reachable() is True and not hub.hub_unreachable()


def test_missing_task_data_without_a_hub_fails_fast(no_hub, tmp_path, monkeypatch):
    from bench.core.registry import TASKS

    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "empty"))
    start = time.perf_counter()
    with pytest.raises(BenchError, match="sst2 data is missing.*could not be reached"):
        TASKS.get("sst2")().load(8, 4, 0)
    assert time.perf_counter() - start < 10


def test_hub_corpus_without_a_hub_fails_fast(no_hub):
    from bench.data.public_corpus import public_corpus

    start = time.perf_counter()
    with pytest.raises(BenchError, match="public corpus 'bookcorpus' is not an offline one.*could not be reached"):
        public_corpus("bookcorpus", n=5)
    assert time.perf_counter() - start < 10


def test_unknown_encoder_without_a_hub_is_one_fast_sentence(tiny_data, tmp_path):
    """The command as a user runs it, offline variables unset: before, 11 lines of retries and about 57 s."""
    code = "import sys; from bench.cli.main import main; sys.argv = sys.argv[1:]; main()"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, "bench", "run", "--encoder", "no-such-org/no-such-model",
                           "--check", "--results-dir", str(tmp_path / "results")],
                          capture_output=True, text=True, timeout=300, env=_clean_env(tmp_path))
    elapsed = time.perf_counter() - start
    assert done.returncode == 2, done.stderr
    text = done.stderr.strip()
    assert len(text.splitlines()) == 1 and "Retrying" not in text, text
    assert "encoder 'no-such-org/no-such-model' cannot be found" in text and "could not be reached" in text
    assert elapsed < 25, elapsed  # imports and the 3 s probe at most; the retries took about 57 s


def test_cached_id_still_resolves_without_a_hub(tmp_path):
    """An id in the local cache resolves from it; an id that is not cached names the probe; both at once."""
    snapshot = tmp_path / "hf-home" / "hub" / "models--tiny-org--tiny-bert" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({
        "model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 16, "vocab_size": 30}))
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    code = ("import json, time; from bench.models.loading import model_problem; t = time.perf_counter(); "
            "found = [model_problem('tiny-org/tiny-bert'), model_problem('tiny-org/absent')]; "
            "print(json.dumps([found, time.perf_counter() - t]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=_clean_env(tmp_path))
    assert done.returncode == 0, done.stderr
    (cached, absent), elapsed = json.loads(done.stdout.strip().splitlines()[-1])
    assert cached is None
    assert "could not be reached" in absent
    assert elapsed < 20 and "Retrying" not in done.stderr
