"""Qu et al.'s claim for privacy-adaptive pretraining (§3.4), checked on the committed full-budget records.

The records are those of ``grids/adaptation_sst2.yaml`` (dchi-token on SST-2, 8,000 training sentences, the
120-epoch head, 300 adaptation steps) and the unadapted cells of ``grids/dchi_token_sst2.yaml``, paired by seed, and
on QQP those of ``grids/adaptation_qqp.yaml`` with the unadapted cells of ``grids/dchi_qqp.yaml`` (seeds 0-2). The
text-to-text counterparts (Table 7) are ``grids/adaptation_text_sst2.yaml`` (seeds 0-4) and
``grids/adaptation_text_qqp.yaml`` (seeds 0-2), paired with the dchi-text cells of ``grids/dchi_text_sst2.yaml`` and
``grids/dchi_qqp.yaml``.
Where the paper's claim has room to show (eta 60 and 120, where the unadapted encoder is far below null privacy),
the encoder adapted by denoising MLM classifies better with the MLP head than the unadapted one (the newest record
of each seed, as every aggregate reads them) on average over the five seeds, and at eta 60 on four of them; the
deterministic convex probe on the same features (docs/probe.md) gains nothing at any eta. All five seeds of every
cell at eta 60, 120 and 1000 ran on one AMD EPYC (AVX-512): seeds 0-2 were first recorded on an Intel Xeon and seeds
3-4 of the unadapted cells on another EPYC (AVX2), where the head's accuracy differed by up to 0.047 for the same cell
(docs/analyses.md); those cells were rerun here on 2026-11-27.

This replaces a live test that was opt-in (``-m pattern``) because at its small budget (2,000 sentences, 100 steps)
float reduction order alone moved a seed by up to 0.03, as much as the effect (+0.018 on one thread, +0.007 on two).
The committed records are fixed, so this gates CI on every CPU; ``tests/unit/test_committed_grids.py`` keeps them
the grids' own cells, and ``tests/integration/test_adaptation.py`` checks the mechanics on live runs.
"""

import functools
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from bench.reproduction.reproduce import load_mapping
from bench.results.leaderboard import seed_frame

RESULTS = Path(__file__).resolve().parents[2] / "results"
SEEDS = (0, 1, 2, 3, 4)  # the adaptation grid's seeds


@pytest.fixture(scope="module")
def frame(committed_records):
    """Every committed record's metrics, the newest record of each seed (``seed_frame``, as every aggregate reads
    them)."""
    return seed_frame(committed_records)


def utility_of(frame, metric: str, task: str = "sst2", defense: str = "dchi-token") -> dict:
    """(eta, objective or '') -> seed -> ``metric`` of ``defense`` on ``task`` (frozen minilm, 8,000 training
    examples)."""
    cells = frame[(frame.task == task) & (frame.defense == defense) & (frame.n_train == 8000)
                  & (frame.encoder == "minilm") & (frame.metric == metric)]
    found = defaultdict(dict)
    for row in cells.itertuples():
        eta = float(row.defense_args.removeprefix("eta="))
        found[(eta, row.server_args.removeprefix("adapt="))][row.seed] = row.value
    return found


@pytest.fixture(scope="module")
def utility(frame):
    """``utility(metric, task, defense)``: ``utility_of`` over the committed frame, built once per combination (the
    SST-2 token-representation tables, the file's subject, also have the named fixtures below)."""
    return functools.cache(lambda metric, task="sst2", defense="dchi-token": utility_of(frame, metric, task, defense))


@pytest.fixture(scope="module")
def claims(committed_records):
    """The claims of `bench reproduce qu2021_adaptation` on the committed records, by id."""
    from bench.reproduction.reproduce import reproduce

    report = reproduce(RESULTS, "qu2021_adaptation", list(committed_records))
    return {claim["id"]: claim for claim in report["claims"]}


@pytest.fixture(scope="module")
def accuracy(frame):
    """The MLP head's dev accuracy per (eta, objective) and seed."""
    return utility_of(frame, "utility/accuracy")


@pytest.fixture(scope="module")
def probe(frame):
    """The deterministic convex probe's dev accuracy per (eta, objective) and seed (docs/probe.md)."""
    return utility_of(frame, "utility/probe_accuracy")


def gains(accuracy, eta: float, objective: str = "denoising", seeds=SEEDS) -> list[float]:
    """The adapted accuracy minus the unadapted accuracy of the same seed, per seed."""
    adapted, unadapted = accuracy[(eta, objective)], accuracy[(eta, "")]
    assert set(seeds) <= set(adapted) and set(seeds) <= set(unadapted), (dict(adapted), dict(unadapted))
    return [adapted[seed] - unadapted[seed] for seed in seeds]


def test_denoising_adaptation_beats_the_unadapted_encoder_at_eta_60(accuracy):
    found = gains(accuracy, 60.0)
    assert np.mean(found) > 0.02 and sum(g > 0 for g in found) >= 4, found  # measured: +0.025, 4 of 5


def test_denoising_adaptation_gains_on_average_at_eta_120(accuracy):
    assert np.mean(gains(accuracy, 120.0)) > 0.0  # measured: +0.019 over seeds 0-4 (4 of 5 above)


@pytest.mark.parametrize("objective", ["vanilla", "prob", "denoising"])
def test_at_eta_1000_adaptation_has_nothing_to_recover(accuracy, probe, objective):
    """With almost no noise the unadapted encoder is already near null privacy: no objective gains 0.015 on average
    (head, measured at most +0.006) or 0.01 (probe, at most +0.003). A per-seed bound would test the head's seed
    noise instead: one seed of denoising gains 0.018 while the five-seed mean is +0.006."""
    assert np.mean(gains(accuracy, 1000.0, objective)) < 0.015
    assert np.mean(gains(probe, 1000.0, objective)) < 0.01


@pytest.mark.parametrize("eta", [60.0, 120.0])
@pytest.mark.parametrize("objective", ["vanilla", "prob", "denoising"])
def test_the_convex_probe_sees_no_adaptation_gain(probe, eta, objective):
    """The gain belongs to the MLP head: on the same features the float64 logistic-regression probe, which agrees
    across CPUs within 0.01, gains nothing on average over the five seeds (measured from -0.012 to +0.001)."""
    assert np.mean(gains(probe, eta, objective)) < 0.01


def test_at_matched_privacy_the_probe_does_not_support_qu_t6(claims):
    """`bench reproduce qu2021_adaptation` reads Qu et al.'s T6 claim (each objective above the unadapted encoder at
    the paper's etas 100-175, matched by inversion accuracy) twice: through the head (unresolved, 7 of 12 checks
    hold) and through the probe, where no check holds on the five paired seeds (measured: 11 unresolved, prob at
    eta 175 resolved below the original encoder)."""
    probe_claim = claims["Qu T6 (probe): adaptive pretraining beats the original encoder"]
    verdicts = [check["verdict"] for check in probe_claim["checks"]]
    assert len(verdicts) == 12 and "holds" not in verdicts and probe_claim["verdict"] == "fails", verdicts


QQP_SEEDS = (0, 1, 2)  # grids/adaptation_qqp.yaml and its unadapted twins in grids/dchi_qqp.yaml


@pytest.mark.parametrize("eta", [60.0, 120.0])
@pytest.mark.parametrize("objective", ["vanilla", "prob", "denoising"])
def test_on_qqp_the_convex_probe_sees_no_adaptation_gain_either(utility, eta, objective):
    """QQP repeats SST-2's finding on the machine-independent figure: at eta 60 and 120 no objective's probe gains
    0.01 on average over the three paired seeds (measured from -0.005 to +0.005)."""
    assert np.mean(gains(utility("utility/probe_accuracy", "qqp"), eta, objective, QQP_SEEDS)) < 0.01


def test_on_qqp_qu_t6_cannot_be_judged_because_our_head_stays_at_the_majority_answer(claims):
    """At the paper's privacy levels (its etas 100-175, matched by inversion accuracy) every adapted row of ours on
    QQP beats the majority answer ("not duplicate", 0.637) by at most 0.02 (measured 0.614-0.656 for the head and the
    probe), so `bench reproduce` marks both QQP claims not applicable on every check rather than order noise.
    The paper's own unadapted encoder sits there too (0.632-0.645); its adapted ones leave it (0.767-0.870)."""
    for name in ("Qu T6 (QQP): adaptive pretraining beats the original encoder",
                 "Qu T6 (QQP, probe): adaptive pretraining beats the original encoder"):
        verdicts = [check["verdict"] for check in claims[name]["checks"]]
        assert len(verdicts) == 12 and set(verdicts) == {"not applicable"}, (name, verdicts)
        assert claims[name]["paper_verdict"] == "holds"


# Text-to-text (Table 7): grids/adaptation_text_sst2.yaml (seeds 0-4) and grids/adaptation_text_qqp.yaml (seeds 0-2),
# the unadapted twins in grids/dchi_text_sst2.yaml and grids/dchi_qqp.yaml.
QQP_MAJORITY = 0.637  # "not duplicate" on the offline QQP dev split (0.634-0.639 by seed)


def test_on_qqp_text_to_text_the_head_gains_at_eta_60_only_up_to_the_majority_answer(utility):
    """At eta 60 the unadapted head sits below the majority answer (0.596), prob and denoising lift it (+0.049 and
    +0.035 over the paired seeds), but no adapted head's mean passes the majority answer by 0.02 (at most 0.645): the
    gain is a head that stops doing worse than answering "not duplicate", not a better model of the pairs."""
    qqp_text_accuracy = utility("utility/accuracy", "qqp", "dchi-text")
    unadapted = np.mean(list(qqp_text_accuracy[(60.0, "")].values()))
    assert unadapted < QQP_MAJORITY - 0.02
    for objective in ("prob", "denoising"):
        assert np.mean(gains(qqp_text_accuracy, 60.0, objective, QQP_SEEDS)) > 0.02, objective
    for objective in ("vanilla", "prob", "denoising"):
        assert np.mean(list(qqp_text_accuracy[(60.0, objective)].values())) < QQP_MAJORITY + 0.02, objective


@pytest.mark.parametrize("eta", [60.0, 120.0])
@pytest.mark.parametrize("objective", ["vanilla", "prob", "denoising"])
def test_on_qqp_text_to_text_the_convex_probe_gains_little(utility, eta, objective):
    """On the machine-independent figure no objective gains 0.015 on average over the three paired seeds (measured
    +0.001 to +0.010), against the paper's +0.039 (Orig 0.724, adapted 0.760-0.763 at its eta 100)."""
    assert np.mean(gains(utility("utility/probe_accuracy", "qqp", "dchi-text"), eta, objective, QQP_SEEDS)) < 0.015


def test_on_qqp_qu_t7_is_not_refuted_but_mostly_unresolved(claims):
    """`bench reproduce qu2021_adaptation` at matched privacy: at the paper's eta 100 every row of ours sits at the
    majority answer (not applicable); above it no check fails, and only a few hold (measured: prob and denoising at
    eta 125 for the head, prob at eta 125 for the probe); the rest straddle 0 over three seeds."""
    mapped = {claim["id"]: claim for claim in load_mapping(RESULTS, "qu2021_adaptation")["claims"]}
    for name in ("Qu T7 (QQP): adaptive pretraining beats the original encoder",
                 "Qu T7 (QQP, probe): adaptive pretraining beats the original encoder"):
        checks = claims[name]["checks"]
        assert len(checks) == 12 and claims[name]["paper_verdict"] == "holds"
        assert "fails" not in {check["verdict"] for check in checks}, name
        rows = [check["left"] for check in mapped[name]["checks"]]  # the report's checks, in this order
        at_eta_100 = [check["verdict"] for row, check in zip(rows, checks) if row.endswith(" eta 100")]
        assert at_eta_100 == ["not applicable"] * 3, (name, at_eta_100)
        assert claims[name]["verdict"] == "unresolved", name


TEXT_SEEDS = SEEDS  # grids/adaptation_text_sst2.yaml: seeds 0-2 on 2026-11-26 (Zen 3), 3-4 on 2026-11-28 (Zen 5)


@pytest.mark.parametrize("objective", ["vanilla", "prob", "denoising"])
def test_text_to_text_adaptation_lacks_the_token_gain_at_eta_60(accuracy, utility, objective):
    """Nearest-token text is already made of vocabulary tokens, so the adapted encoder has little to learn: at eta 60
    no objective's head gains 0.01 on average over the five paired seeds (measured -0.000 to +0.003), where denoising
    on token representations gains more than 0.02 (+0.025)."""
    assert np.mean(gains(utility("utility/accuracy", "sst2", "dchi-text"), 60.0, objective, TEXT_SEEDS)) < 0.01
    assert np.mean(gains(accuracy, 60.0, "denoising")) > 0.02


@pytest.mark.parametrize("eta", [60.0, 120.0])
@pytest.mark.parametrize("objective", ["vanilla", "prob", "denoising"])
def test_text_to_text_the_convex_probe_sees_no_adaptation_gain(utility, eta, objective):
    """The probe gains less than 0.015 on average over the five seeds (measured -0.015 to +0.008)."""
    assert np.mean(gains(utility("utility/probe_accuracy", "sst2", "dchi-text"), eta, objective, TEXT_SEEDS)) < 0.015


def test_qu_t7_on_sst2_is_unresolved_not_refuted(claims):
    """At matched privacy (the paper's etas 100-175) no check of Qu T7 on SST-2 fails, through the head or the probe;
    the head's claim holds on one check (prob at eta 175) and the probe's on none (every paired interval over the five
    seeds straddles 0), as the paper finds the SST-2 gain not significant either."""
    head = [check["verdict"] for check in claims["Qu T7: adaptive pretraining beats the original encoder"]["checks"]]
    probe = [check["verdict"] for check in
             claims["Qu T7 (probe): adaptive pretraining beats the original encoder"]["checks"]]
    assert len(head) == len(probe) == 12
    assert "fails" not in head and "fails" not in probe, (head, probe)
    assert set(probe) == {"unresolved"} and head.count("holds") <= 2, (head, probe)
