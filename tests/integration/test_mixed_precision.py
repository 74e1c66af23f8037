"""Mixed precision (``--precision bf16``): torch.autocast in bfloat16 around the encoder's and the MLMs' forward
passes, measured here on the CPU against float32 within the tolerances docs/ray.md states.

Stated tolerances (what the GPU path may rely on): sentence features cosine >= 0.9999 to float32's, a cell's
utility and attack figures within 0.05 of float32's on the same data, NDD scores' candidate ranking kept
(Spearman >= 0.95) with the same best candidate. Each test also checks that bf16 really ran (the outputs are not
identical to float32's), so a silently ignored setting fails.
"""

import numpy as np
import pytest
from scipy.stats import spearmanr

from bench import BenchError
from bench.engine.runner import make_spec, run_cell
from bench.models.encoders import on_device

from ..unit.tiny_models import tiny_masked_lm


@pytest.fixture(scope="module")
def sentences():
    from bench.core.params import build_component
    from bench.core.registry import TASKS

    return build_component(TASKS.get("sst2"), {}).load(48, 8, 0).train.texts


def test_bf16_features_within_tolerance_of_fp32(sentences):
    from bench.models.encoders import Encoder

    encoder = Encoder("minilm", cache=False)
    full = encoder.encode(sentences, use_cache=False)
    with on_device("cpu", "bf16"):
        assert encoder.settings()["precision"] == "bf16"  # a separate feature-cache key
        mixed = encoder.encode(sentences, use_cache=False)
    assert "precision" not in encoder.settings()  # fp32 keeps the keys cached before precision existed
    assert mixed.dtype == np.float32
    cosine = (full * mixed).sum(1) / np.linalg.norm(full, axis=1) / np.linalg.norm(mixed, axis=1)
    assert cosine.min() >= 0.9999
    assert np.abs(full - mixed).max() > 1e-4  # autocast ran: bf16 products round differently


def test_bf16_cell_within_tolerance_and_hashed_apart():
    common = dict(task="stsb", defense="dchi-token", defense_args={"eta": 100.0}, attack="inversion",
                  n_train=64, n_eval=32, training_args={"epochs": 2}, device="cpu")
    full, mixed = make_spec(**common), make_spec(**common, precision="bf16")
    assert full.config_hash() != mixed.config_hash() and "bf16" in mixed.label()
    legacy = full.to_dict()
    legacy.pop("precision")  # a record written before precision existed keeps its hash
    assert type(full).from_dict(legacy).config_hash() == full.config_hash()
    a, b = run_cell(full), run_cell(mixed)
    assert b.spec["precision"] == "bf16"
    for name, value in a.metrics.items():
        assert abs(b.metrics[name] - value) <= 0.05, name
    assert any(b.metrics[name] != value for name, value in a.metrics.items() if name.startswith("utility/"))


def test_bf16_ndd_scores_keep_the_ranking():
    from bench.models.ndd import ndd_scores

    mlm = tiny_masked_lm(max_positions=64)
    tokenize = lambda text: np.asarray(mlm.tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)  # noqa: E731
    original = tokenize("peter blackburn visited the european commission in brussels on thursday .")
    candidates = [tokenize(t) for t in ["john smith", "a", "the big red fire engine company", "peter blackburn",
                                        "the mayor", "brussels", "an old friend of his", "mary"]]
    full = ndd_scores(mlm, original, (0, 2), candidates, mu=0.8)
    with on_device("cpu", "bf16"):
        mixed = ndd_scores(mlm, original, (0, 2), candidates, mu=0.8)
    assert not np.array_equal(full, mixed)
    assert spearmanr(full, mixed).statistic >= 0.95
    assert np.argmin(full) == np.argmin(mixed)


@pytest.mark.parametrize("precision", ["fp16", "half", ""])
def test_unknown_precision_is_refused_in_one_sentence(precision):
    with pytest.raises(BenchError, match="precision must be fp32 or bf16"):
        make_spec(task="sst2", encoder="mock", n_train=8, n_eval=8, precision=precision)
