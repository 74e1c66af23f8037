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



@pytest.mark.parametrize("defense, args, same", [("dchi-sequence", {"eta": 10}, True),
                                                 ("texthide", {"m": 256, "k": 4}, False)])
def test_the_training_split_is_released_once_unless_the_paper_rehides_each_epoch(tiny_data, monkeypatch, defense,
                                                                                 args, same):
    """d_chi: the server asks for the same examples twice (two epochs) and gets the one release both times, so it
    never sees two noise draws of an example; TextHide re-hides every epoch (§3.4), so its batches differ."""
    import torch

    import bench.engine.paths.representations as representations

    sent = []
    original = representations.HiddenBatches
    monkeypatch.setattr(representations, "HiddenBatches", lambda *a, **k: sent.append(original(*a, **k)) or sent[-1])
    run_cell(make_spec(defense=defense, defense_args=args, encoder="mock", training_args="epochs=1"))
    idx = torch.arange(8)
    first, second = (sent[0].batch(idx, 0, torch.Generator().manual_seed(s)) for s in (1, 2))
    assert torch.equal(first[0], second[0]) is same and torch.equal(first[1], second[1]) is same


def test_a_release_once_defense_refuses_fine_tuning_through_it(tiny_data):
    """Fine-tuning the encoder would make the client encode and release each example again every epoch."""
    with pytest.raises(BenchError, match="releases each training example once"):
        make_spec(defense="dchi-sequence", encoder="mock", mode="finetune")
    make_spec(defense="texthide", encoder="mock", mode="finetune")  # re-hides every epoch by its paper: allowed
