"""Gradient matching (DLG) against TextHide: the pattern of TextHide Table 2 at reduced N.

The update is the paper's mimic (Appendix C.1): a client layer, then mix and mask, then the head, with the client
layer's gradients in the update (Algorithm 2). Here N is smaller and the representations Gaussian; the tests check
the table's shape: without TextHide every attack succeeds; with one mask and k = 1 many succeed at small d and
fewer as d grows; with k >= 2 no attack recovers the owner's representation.
"""

import numpy as np
import pytest
import torch

from bench import ATTACKS, BenchError
from bench.core.params import build_component
from bench.models.gradient_inversion import MatchingSettings, magnitude_success, run_attacks, success
from bench.models.training import TrainingConfig, initial_client_layer, initial_head, loss_fn

SETTINGS = MatchingSettings(steps=300)
TEXTHIDE_HEAD = TrainingConfig(activation="tanh", head_layers=2)  # TextHide's head: dense-tanh layers, then out


def updates(d, k, masked, n, seed=0, client_layer=True):
    """n single-example updates: hidden = sigma * sum_j lambda_j client(x_j), mixed targets; the gradients of the
    client layer and the head (of the head alone, on sigma * sum_j lambda_j x_j, without ``client_layer``)."""
    client = initial_client_layer(d, TEXTHIDE_HEAD, seed).eval() if client_layer else None
    model = initial_head(d, 2, TEXTHIDE_HEAD, seed).eval()
    g = torch.Generator().manual_seed(1000 * d + 10 * k + masked)
    members = torch.randn(n, k, d, generator=g)
    lam = torch.randn(n, k, generator=g).abs()
    lam = lam / lam.sum(dim=1, keepdim=True)
    labels = torch.nn.functional.one_hot(torch.randint(0, 2, (n, k), generator=g), 2).float()
    sigma = torch.randint(0, 2, (1, d), generator=g).float() * 2 - 1  # the pool's single mask (m = 1)
    hidden = (lam[..., None] * (client(members) if client else members)).sum(dim=1) * (sigma if masked else 1.0)
    targets = (lam[..., None] * labels).sum(dim=1)
    parameters = (list(client.parameters()) if client else []) + list(model.parameters())
    grads = []
    for i in range(n):
        loss = loss_fn(model(hidden[i : i + 1]), targets[i : i + 1], False)
        grads.append([x.detach().numpy() for x in torch.autograd.grad(loss, parameters, retain_graph=True)])
    return model, grads, targets[:, None, :].numpy(), members[:, 0].numpy(), client


def recover(d, k, masked, n, client_layer=True):
    model, grads, targets, owners, client = updates(d, k, masked, n, client_layer=client_layer)
    recovered, _, _ = run_attacks(model, grads, targets, False, masked, SETTINGS, client=client)
    return recovered, owners


def success_rate(d, k, masked, n):
    recovered, owners = recover(d, k, masked, n)
    return success(recovered, owners, 1e-3)[1].mean()


def test_undefended_updates_are_inverted():
    assert success_rate(16, 1, False, 8) == 1.0


def test_masked_single_example_updates_are_recovered_with_their_signs():
    recovered, owners = recover(4, 1, True, 16)
    assert success(recovered, owners, 1e-3)[1].mean() >= 0.4  # the paper: 0.76 at d = 4


def test_k1_success_falls_as_d_grows():
    assert success_rate(4, 1, True, 16) > success_rate(16, 1, True, 8)


@pytest.mark.parametrize("k", [2, 4])
def test_mixing_defeats_the_attack(k):
    assert success_rate(16, k, True, 4) == 0.0


def test_unmasked_mixing_still_hides_the_owner():
    assert success_rate(16, 2, False, 4) == 0.0  # no single dummy input gives the mixture's gradients


def test_head_only_updates_give_magnitudes_but_not_signs():
    """The head's gradient alone sees only sigma * e: |e| is recovered, its signs are not (the versions before 3)."""
    recovered, owners = recover(16, 1, True, 6, client_layer=False)
    assert magnitude_success(recovered, owners, 1e-3)[1].mean() >= 0.5
    assert success(recovered, owners, 1e-3)[1].mean() == 0.0


def test_success_and_magnitude_scores_have_known_answers():
    true = np.array([[0.5, -0.2, 0.1, -0.4], [1.0, 2.0, -3.0, 0.0]])
    mse, hit = success(true, true, 1e-3)
    assert np.array_equal(mse, [0, 0]) and hit.all()
    flipped = true * np.array([1, -1, 1, -1])  # every other sign wrong: |e| exact, e far
    mse, hit = success(flipped, true, 1e-3)
    assert np.allclose(mse, [(4 * 0.04 + 4 * 0.16) / 4, (16 + 0) / 4]) and not hit.any()
    magnitude, magnitude_hit = magnitude_success(flipped, true, 1e-3)
    assert np.array_equal(magnitude, [0, 0]) and magnitude_hit.all()
    assert not magnitude_success(true + 0.1, true, 1e-3)[1].any()  # 0.01 > 0.001


def test_parallel_workers_give_the_same_recoveries():
    model, grads, targets, _, client = updates(8, 1, False, 3)
    one, _, _ = run_attacks(model, grads, targets, False, False, SETTINGS, workers=1, client=client)
    two, _, _ = run_attacks(model, grads, targets, False, False, SETTINGS, workers=2, client=client)
    assert np.array_equal(one, two)


@pytest.mark.parametrize("m", [0, 1])
def test_the_release_holds_the_client_layer_whose_gradient_gives_e(m):
    """Single-example unmixed updates (k = 1): the client layer's weight gradient over its bias gradient is e, with
    or without the mask, so the update determines e; without a mask the attack recovers it."""
    from bench import DEFENSES
    from bench.engine.paths.representations import gradient_release

    defense = build_component(DEFENSES.get("texthide"), {"m": m, "k": 1})
    defense.setup(8, torch.Generator().manual_seed(0))
    reps = torch.randn(40, 8, generator=torch.Generator().manual_seed(1))
    targets = torch.nn.functional.one_hot(torch.arange(40) % 2, 2).float()
    release = gradient_release(defense, defense.representation_mechanism(), reps, targets, TEXTHIDE_HEAD, seed=0)
    data = release.data
    assert data.client is not None and len(data.gradients[0]) == 2 + len(list(data.model.parameters()))
    for row, update in zip(reps[release.owners].numpy(), data.gradients):
        weight, bias = update[0], update[1]
        unit = int(np.argmax(np.abs(bias)))
        assert np.allclose(weight[unit] / bias[unit], row, atol=1e-4)
    if m == 0:  # the masked attack is test_masked_single_example_updates_are_recovered_with_their_signs
        recovered, _, _ = run_attacks(data.model, data.gradients[:3], data.targets[:3], data.regression, False,
                                      SETTINGS, client=data.client)
        assert success(recovered, reps[:3].numpy(), 1e-3)[1].all()


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
    assert record.notes["matched_gradients"] == "client layer and head"
    assert 0 <= record.metrics["privacy/gradient-matching/success_rate"] <= 1
    assert 0 <= record.metrics["privacy/gradient-matching/magnitude_success_rate"] <= 1
    assert np.isfinite(record.metrics["random/gradient-matching/mse"])
    assert np.isfinite(record.metrics["random/gradient-matching/magnitude_mse"])
