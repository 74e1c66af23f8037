"""Every mechanism against a slow, obvious reference written from its paper's equation, on tiny inputs.

Deterministic transforms are compared value for value with a loop over rows (the same random draws, taken in the
order the paper's algorithm takes them); randomized ones by their law: exact probabilities computed from the
equation against the frequencies of many draws, within five standard errors, or a Kolmogorov-Smirnov test
against a distribution obtained by integrating the paper's density. Each test fails on a wrong scale, a wrong
support or a skipped term.

Already covered elsewhere, and not repeated here: d_chi text's exact nearest token (``test_mechanisms.py``), the
exponential mechanism's rows and sampler (``test_santext.py``), its channel against the sampler
(``test_posterior.py``), certified search against float64 brute force (``test_search.py``), and NDD's scores and
selection against a plain loop (``test_ndd.py``).
"""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from bench import DEFENSES
from bench.core.params import build_component
from bench.engine.contracts import FakeSpace
from bench.privacy.mechanisms import (
    dchi_noise,
    dchi_token_vectors,
    least_frequent,
    santext_tokens,
    token_counts,
    uniform_tokens,
)
from bench.privacy.outputs import gaussian_perturbation, most_least, reverse_sigmoid, softmax
from bench.privacy.public import ExponentialMechanism, IdentityTokens

SE = 5  # a frequency may lie this many standard errors from its exact probability


def within_standard_errors(observed: np.ndarray, expected: np.ndarray, draws: int) -> bool:
    bound = SE * np.sqrt(expected * (1 - expected) / draws) + 1e-12
    return bool((np.abs(observed - expected) <= bound).all())


# -- d_chi (Feyisetan et al. 2020; Qu et al. 2021 §3.2) ---------------------------------------------------------


def radius_cdf(dim: int, eta: float):
    """The law of ||N|| when N has density proportional to exp(-eta ||N||) on R^dim: integrating over spheres,
    the radius has density proportional to r^(dim-1) exp(-eta r); its CDF by numerical integration."""
    density = lambda r: r ** (dim - 1) * math.exp(-eta * r)  # noqa: E731
    total = integrate.quad(density, 0, math.inf)[0]
    return np.vectorize(lambda x: integrate.quad(density, 0, x)[0] / total)


@pytest.mark.parametrize("dim, eta", [(1, 2.0), (3, 0.5), (8, 4.0)])
def test_dchi_noise_radius_follows_the_density_of_the_paper(dim, eta):
    noise = dchi_noise(3000, dim, eta, np.random.default_rng(dim))
    assert stats.kstest(np.linalg.norm(noise.astype(np.float64), axis=1), radius_cdf(dim, eta)).pvalue > 1e-3


def test_dchi_noise_direction_is_uniform_on_the_sphere():
    # on the unit sphere of R^3 one coordinate of a uniform direction is uniform on [-1, 1] (Archimedes)
    noise = dchi_noise(4000, 3, 1.0, np.random.default_rng(0)).astype(np.float64)
    direction = noise / np.linalg.norm(noise, axis=1, keepdims=True)
    for axis in range(3):
        assert stats.kstest(direction[:, axis], stats.uniform(-1, 2).cdf).pvalue > 1e-3


def test_dchi_token_is_each_token_embedding_plus_its_own_noise():
    table = np.random.default_rng(0).standard_normal((20, 5)).astype(np.float32)
    ids = [np.array([3, 3, 7]), np.array([], dtype=np.int64), np.array([19, 0])]
    released = dchi_token_vectors(ids, table, 2.0, np.random.default_rng(4))
    noise = dchi_noise(5, 5, 2.0, np.random.default_rng(4))  # one draw per token, in reading order
    row = 0
    for sentence, out in zip(ids, released):
        assert len(out) == len(sentence)
        for position, token in enumerate(sentence):
            assert np.array_equal(out[position], table[token] + noise[row])
            row += 1


def test_dchi_sequence_adds_one_noise_draw_per_representation():
    defense = build_component(DEFENSES.get("dchi-sequence"), {"eta": 3.0})
    reps = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    hidden = defense.hide(reps, torch.Generator().manual_seed(2))
    seed = int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(2)))
    noise = dchi_noise(4, 6, 3.0, np.random.default_rng(seed))
    for i in range(4):
        assert torch.equal(hidden[i], reps[i] + torch.from_numpy(noise[i]))


# -- SanText and SanText+ (Yue et al. 2021 §3.2-3.3) --------------------------------------------------------------


def santext_plus_probabilities(x: int, table: np.ndarray, sensitive: np.ndarray, eps: float, p: float) -> np.ndarray:
    """Pr[y | x] over token ids 0..len(table)-1, one y at a time: a sensitive x is always replaced, another x with
    probability p, by y of V_S drawn with weight exp(-eps d(x, y) / 2)."""
    weight = {int(y): math.exp(-eps * float(np.linalg.norm(table[x].astype(np.float64) - table[y])) / 2)
              for y in sensitive}
    total = sum(weight.values())
    replaced = 1.0 if x in set(sensitive.tolist()) else p
    return np.array([(1 - replaced) * (y == x) + replaced * weight.get(y, 0.0) / total for y in range(len(table))])


@pytest.mark.parametrize("x", [0, 4])  # 0 is not sensitive, 4 is
def test_santext_plus_releases_follow_the_equation(x):
    table = np.random.default_rng(1).standard_normal((10, 3)).astype(np.float32)
    sensitive = np.array([2, 4, 5, 9])
    draws = 40000
    released = santext_tokens([np.full(draws, x)], table, sensitive, eps=1.5, p=0.4, rng=np.random.default_rng(x))[0]
    observed = np.bincount(released, minlength=10) / draws
    assert within_standard_errors(observed, santext_plus_probabilities(x, table, sensitive, 1.5, 0.4), draws)


def test_sensitive_set_is_the_least_frequent_share_by_a_plain_sort():
    rng = np.random.default_rng(0)
    for _ in range(20):
        counts = rng.integers(0, 4, size=40)  # many ties
        candidates = np.sort(rng.choice(40, size=25, replace=False))
        for w in (0.01, 0.3, 0.5, 1.0):
            ranked = sorted(candidates.tolist(), key=lambda t: (counts[t], -t))  # rarest first; ties: higher id
            expected = sorted(ranked[: max(1, round(w * len(candidates)))])
            assert least_frequent(counts, candidates, w).tolist() == expected


def test_santext_plus_fits_its_sensitive_set_on_the_counts_of_the_text_it_privatizes():
    space = FakeSpace()
    ids = [np.array([5, 5, 5, 6, 7]), np.array([6, 8, 49, 49])]
    counts = [0] * len(space.table)
    for sentence in ids:
        for token in sentence:
            counts[token] += 1
    assert token_counts(ids, len(space.table)).tolist() == counts
    mechanism = ExponentialMechanism(eps=1.0, p=0.3, w=0.5)
    mechanism.fit(ids, space)
    ranked = sorted(space.candidates.tolist(), key=lambda t: (counts[t], -t))
    assert mechanism.sensitive.tolist() == sorted(ranked[: round(0.5 * len(space.candidates))])


# -- random replacement and the identity --------------------------------------------------------------------------


def test_random_replacement_is_uniform_and_independent_of_the_input():
    candidates = np.array([3, 5, 6, 10, 11])
    draws = 30000
    for token in (3, 10):
        released = uniform_tokens([np.full(draws, token)], candidates, np.random.default_rng(7))[0]
        observed = np.array([(released == y).mean() for y in candidates])
        assert within_standard_errors(observed, np.full(5, 0.2), draws)
    first = uniform_tokens([np.array([3, 5])], candidates, np.random.default_rng(1))
    assert np.array_equal(first[0], uniform_tokens([np.array([11, 11])], candidates, np.random.default_rng(1))[0])


def test_identity_releases_every_token_and_representation_as_it_is():
    ids = [np.array([5, 9, 6]), np.array([], dtype=np.int64)]
    released = IdentityTokens().privatize(ids, FakeSpace(), np.random.default_rng(0))
    assert [x.tolist() for x in released] == [x.tolist() for x in ids]
    none = DEFENSES.get("none")()
    reps, targets = torch.randn(5, 4), torch.eye(5)[:, :2]
    hidden, mixed = none.hide_batch(reps, targets, torch.Generator().manual_seed(0))
    assert torch.equal(hidden, reps) and torch.equal(mixed, targets)
    assert torch.equal(none.hide_inference(reps, torch.Generator().manual_seed(0)), reps)


# -- TextHide (Huang et al. 2020, Algorithm 1) ---------------------------------------------------------------------


def texthide_reference(reps, targets, k, pool, generator, scheme="intra", public=None):
    """Algorithm 1, one example at a time, drawing in the algorithm's order: the k mixing weights of every
    example, the k - 1 partner permutations (inter: a public draw at every odd position), then one mask of the
    pool per example. x_i = sum_j lambda_ij x_(pi_j(i)), y_i likewise over the private members, then x_i * mask."""
    n = len(reps)
    raw = torch.randn(n, k, generator=generator).abs()
    weights = [[float(raw[i, j]) / float(sum(raw[i])) for j in range(k)] for i in range(n)]
    members = []
    for j in range(k):
        if scheme == "inter" and j % 2 == 1:
            members.append(("public", public(n, generator)))
        else:
            members.append(("private", list(range(n)) if j == 0 else torch.randperm(n, generator=generator).tolist()))
    masks = None if pool is None else torch.randint(0, len(pool), (n,), generator=generator)
    hidden, labels = [], []
    for i in range(n):
        x = torch.zeros(reps.shape[1], dtype=torch.float64)
        y = torch.zeros(targets.shape[1], dtype=torch.float64)
        private_weight = 0.0
        for j, (source, member) in enumerate(members):
            if source == "public":
                x += weights[i][j] * member[i].double()
                continue
            x += weights[i][j] * reps[member[i]].double()
            y += weights[i][j] * targets[member[i]].double()
            private_weight += weights[i][j]
        if scheme == "inter":
            y = y / private_weight
        hidden.append(x if masks is None else x * pool[masks[i]].double())
        labels.append(y)
    return torch.stack(hidden), torch.stack(labels)


@pytest.mark.parametrize("m, k, scheme", [(8, 4, "intra"), (0, 3, "intra"), (5, 1, "intra"), (8, 4, "inter"),
                                          (4, 3, "inter")])
def test_texthide_mixing_and_masking_equal_algorithm_1_example_by_example(m, k, scheme):
    dim = 6
    defense = build_component(DEFENSES.get("texthide"), {"m": m, "k": k, "scheme": scheme})
    defense.setup(dim, torch.Generator().manual_seed(0))
    public = lambda count, generator: torch.randn(count, dim, generator=generator)  # noqa: E731 - a public corpus
    defense.public_members = public
    reps = torch.randn(7, dim, generator=torch.Generator().manual_seed(1))
    targets = torch.nn.functional.one_hot(torch.tensor([0, 1, 1, 0, 2, 2, 1]), 3).float()
    hidden, labels = defense.hide_batch(reps, targets, torch.Generator().manual_seed(3))
    expected_hidden, expected_labels = texthide_reference(reps, targets, k, defense.mask_pool,
                                                          torch.Generator().manual_seed(3), scheme, public)
    assert torch.allclose(hidden.double(), expected_hidden, atol=1e-5)
    assert torch.allclose(labels.double(), expected_labels, atol=1e-6)


def test_texthide_inference_masks_each_representation_with_one_mask_of_the_pool():
    defense = build_component(DEFENSES.get("texthide"), {"m": 6, "k": 4})
    defense.setup(5, torch.Generator().manual_seed(0))
    reps = torch.randn(9, 5)
    hidden = defense.hide_inference(reps, torch.Generator().manual_seed(2))
    choice = torch.randint(0, 6, (9,), generator=torch.Generator().manual_seed(2))
    for i in range(9):
        assert torch.equal(hidden[i], reps[i] * defense.mask_pool[choice[i]])


# -- output defenses of a prediction API, and the nasty teacher's training objective -------------------------------


def reference_softmax(row, tau=1.0):
    exps = [math.exp((v - max(row)) / tau) for v in row]
    return [e / sum(exps) for e in exps]


def renormalised(row):
    clipped = [min(max(v, 0.0), 1.0) for v in row]
    total = sum(clipped)
    return [v / total for v in clipped] if total > 0 else [1 / len(row)] * len(row)


LOGITS = np.random.default_rng(5).standard_normal((40, 4)) * 3
LOGITS[0] = [1.0, 1.0, 1.0, 1.0]  # a uniform row: ties everywhere
LOGITS[1] = [2.0, -1.0, 2.0, -1.0]


@pytest.mark.parametrize("tau", [0.5, 1.0, 3.0])
def test_softening_is_the_tempered_softmax_row_by_row(tau):
    assert np.allclose(softmax(LOGITS, tau), [reference_softmax(r, tau) for r in LOGITS.tolist()], atol=1e-12)


def test_perturbation_is_gaussian_noise_clipped_and_renormalised_row_by_row():
    p = softmax(LOGITS)
    answers = gaussian_perturbation(p, 0.3, np.random.default_rng(9))
    noise = np.random.default_rng(9).standard_normal(p.shape)
    expected = [renormalised([v + 0.3 * z for v, z in zip(row, zs)]) for row, zs in zip(p.tolist(), noise.tolist())]
    assert np.allclose(answers, expected, atol=1e-12)


@pytest.mark.parametrize("beta, gamma", [(0.0, 1.0), (0.5, 0.5), (3.0, 2.0)])
def test_reverse_sigmoid_row_by_row(beta, gamma):
    p = softmax(LOGITS)

    def one(y):
        y = min(max(y, 1e-7), 1 - 1e-7)
        return y - beta * (1 / (1 + math.exp(-gamma * math.log(y / (1 - y)))) - 0.5)

    expected = [renormalised([one(y) for y in row]) for row in p.tolist()]
    assert np.allclose(reverse_sigmoid(p, beta, gamma), expected, atol=1e-12)


@pytest.mark.parametrize("eps", [0.05, 0.3])
def test_most_least_row_by_row(eps):
    p = softmax(LOGITS)
    expected = []
    for row in p.tolist():
        top = min(range(len(row)), key=lambda c: (-row[c], c))  # the most likely; ties: the lower class
        least = min((c for c in range(len(row)) if c != top), key=lambda c: (row[c], c))
        expected.append([0.5 + eps if c == top else 0.5 - eps if c == least else 0.0 for c in range(len(row))])
    assert np.allclose(most_least(p, eps), expected, atol=1e-12)


@pytest.mark.parametrize("tau, omega", [(1.0, 0.0), (4.0, 0.004), (2.0, 0.5)])
def test_nasty_teacher_loss_is_equation_2_example_by_example(tau, omega):
    # Ma et al. 2021, Eq. 2: CE(victim, y) - omega * tau^2 * KL(softmax(victim / tau) || softmax(adversary / tau))
    from bench.models.api import self_undermining_loss

    rng = np.random.default_rng(0)
    victim, adversary = rng.standard_normal((6, 3)) * 2, rng.standard_normal((6, 3)) * 2
    targets = np.eye(3)[[0, 2, 1, 1, 0, 2]]
    teacher = torch.log_softmax(torch.from_numpy(adversary) / tau, dim=1)
    loss = self_undermining_loss(torch.from_numpy(victim), torch.from_numpy(targets), teacher, tau, omega)
    ce, kl = [], []
    for z, a, y in zip(victim.tolist(), adversary.tolist(), targets.tolist()):
        p = reference_softmax(z)
        q, t = reference_softmax(z, tau), reference_softmax(a, tau)
        ce.append(-sum(yc * math.log(pc) for yc, pc in zip(y, p)))
        kl.append(sum(qc * (math.log(qc) - math.log(tc)) for qc, tc in zip(q, t)))
    assert float(loss) == pytest.approx(sum(ce) / 6 - omega * tau**2 * sum(kl) / 6, rel=1e-10)
