"""Files and folders: NaN metrics summarise as NaN, non-UTF-8 data is named with its line, an unwritable results
folder is refused before the cell runs, a broken feature cache never aborts a run."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from bench.results.store import ResultStore
from tests.conftest import files_under
from tests.reliability.conftest import MOCK_CHECK, invoke, one_sentence
from tests.unit.test_store import make_record


def _store_with_nan(root):
    store = ResultStore(root)
    broken = make_record(0)
    broken.metrics["utility/accuracy"] = float("nan")
    store.append(broken)
    store.append(make_record(1))
    return store


def test_summarize_keeps_nan_as_nan_every_time(tmp_path):
    store = _store_with_nan(tmp_path)
    for _ in range(2):  # a second run reads the leaderboard it wrote the first time
        result = invoke("summarize", "--results-dir", tmp_path)
        assert result.exit_code == 0, result.output
        assert "nan±nan" in result.stdout
    with open(store.leaderboard_path, newline="") as handle:
        rows = {row["metric"]: row for row in csv.DictReader(handle)}
    assert rows["utility/accuracy"]["n"] == "2"
    assert math.isnan(float(rows["utility/accuracy"]["mean"] or "nan"))
    assert float(rows["privacy/rss/identity"]["mean"]) == 0.0


def test_leaderboard_frame_never_averages_a_nan_away(tmp_path):
    from bench.results.leaderboard import leaderboard_frame

    records, _ = _store_with_nan(tmp_path).read()
    table = leaderboard_frame(records).set_index("metric")
    assert math.isnan(table.at["utility/accuracy", "mean"]) and math.isnan(table.at["utility/accuracy", "std"])


def test_non_utf8_data_line_is_named(tiny_data, results):
    train = tiny_data / "glue" / "SST-2" / "train.tsv"
    lines = train.read_bytes().split(b"\n")
    lines[7] = b"1\tcaf\xe9 au lait is great"
    train.write_bytes(b"\n".join(lines))
    one_sentence(invoke("run", "--defense", "none", *MOCK_CHECK), f"{train}:8 is not UTF-8")
    assert files_under(results) == []


def test_results_folder_that_is_a_file_is_refused_before_the_cell(tiny_data, tmp_path, monkeypatch):
    import bench.engine.runner as runner

    target = tmp_path / "results"
    target.write_text("not a folder")
    monkeypatch.setattr(runner, "run_cell", lambda spec: pytest.fail("the cell ran"))
    one_sentence(invoke("run", "--defense", "none", "--encoder", "mock", "--results-dir", target), "is a file")


def test_unwritable_results_folder_is_refused_before_the_cell(tiny_data, tmp_path, monkeypatch):
    import os

    import bench.engine.runner as runner

    target = tmp_path / "locked"
    target.mkdir()
    real_access = os.access

    def access(path, mode):  # as for a user without write permission (the tests run as root)
        return real_access(path, mode) and not (str(path) == str(target) and mode & os.W_OK)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(runner, "run_cell", lambda spec: pytest.fail("the cell ran"))
    one_sentence(invoke("run", "--defense", "none", "--encoder", "mock", "--results-dir", target),
                 "cannot be written")


def test_summarize_of_a_mistyped_folder_creates_nothing(tmp_path):
    typo = tmp_path / "resluts"
    one_sentence(invoke("summarize", "--results-dir", typo), "does not exist")
    assert not typo.exists()


def test_unwritable_cache_warns_once_and_runs(tmp_path, monkeypatch, capsys):
    import bench.core.cache as cache

    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("")
    monkeypatch.setenv("BENCH_CACHE_DIR", str(blocker))
    monkeypatch.setattr(cache, "_warned", False)
    store = cache.FeatureCache()
    store.put("enc", "a", np.ones(3, dtype=np.float32))
    store.put("enc", "b", np.ones(3, dtype=np.float32))
    assert store.get("enc", "a") is None
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "running without it" in warnings[0]


@pytest.mark.parametrize("content", [b"", b"\x93NUMPY garbage", b"not numpy at all"])
def test_corrupt_cached_feature_is_a_miss(tmp_path, content):
    from bench.core.cache import FeatureCache

    store = FeatureCache(tmp_path)
    store.put("enc", "k", np.arange(4, dtype=np.float32))
    path = next(tmp_path.rglob("k.npy"))
    path.write_bytes(content)
    assert store.get("enc", "k") is None
    store.put("enc", "k", np.arange(4, dtype=np.float32))
    assert store.get("enc", "k").tolist() == [0, 1, 2, 3]


def test_zero_byte_cached_features_are_recomputed_end_to_end(tiny_data, results, tmp_path, monkeypatch):
    """With the real offline encoder: every cached feature file truncated to zero bytes, the run still works and
    rewrites them."""
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    args = ["run", "--defense", "none", "--encoder", "minilm", "--check", "--n-train", "16", "--n-eval", "8",
            "--json"]
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    cached = sorted((tmp_path / "cache").rglob("*.npy"))
    assert cached
    for path in cached:
        path.write_bytes(b"")
    from bench.models.loading import _shared_encoder

    _shared_encoder.cache_clear()
    second = invoke(*args)
    assert second.exit_code == 0, second.output
    assert all(path.stat().st_size > 0 for path in cached)


def test_unwritable_cache_gives_adaptation_a_scratch_folder(tmp_path, monkeypatch, capsys):
    import bench.core.cache as cache

    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("")
    monkeypatch.setattr(cache, "_warned", False)
    scratch = cache.scratch_instead(blocker)
    assert scratch != blocker and scratch.is_dir()
    (scratch / "adapted").mkdir()  # the checkpoint of this run can be written
    cache.FeatureCache(blocker).put("enc", "a", np.ones(2, dtype=np.float32))
    assert len([line for line in capsys.readouterr().err.splitlines() if "warning" in line]) == 1
    assert cache.scratch_instead(tmp_path / "fine") == tmp_path / "fine"


def test_empty_folder_variables_mean_the_defaults(monkeypatch, tmp_path):
    """BENCH_DATA_DIR= and BENCH_CACHE_DIR= (set but empty, as a shell leaves them) are the defaults, not the
    current folder (a run read the working directory as its data folder before)."""
    from bench.core.cache import cache_root
    from bench.core.examples import data_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("BENCH_DATA_DIR", "")
    monkeypatch.setenv("BENCH_CACHE_DIR", "")
    assert data_dir() == tmp_path / ".cache" / "bench" / "data"
    assert cache_root() == tmp_path / ".cache" / "bench"


def test_summarize_of_a_folder_without_records_writes_nothing(tmp_path):
    # an existing folder no cell ran into (the wrong one, say) gets bench report's sentence, not an empty board
    one_sentence(invoke("summarize", "--results-dir", tmp_path), "no records")
    assert list(tmp_path.iterdir()) == []
