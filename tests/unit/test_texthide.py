"""TextHide's mechanism (Algorithm 1) on small tensors."""

import pytest
import torch

from bench import DEFENSES
from bench.core.params import build_component
from bench.engine.paths.representations import release_like_training


def make(m, k, dim=16, seed=0):
    defense = build_component(DEFENSES.get("texthide"), {"m": m, "k": k})
    defense.setup(dim, torch.Generator().manual_seed(seed))
    return defense


def one_hot(labels, classes=2):
    return torch.nn.functional.one_hot(torch.as_tensor(labels), classes).float()


def test_mask_pool_is_m_sign_vectors_drawn_once():
    defense = make(8, 4)
    pool = defense.mask_pool
    assert pool.shape == (8, 16)
    assert set(pool.unique().tolist()) == {-1.0, 1.0}
    reps, targets = torch.randn(10, 16), one_hot([0, 1] * 5)
    defense.hide_batch(reps, targets, torch.Generator().manual_seed(1))
    assert defense.mask_pool is pool


def test_baseline_setting_changes_nothing():
    defense = make(0, 1)
    reps, targets = torch.randn(10, 16), one_hot([0, 1] * 5)
    hidden, mixed = defense.hide_batch(reps, targets, torch.Generator().manual_seed(0))
    assert torch.equal(hidden, reps) and torch.equal(mixed, targets)


def test_mix_only_gives_convex_combinations_with_matching_labels():
    defense = make(0, 4)
    reps = torch.eye(6)  # mixing weights can be read off the output
    targets = one_hot([0, 0, 0, 1, 1, 1])
    hidden, mixed = defense.hide_batch(reps, targets, torch.Generator().manual_seed(3))
    assert torch.all(hidden >= 0)
    assert torch.allclose(hidden.sum(dim=1), torch.ones(6))  # coefficients sum to 1
    assert torch.allclose(mixed.sum(dim=1), torch.ones(6))
    # the label mass equals the weight on the members of each class
    assert torch.allclose(mixed[:, 1], hidden[:, 3:].sum(dim=1), atol=1e-6)


def test_each_example_gets_a_mask_drawn_from_the_pool():
    defense = make(4, 1)
    reps = torch.rand(200, 16) + 0.1
    hidden, _ = defense.hide_batch(reps, one_hot([0] * 200), torch.Generator().manual_seed(0))
    assert torch.allclose(hidden.abs(), reps)
    used = [next(i for i, mask in enumerate(defense.mask_pool) if torch.equal(row, mask)) for row in torch.sign(hidden)]
    assert set(used) == {0, 1, 2, 3}  # every mask of the pool is drawn, none outside it


def test_partners_come_from_permutations_of_the_batch():
    defense = make(0, 3)
    reps = torch.eye(40)
    hidden, _ = defense.hide_batch(reps, one_hot([0] * 40), torch.Generator().manual_seed(5))
    # each example appears once as itself and once in each of the 2 permutations: in at most 3 rows
    # (fewer only where a permutation maps a row to a row that already holds it)
    rows_holding = (hidden > 0).sum(dim=0)
    assert torch.all((rows_holding >= 1) & (rows_holding <= 3)) and rows_holding.float().mean() > 2.7
    assert torch.all(torch.diagonal(hidden) > 0)  # member 0 is the example itself


def test_masking_before_setup_fails_closed():
    defense = build_component(DEFENSES.get("texthide"), {"m": 4, "k": 1})
    with pytest.raises(RuntimeError, match="setup"):
        defense.hide_inference(torch.ones(2, 16), torch.Generator().manual_seed(0))


def test_attacked_release_has_no_batch_of_one():
    defense = make(0, 4)
    reps, targets = torch.eye(65), one_hot([0] * 65)  # 65 = one batch of 64 and a remainder of 1
    released, _ = release_like_training(defense, reps, targets, 64, torch.Generator().manual_seed(0))
    assert not any(torch.equal(row, reps[i]) for i, row in enumerate(released))


def test_inference_masks_without_mixing():
    defense = make(4, 4)
    reps = torch.rand(20, 16) + 0.1
    hidden = defense.hide_inference(reps, torch.Generator().manual_seed(0))
    assert torch.allclose(hidden.abs(), reps)


def test_same_seed_same_release_other_seed_other_release():
    reps, targets = torch.randn(32, 16), one_hot([0, 1] * 16)

    def release(seed):
        defense = make(16, 4, seed=seed)
        return defense.hide_batch(reps, targets, torch.Generator().manual_seed(seed))[0]

    assert torch.equal(release(0), release(0))
    assert not torch.equal(release(0), release(1))


def test_infinite_m_draws_a_fresh_mask_per_example():
    defense = make("inf", 1)
    assert defense.mask_pool is None
    reps = torch.rand(300, 16) + 0.1
    hidden, _ = defense.hide_batch(reps, one_hot([0] * 300), torch.Generator().manual_seed(0))
    assert torch.allclose(hidden.abs(), reps)
    assert len({tuple(row.tolist()) for row in torch.sign(hidden)}) > 290  # almost all distinct of 2^16


def test_inter_mixes_public_members_and_private_labels_only():
    defense = build_component(DEFENSES.get("texthide"), {"m": 0, "k": 4, "scheme": "inter"})
    defense.setup(8, torch.Generator().manual_seed(0))
    public = torch.cat([torch.zeros(50, 4), torch.ones(50, 4)], dim=1)  # public texts live in dims 4-7
    defense.public_members = lambda count, g: public[torch.randint(50, (count,), generator=g)]
    reps = torch.cat([torch.rand(20, 4) + 0.1, torch.zeros(20, 4)], dim=1)  # private ones in dims 0-3
    hidden, mixed = defense.hide_batch(reps, one_hot([0, 1] * 10), torch.Generator().manual_seed(1))
    public_weight = hidden[:, 4:].mean(dim=1)  # the public members' share of each mixture
    assert torch.all(public_weight > 0) and torch.all(public_weight < 1)
    # §3.3: the private labels mixed by their weights, over the private weights' sum (a distribution again)
    assert torch.allclose(mixed.sum(dim=1), torch.ones(20), atol=1e-6)
    _, same = defense.hide_batch(reps, one_hot([1] * 20), torch.Generator().manual_seed(1))
    assert torch.allclose(same, one_hot([1] * 20), atol=1e-6)  # however much public text is mixed in


def test_federated_clients_split_the_pool_and_use_only_their_share():
    defense = build_component(DEFENSES.get("texthide"), {"m": 10, "k": 1, "clients": 3})
    defense.setup(16, torch.Generator().manual_seed(0))
    assert [len(p) for p in defense.pools] == [4, 3, 3]
    assert torch.equal(torch.cat(defense.pools), defense.mask_pool)
    reps = torch.rand(100, 16) + 0.1
    hidden, _ = defense.client_transform(2)(reps, one_hot([0] * 100), torch.Generator().manual_seed(0))
    own = {tuple(mask.tolist()) for mask in defense.pools[2]}
    assert {tuple(row.tolist()) for row in torch.sign(hidden)} <= own


@pytest.mark.parametrize(
    "args, message",
    [
        ({"m": "lots"}, "integer or inf"),
        ({"m": -1}, ">= 0"),
        ({"scheme": "cross"}, "intra or inter"),
        ({"m": 2, "clients": 3}, "one mask per client"),
        ({"clients": -1}, "clients must be >= 0"),
    ],
)
def test_bad_texthide_values_are_one_sentence_errors(args, message):
    from bench import BenchError

    with pytest.raises(BenchError, match=message):
        build_component(DEFENSES.get("texthide"), args)


def test_only_inter_cells_carry_the_label_fix_version(tiny_data):
    """The inter label fix supersedes inter cells only: intra's figures did not move, so its records stay current."""
    from bench.core.versions import component_versions
    from bench.engine.runner import make_spec

    intra = make_spec(defense="texthide", defense_args={"m": 256, "k": 4}, encoder="mock", attack="rss")
    inter = make_spec(defense="texthide", defense_args={"m": 256, "k": 4, "scheme": "inter"}, encoder="mock",
                      attack="rss")
    assert "texthide@1" in component_versions(intra).split() and "texthide@2" in component_versions(inter).split()
