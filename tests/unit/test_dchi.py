"""d_chi on sentence representations: noise level and the privacy parameter's effect on RSS."""

import pytest

from bench import BenchError
from bench.engine.runner import make_spec, run_cell


def identity(eta, **kwargs):
    spec = make_spec(defense="dchi-sequence", defense_args={"eta": eta}, attack="rss", encoder="mock",
                     attack_args="sbert=mock", training_args="epochs=1", **kwargs)
    return run_cell(spec).metrics


def test_little_noise_leaks_and_much_noise_hides(tiny_data):
    # mock features have dimension 64 and norms near 1: radius 64/eta
    weak, strong = identity(1e5), identity(1.0)
    assert weak["privacy/rss/identity"] >= 0.95
    assert strong["privacy/rss/identity"] <= strong["random/rss/identity"] + 0.05


@pytest.mark.parametrize("defense", ["dchi-sequence", "dchi-token", "dchi-text"])
@pytest.mark.parametrize("eta", [0, -1])
def test_eta_must_be_positive(tiny_data, defense, eta):
    with pytest.raises(BenchError, match="eta must be > 0"):
        make_spec(defense=defense, defense_args={"eta": eta}, encoder="mock")


def test_token_mechanisms_need_a_wordpiece_encoder(tiny_data):
    spec = make_spec(defense="dchi-text", attack="inversion", encoder="mock", training_args="epochs=1")
    with pytest.raises(BenchError, match="needs a real encoder"):
        run_cell(spec)
