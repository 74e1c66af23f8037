"""Texts encoded once in a process are not encoded again: the attack's corpus reuses the protocol's rows."""

from __future__ import annotations

import numpy as np
import pytest

from bench.models.encoders import Encoder


@pytest.fixture
def encoder(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = Encoder("minilm")
    seen: list = []
    pooled = model.pooled
    monkeypatch.setattr(model, "pooled", lambda items: seen.extend(items) or pooled(items))
    return model, seen


def test_known_texts_come_from_memory_and_only_new_ones_are_encoded(encoder):
    model, seen = encoder
    first = model.encode(["a quiet film", "loud and long", ("is it", "yes it is")])
    second = model.encode(["loud and long", "a new sentence", ("is it", "yes it is"), "a quiet film"])
    assert seen[3:] == ["a new sentence"]  # three from the first call, then only the new text
    assert np.array_equal(second[[0, 2, 3]], first[[1, 2, 0]])
    first[:] = 0.0  # a caller changing its array in place does not change what is remembered
    assert np.array_equal(model.encode(["a quiet film"]), second[[3]])
    alone = Encoder("minilm", cache=False).encode(["a new sentence"], use_cache=False)
    np.testing.assert_allclose(second[1], alone[0], atol=1e-5)  # the new row is the text's own encoding


def test_token_arrays_and_uncached_calls_are_always_encoded(encoder):
    model, seen = encoder
    ids = model.token_ids(["a quiet film"])
    model.encode(ids)
    model.encode(ids)  # arrays are not remembered (a disk-cache hit answers the second call)
    model.encode(["a quiet film"], use_cache=False)
    model.encode(["a quiet film"], use_cache=False)
    assert len(seen) == 3


def test_a_run_whose_features_are_cached_never_loads_the_weights(tmp_path):
    """The packaged encoder's width and revision come from its package; transformers loads only to encode."""
    import os
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from bench.models.encoders import Encoder\n"
        "from bench.models.loading import check_encoder\n"
        "check_encoder('minilm')\n"
        "model = Encoder('minilm')\n"
        "rows = model.encode(['a quiet film', ('is it', 'yes it is')])\n"
        "print(model.dim, rows.shape, '_weights' in vars(model), 'transformers' in sys.modules)\n"
    )
    env = {**os.environ, "BENCH_CACHE_DIR": str(tmp_path / "cache")}

    def run():
        return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)

    assert run().stdout.split() == ["384", "(2,", "384)", "True", "True"]  # cold: the model encodes
    assert run().stdout.split() == ["384", "(2,", "384)", "False", "False"]  # warm: the cache answers
