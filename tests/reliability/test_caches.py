"""Class 7 of issue 60: caches. A published cache folder carries each file's size and digest; a cached checkpoint
that no longer verifies (a truncated ``model.safetensors``, an edited file, a file gone) is said in one warning,
removed and rebuilt, never used. A folder published before manifests is held to what its safetensors headers say."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bench.models.adaptation as adaptation
from bench.core.files import MANIFEST, atomic_directory, problem_of, verified


def _publish(target, payload: bytes = b"x" * 4096, manifest: bool = True):
    """A checkpoint folder as a builder publishes it: a real safetensors file and the marker."""
    from safetensors.numpy import save_file

    with atomic_directory(target) as folder:
        save_file({"weight": np.arange(1024, dtype=np.float32)}, str(folder / "model.safetensors"))
        (folder / "vocab.txt").write_bytes(payload)
        (folder / "adaptation.json").write_text(json.dumps({"key": target.name}), encoding="utf-8")
    if not manifest:
        (target / MANIFEST).unlink()
    return target


def _truncate(path, keep: int = 100) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def test_a_published_folder_verifies(tmp_path):
    target = _publish(tmp_path / "adapted" / "k1")
    assert problem_of(target, "adaptation.json") is None
    assert json.loads((target / MANIFEST).read_text())["model.safetensors"][0] == (
        target / "model.safetensors").stat().st_size


@pytest.mark.parametrize("damage", ["truncate", "edit", "remove"])
def test_a_damaged_checkpoint_does_not_verify_and_is_removed(tmp_path, capsys, damage):
    target = _publish(tmp_path / "adapted" / "k2")
    weights = target / "model.safetensors"
    if damage == "truncate":
        _truncate(weights)
    elif damage == "edit":  # same size, other bytes
        data = bytearray(weights.read_bytes())
        data[-1] ^= 0xFF
        weights.write_bytes(bytes(data))
    else:
        weights.unlink()
    assert not verified(target, "adaptation.json", "adapted checkpoint")
    assert not target.exists()
    assert "does not verify (model.safetensors" in capsys.readouterr().err


def test_a_folder_from_before_manifests_is_checked_by_its_safetensors_header(tmp_path):
    whole = _publish(tmp_path / "adapted" / "old-whole", manifest=False)
    assert verified(whole, "adaptation.json", "adapted checkpoint")
    cut = _publish(tmp_path / "adapted" / "old-cut", manifest=False)
    _truncate(cut / "model.safetensors", keep=2000)
    assert problem_of(cut, "adaptation.json") == "model.safetensors is not a whole safetensors file"


def test_adapt_encoder_rebuilds_a_truncated_cached_checkpoint(tmp_path, monkeypatch):
    """The path every run takes: a cached adapted checkpoint whose weights were cut short is rebuilt before use
    (it failed every later run)."""
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("bench.data.public_corpus.public_corpus", lambda *a, **k: (["a sentence"], "corpus", "h"))
    builds = []

    def pretrain(mechanism, encoder, config, corpus, device, task, target):
        builds.append(target)
        _publish(target)

    monkeypatch.setattr(adaptation, "_pretrain", pretrain)

    class Mechanism:
        name = "identity"

        def identity(self):
            return {"mechanism": "identity"}

    config = adaptation.AdaptationConfig("denoising")
    first = adaptation.adapt_encoder(Mechanism(), "mock", config)
    assert adaptation.adapt_encoder(Mechanism(), "mock", config) == first and len(builds) == 1
    _truncate(first / "model.safetensors")
    again = adaptation.adapt_encoder(Mechanism(), "mock", config)
    assert len(builds) == 2 and again == first
    assert problem_of(again, "adaptation.json") is None
