"""Gradient matching (DLG) against TextHide: the pattern of TextHide Table 2 at reduced N.

The paper attacks a network mimicking TextHide's head at representation size d with batch size 1
and one mask (m = 1), N = 50 attacks per cell. Here N is smaller and the representations are
Gaussian; the test checks the table's shape: without TextHide most attacks succeed; with a mask and
k = 1 success falls as d grows (a dummy mask can match the update but not tell which of the 2^d sign
patterns the client used); with k >= 2 no attack recovers the owner's representation.
"""

import numpy as np
import pytest
import torch

from bench import ATTACKS, BenchError
from bench.core.params import build_component
from bench.models.gradient_inversion import MatchingSettings, run_attacks, success
from bench.models.training import TrainingConfig, initial_head, loss_fn

SETTINGS = MatchingSettings(steps=300)
TEXTHIDE_HEAD = TrainingConfig(activation="tanh", head_layers=2)  # TextHide's head: dense-tanh layers, then out


def updates(d, k, masked, n, seed=0):
    """n single-example updates of a fresh head: hidden = sigma * sum_j lambda_j x_j, mixed targets."""
    model = initial_head(d, 2, TEXTHIDE_HEAD, seed).eval()
    g = torch.Generator().manual_seed(1000 * d + 10 * k + masked)
    members = torch.randn(n, k, d, generator=g)
    lam = torch.randn(n, k, generator=g).abs()
    lam = lam / lam.sum(dim=1, keepdim=True)
    labels = torch.nn.functional.one_hot(torch.randint(0, 2, (n, k), generator=g), 2).float()
    sigma = torch.randint(0, 2, (1, d), generator=g).float() * 2 - 1  # the pool's single mask (m = 1)
    hidden = (lam[..., None] * members).sum(dim=1) * (sigma if masked else 1.0)
    targets = (lam[..., None] * labels).sum(dim=1)
    grads = []
    for i in range(n):
        loss = loss_fn(model(hidden[i : i + 1]), targets[i : i + 1], False)
        grads.append([x.detach().numpy() for x in torch.autograd.grad(loss, list(model.parameters()))])
    return model, grads, targets[:, None, :].numpy(), members[:, 0].numpy()


def success_rate(d, k, masked, n):
    model, grads, targets, owners = updates(d, k, masked, n)
    recovered, _, _ = run_attacks(model, grads, targets, False, masked, SETTINGS)
    return success(recovered, owners, 1e-3)[1].mean()


def test_undefended_updates_are_inverted():
    assert success_rate(16, 1, False, 8) >= 0.5


def test_k1_success_falls_as_d_grows():
    small, large = success_rate(4, 1, True, 64), success_rate(256, 1, True, 8)
    assert small > large == 0.0


@pytest.mark.parametrize("k", [2, 4])
def test_mixing_defeats_the_attack(k):
    assert success_rate(16, k, True, 8) == 0.0


def test_unmasked_mixing_still_hides_the_owner():
    assert success_rate(16, 2, False, 8) == 0.0  # the attack recovers the mixture, not x_1


def test_parallel_workers_give_the_same_recoveries():
    model, grads, targets, _ = updates(8, 1, False, 3)
    one, _, _ = run_attacks(model, grads, targets, False, False, SETTINGS, workers=1)
    two, _, _ = run_attacks(model, grads, targets, False, False, SETTINGS, workers=2)
    assert np.array_equal(one, two)


@pytest.mark.parametrize("args, message", [("attacks=0", "attacks must be >= 1"), ("threshold=0", "threshold"),
                                           ("line_search=wolfe", "strong_wolfe or none")])
def test_bad_values_are_one_sentence_errors(args, message):
    with pytest.raises(BenchError, match=message):
        build_component(ATTACKS.get("gradient-matching"), args)


def test_a_bad_mock_size_is_one_sentence(tiny_data):
    from bench.engine.runner import make_spec, run_cell

    with pytest.raises(BenchError, match="positive integer"):
        run_cell(make_spec(defense="none", encoder="mock-x"))


def test_attack_runs_on_a_cell_and_notes_its_speed(tiny_data):
    from bench.engine.runner import make_spec, run_cell

    spec = make_spec(defense="texthide", defense_args="m=1,k=1", attack="gradient-matching",
                     attack_args="attacks=4,steps=50", encoder="mock-8", training_args="epochs=1,activation=tanh",
                     n_train=200)  # the training file's other 200 sentences are the public text of the reference
    record = run_cell(spec)
    assert record.notes["attacks"] == 4 and record.notes["attacks_per_minute"] > 0 and record.notes["dummy_mask"]
    assert 0 <= record.metrics["privacy/gradient-matching/success_rate"] <= 1
    assert np.isfinite(record.metrics["random/gradient-matching/mse"])
