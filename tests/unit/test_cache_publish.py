"""Caches shared by workers (a shared BENCH_CACHE_DIR, or several processes on one node): an artefact is published
by one atomic rename, a second builder that loses the race keeps the winner's copy, and readers never see half of
one."""

from __future__ import annotations

import os
import threading

import numpy as np

import bench.core.files as files
from bench.core.cache import FeatureCache
from bench.core.files import atomic_directory


def test_a_builder_that_loses_the_race_between_check_and_rename_keeps_the_winners_copy(tmp_path, monkeypatch):
    target = tmp_path / "adapted" / "key"
    real_replace = os.replace

    def another_process_publishes_first(source, destination):
        os.makedirs(destination)
        (target / "weights").write_text("winner")
        real_replace(source, destination)  # ENOTEMPTY: the target is there now

    monkeypatch.setattr(files.os, "replace", another_process_publishes_first)
    with atomic_directory(target) as folder:
        (folder / "weights").write_text("loser")
    assert (target / "weights").read_text() == "winner"
    assert sorted(p.name for p in target.parent.iterdir()) == ["key"]  # no temporary folder left behind


def test_concurrent_writers_of_one_feature_entry_leave_one_whole_array(tmp_path):
    cache = FeatureCache(tmp_path)
    arrays = [np.full((200, 64), i, dtype=np.float32) for i in range(8)]
    start = threading.Barrier(len(arrays))

    def write(array):
        start.wait(timeout=10)
        cache.put("minilm", "samekey", array)

    threads = [threading.Thread(target=write, args=(a,)) for a in arrays]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    found = cache.get("minilm", "samekey")
    assert found is not None and found.shape == (200, 64) and len(np.unique(found)) == 1
    assert [p.name for p in (tmp_path / "features" / "minilm").iterdir()] == ["samekey.npy"]
