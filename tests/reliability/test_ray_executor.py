"""The Ray executor on a real local cluster: a Ray head on 127.0.0.1 with two worker slots (2 CPUs), started once for
the module with its own temporary folder and authentication token, and stopped (its whole process group) at the end.

Cells use the mock encoder and --check sizes (40 training, 20 evaluation examples, one epoch), so the module runs in
about 90 s on the 2 shared cores at a load average near 10. Every wait is bounded; the bounds (WAIT_S) are far above
the typical times, so that a machine loaded far beyond its cores slows the module down instead of failing it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from bench.results.store import ResultStore
from tests.reliability.conftest import cli_process, grid_error, invoke, stored_seeds

pytest.importorskip("ray")

PLUGIN = '''"""Identity defenses for the Ray tests: one pauses the first time it runs (the test kills its worker), one
kills its own worker every time."""

import os
import signal
import time
from dataclasses import dataclass

from bench import RepresentationDefense, register_defense
from bench.privacy.public import IdentityRepresentation


@register_defense("pause-once")
@dataclass
class PauseOnce(RepresentationDefense):
    """The identity; the first cell to start (anywhere) writes its process id to BENCH_TEST_MARKER and pauses."""

    seconds: float = 60.0  # pause of the first cell

    def representation_mechanism(self):
        """The identity."""
        return IdentityRepresentation()

    def setup(self, dim, generator):
        """Pause in the first cell only (the marker file is created exclusively)."""
        marker = os.environ.get("BENCH_TEST_MARKER")
        if not marker:
            return
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return
        os.write(fd, f"{os.getpid()}\\n".encode())
        os.close(fd)
        time.sleep(self.seconds)


@register_defense("die")
@dataclass
class Die(RepresentationDefense):
    """Kills the process that runs it, every time."""

    seconds: float = 0.0  # unused

    def representation_mechanism(self):
        """The identity."""
        return IdentityRepresentation()

    def setup(self, dim, generator):
        """Die."""
        os.kill(os.getpid(), signal.SIGKILL)
'''
WAIT_S = 240  # the longest any single wait may take (a driver, the head starting, the first cell starting)
SETTINGS = "settings: {training_args: {epochs: 1}, n_train: 40, n_eval: 20}\n"  # --check sized


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        time.sleep(0.2)


def stop(head: subprocess.Popen) -> None:
    """Stop a ``ray start --block`` and every process of its group (the GCS, the raylet, the workers)."""
    for sig, grace in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            break
        try:
            head.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    head.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster():
    """A Ray head on 127.0.0.1 (2 CPUs: two workers at once, no GPU); yields (address, environment for drivers).

    Ray gives its raylet a fixed 30 s to register; on a machine loaded far beyond its cores that can run out, so the
    head is started up to three times before the module fails."""
    from ray._private.authentication.authentication_token_generator import generate_new_authentication_token

    folder = Path(tempfile.mkdtemp(prefix="rayt", dir="/tmp"))  # short: Ray's socket paths have a length limit
    token = folder / "token"
    token.write_text(generate_new_authentication_token())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN_PATH": str(token), "RAY_USAGE_STATS_ENABLED": "0", "BENCH_QUIET": "1"}
    head, logs = None, []
    try:
        for attempt in range(3):
            port, log = free_port(), folder / f"head-{attempt}.log"
            with open(log, "w") as handle:
                head = subprocess.Popen(
                    [str(Path(sys.executable).parent / "ray"), "start", "--head", "--node-ip-address=127.0.0.1",
                     f"--port={port}", "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
                     "--disable-usage-stats", f"--temp-dir={folder / 'ray'}", "--object-store-memory=100000000",
                     "--block"],
                    env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
                )
            wait_for(lambda: "Ray runtime started" in log.read_text() or head.poll() is not None, WAIT_S,
                     "the Ray head starting")
            if head.poll() is None:
                break
            logs.append(log.read_text()[-600:])
            stop(head)
        assert head.poll() is None, "the Ray head did not start in 3 tries:\n" + "\n".join(logs)
        yield f"127.0.0.1:{port}", env
    finally:
        if head is not None:
            stop(head)
        shutil.rmtree(folder, ignore_errors=True)


def driver(args, env, extra=None):
    """``bench run --executor ray ...`` in its own process, with the cluster's token."""
    keep = {k: env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_USAGE_STATS_ENABLED")}
    return cli_process(["run", "--executor", "ray", *args], {**keep, **(extra or {})})


def plugin_and_grid(folder, defenses: str, seeds: str):
    """The test plugin's file and a mock-encoder sst2 grid of ``defenses`` x ``seeds`` (YAML lists) in ``folder``."""
    plugin = folder / "ray_plugins.py"
    plugin.write_text(PLUGIN)
    grid = folder / "grid.yaml"
    grid.write_text(f"tasks: [sst2]\nencoders: [mock]\ndefenses: {defenses}\nseeds: {seeds}\n" + SETTINGS)
    return plugin, grid


def finished(process):
    """The stdout and stderr of a driver process, waited for at most WAIT_S (it is killed either way)."""
    try:
        return process.communicate(timeout=WAIT_S)
    finally:
        process.kill()


def test_a_worker_killed_mid_grid_and_every_cell_recorded_once_like_the_local_executor(tiny_data, tmp_path, cluster):
    address, env = cluster
    plugin, grid = plugin_and_grid(tmp_path, "[pause-once, none]", "[0, 1, 2]")
    marker = tmp_path / "marker"
    results = tmp_path / "ray-results"
    process = driver(["--grid", grid, "--plugin", plugin, "--address", address, "--results-dir", results], env,
                     {"BENCH_TEST_MARKER": str(marker)})
    try:
        wait_for(lambda: marker.exists() and marker.read_text().strip(), WAIT_S, "the first cell starting")
        os.kill(int(marker.read_text()), signal.SIGKILL)  # the Ray worker process running that cell
        stdout, stderr = process.communicate(timeout=WAIT_S)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    assert re.search(r"retrying +sst2 / pause-once\(seconds=60.0\) / - / seed \d.*worker died", stderr), stderr
    assert re.search(r"done +sst2 / pause-once\(seconds=60.0\) / - / seed \d on .* \(try 2\)", stderr), stderr
    assert re.search(r"node .*: 6 cells", stderr), stderr
    assert "ran 6 cells on the Ray cluster at" in stdout
    assert stored_seeds(results, "pause-once") == [0, 1, 2]  # exactly once each, no corrupt line
    assert stored_seeds(results, "none") == [0, 1, 2]
    assert list((results / "claims").glob("*.lock")) == []
    for path in (results / "records").glob("*.jsonl"):
        assert path.read_bytes().endswith(b"\n")

    # the local executor gives the same records, apart from run id, time, runtime and hardware
    local = tmp_path / "local-results"
    assert invoke("run", "--grid", grid, "--plugin", plugin, "--results-dir", local).exit_code == 0

    def comparable(folder):
        records, problems = ResultStore(folder).read()
        assert problems == []
        drop = {"run_id", "created_at", "runtime_s", "hardware"}
        return sorted((r.model_dump(exclude=drop) for r in records), key=lambda d: (d["config_hash"], d["seed"]))

    assert comparable(results) == comparable(local)

    # a second run finds every cell recorded and starts nothing
    again = driver(["--grid", grid, "--plugin", plugin, "--address", address, "--results-dir", results], env)
    stdout, stderr = again.communicate(timeout=WAIT_S)
    assert again.returncode == 0 and "ran 0 cells, skipped 6" in stdout, (stdout, stderr)


def test_a_cell_whose_worker_dies_every_time_is_reported_and_not_recorded(tiny_data, tmp_path, cluster):
    address, env = cluster
    plugin, grid = plugin_and_grid(tmp_path, "[none, die]", "[0]")
    results = tmp_path / "results"
    process = driver(["--grid", grid, "--plugin", plugin, "--address", address, "--retries", "1", "--results-dir",
                      results], env)
    stdout, stderr = finished(process)
    assert process.returncode == 2, (stdout, stderr)
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and stderr.strip().splitlines()[-1] == errors[0], stderr
    assert "1 of 2 cells" in errors[0] and "die" in errors[0] and "after 2 tries" in errors[0], errors
    assert "worker died" in errors[0] and "Traceback" not in stderr
    assert stored_seeds(results, "none") == [0]
    assert stored_seeds(results, "die") == []


def test_a_grid_asking_for_gpus_the_cluster_lacks_runs_nothing(tiny_data, tmp_path, cluster):
    address, env = cluster
    grid = tmp_path / "grid.yaml"
    grid.write_text("tasks: [sst2]\nencoders: [mock]\ndefenses: [none]\nseeds: [0, 1]\nresources: {num_gpus: 1}\n"
                    + SETTINGS)
    results = tmp_path / "results"
    process = driver(["--grid", grid, "--address", address, "--results-dir", results], env)
    stdout, stderr = finished(process)
    assert process.returncode == 2, (stdout, stderr)
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "asks for 1 GPU(s) per cell" in errors[0] and "has no GPU" in errors[0], stderr
    assert ResultStore(results).read() == ([], [])


def test_no_cluster_at_the_address_is_one_sentence(tiny_data, results, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("tasks: [sst2]\nencoders: [mock]\ndefenses: [none]\n" + SETTINGS)
    port = free_port()  # nothing listens there
    started = time.monotonic()
    result = invoke("run", "--grid", grid, "--executor", "ray", "--address", f"127.0.0.1:{port}")
    grid_error(result, f"no Ray cluster answers at 127.0.0.1:{port}")
    assert time.monotonic() - started < 30
    assert ResultStore(results).read() == ([], [])


def test_a_local_grid_asking_for_gpus_where_none_exist(tiny_data, results, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("tasks: [sst2]\nencoders: [mock]\ndefenses: [none]\nresources: {num_gpus: 1}\n" + SETTINGS)
    grid_error(invoke("run", "--grid", grid), "no CUDA GPU is available", "num_gpus")
    grid.write_text("tasks: [sst2]\nencoders: [mock]\ndefenses: [none]\n" + SETTINGS)
    grid_error(invoke("run", "--grid", grid, "--device", "cuda"), "no CUDA GPU is available")
    assert ResultStore(results).read() == ([], [])
