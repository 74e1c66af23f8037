"""Shared fixtures: a tiny synthetic GLUE folder for unit tests, quiet progress bars."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("BENCH_QUIET", "1")

POSITIVE = ["great", "wonderful", "moving", "funny", "brilliant", "charming", "sharp", "warm"]
NEGATIVE = ["dull", "boring", "clumsy", "tedious", "flat", "awful", "stale", "weak"]
NOUNS = ["film", "movie", "story", "script", "cast", "ending", "plot", "score", "director", "scene"]
FILLER = ["really", "quite", "truly", "so", "very", "rather", "oddly", "simply"]


def synthetic_sentences(n: int, seed: int) -> list[tuple[int, str]]:
    """Distinct labelled sentences whose label is carried by one sentiment word."""
    rng = np.random.default_rng(seed)
    rows, seen = [], set()
    while len(rows) < n:
        label = int(rng.integers(0, 2))
        words = [
            "the", rng.choice(NOUNS), "is", rng.choice(FILLER),
            rng.choice(POSITIVE if label else NEGATIVE), "and", rng.choice(FILLER), rng.choice(NOUNS),
            str(len(rows)),  # keeps every sentence distinct
        ]
        text = " ".join(str(w) for w in words)
        if text not in seen:
            seen.add(text)
            rows.append((label, text))
    return rows


def write_tiny_glue(root: Path) -> Path:
    """SST-2 and CoLA files in the shared/data layout, with synthetic sentences."""
    sst = root / "glue" / "SST-2"
    sst.mkdir(parents=True)
    for name, header, n, seed in (("train.tsv", "sentence", 400, 0), ("dev.tsv", "content", 120, 1)):
        lines = [f"label\t{header}"] + [f"{y}\t{t}" for y, t in synthetic_sentences(n, seed)]
        (sst / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    cola = root / "glue" / "CoLA"
    cola.mkdir(parents=True)
    for name, n, seed in (("in_domain_train.tsv", 300, 2), ("in_domain_dev.tsv", 100, 3)):
        lines = [f"src\t{y}\t\t{t}" for y, t in synthetic_sentences(n, seed)]
        (cola / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def tiny_data(tmp_path, monkeypatch) -> Path:
    """BENCH_DATA_DIR pointing at a tiny synthetic GLUE folder."""
    root = write_tiny_glue(tmp_path / "data")
    monkeypatch.setenv("BENCH_DATA_DIR", str(root))
    return root


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    """An empty results folder used as the default store."""
    path = tmp_path / "results"
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(path))
    return path


def files_under(path: Path) -> list[Path]:
    """Every file below ``path`` (empty when it does not exist)."""
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []
