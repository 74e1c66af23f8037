"""Membership inference: LiRA and LOSS against heads that memorise or do not, the ROC figures and the ε bound."""

from __future__ import annotations

import numpy as np
import pytest

from bench import BenchError
from bench.attacks.membership import Membership, epsilon_lower_bound, logit_confidence, one_run_epsilon, roc_figures
from bench.core.components import Truth
from bench.core.releases import Release, ReleaseKind, ServerModel

DIM, CLASSES, TRAIN = 16, 2, 100


def _features(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)


def _fit(x: np.ndarray, y: np.ndarray, seed: int, noise: float, epochs: int = 200):
    """A tiny MLP head trained full-batch with Adam; ``noise``: Gaussian noise added to every gradient."""
    import torch

    torch.manual_seed(seed)
    head = torch.nn.Sequential(torch.nn.Linear(DIM, 64), torch.nn.ReLU(), torch.nn.Linear(64, CLASSES))
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        loss = torch.nn.functional.cross_entropy(head(xs), ys)
        optimizer.zero_grad()
        loss.backward()
        for p in head.parameters():
            p.grad += noise * torch.randn(p.shape, generator=generator)
        optimizer.step()
    return head.eval()


def _release(noise: float) -> tuple[Release, Truth]:
    """A server trained on random labels (only memorising helps), and 100 members + 100 non-members."""
    import torch

    rng = np.random.default_rng(0)
    pool = _features(2000, 1)  # text "i" is row i: candidates 0..199, public 200..
    labels = rng.integers(0, CLASSES, len(pool))
    members = np.zeros(200, bool)
    members[rng.permutation(200)[:TRAIN]] = True
    texts = [str(i) for i in range(len(pool))]

    def pipeline(head):
        def query(items, item_labels, generator):
            with torch.inference_mode():
                logits = head(torch.from_numpy(pool[[int(t) for t in items]])).numpy()
            return logits, np.asarray(item_labels), np.arange(len(items))
        return query

    def shadow(items, item_labels, seed):
        return pipeline(_fit(pool[[int(t) for t in items]], np.asarray(item_labels), seed, noise))

    target = _fit(pool[:200][members], labels[:200][members], 99, noise)
    truth = Truth(texts[:200], labels[:200], np.zeros(0), members=members)

    def audit(items, item_labels):  # as the engine: the server's training set plus each canary w.p. 1/2
        truth.canaries = np.random.default_rng(5).random(len(items)) < 0.5
        rows = np.r_[np.flatnonzero(members), [int(t) for t, kept in zip(items, truth.canaries) if kept]]
        row_labels = np.r_[labels[:200][members], np.asarray(item_labels)[truth.canaries]]
        return pipeline(_fit(pool[rows], row_labels, 99, noise))

    data = ServerModel(tuple(texts[:200]), labels[:200], CLASSES, (tuple(texts[200:]), labels[200:]), TRAIN,
                       pipeline(target), shadow, target, "rows of a feature table", audit)
    return Release(ReleaseKind.MODEL, data, owners=np.arange(200), split="membership"), truth


def _scores(method: str, noise: float, shadows: int = 16, **args) -> tuple[dict, dict]:
    release, truth = _release(noise)
    attack = Membership(method=method, shadows=shadows, **args)
    found = attack.score(attack.attack(release, None), truth, None)
    reference = attack.score(attack.random_guess(release, None, np.random.default_rng(1)), truth, None)
    return found, reference


def _one_run_ceiling(guesses: int = 20, confidence: float = 0.95) -> float:  # every guess correct
    p = (1 - confidence) ** (1 / guesses)
    return float(np.log(p / (1 - p)))


def test_lira_finds_the_members_of_a_head_that_memorises():
    # the audit guesses "out" only: an unseen mislabelled canary fits by chance half the time, so a low loss says
    # little, while a high loss says "not trained on" (the members' losses are all near 0)
    found, reference = _scores("lira-online", noise=0.0, audit_in=0, audit_out=20)
    assert found["auc"] > 0.9 and found["tpr_at_fpr_1pct"] > 0.3, found
    assert found["epsilon_lower"] > 1.0, found
    assert reference["tpr_at_fpr_1pct"] < 0.1 and abs(reference["auc"] - 0.5) < 0.15, reference
    # the one-run audit: mislabelled canaries a memorising head fits are told apart in one extra training run
    assert 1.0 < found["epsilon_one_run"] <= _one_run_ceiling() + 1e-9, found
    assert reference["epsilon_one_run"] < 1.0, reference


def test_offline_lira_needs_no_shadow_holding_a_candidate_and_still_separates():
    found, reference = _scores("lira-offline", noise=0.0, shadows=8)
    assert found["auc"] > 0.75 and found["advantage"] > 0.4, found  # weaker than online at low FPR, as in the paper
    assert found["advantage"] > reference["advantage"] + 0.3, (found, reference)


def test_lira_falls_to_the_reference_on_a_head_trained_with_strong_noise():
    found, reference = _scores("lira-online", noise=30.0, audit_in=0, audit_out=20)
    assert abs(found["auc"] - 0.5) < 0.15 and found["tpr_at_fpr_1pct"] < 0.1, found
    assert found["epsilon_lower"] < 0.5 and found["epsilon_one_run"] < 1.0, found


def test_loss_attack_ranks_members_of_a_memorising_head_first():
    found, _ = _scores("loss", noise=0.0)
    assert found["auc"] > 0.8 and found["advantage"] > 0.5, found


def test_logit_confidence_is_the_log_odds_of_the_true_label():
    logits = np.array([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]])
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    expected = np.log(p[[0, 1], [0, 2]] / (1 - p[[0, 1], [0, 2]]))
    assert np.allclose(logit_confidence(logits, np.array([0, 2])), expected)


def _perfect_bound(positives: int, negatives: int, delta: float, confidence: float = 0.95) -> float:
    alpha = 1 - confidence
    tpr_low, fpr_high = (alpha / 2) ** (1 / positives), 1 - (alpha / 2) ** (1 / negatives)
    return float(np.log((tpr_low - delta) / fpr_high))


@pytest.mark.parametrize("delta", [0.0, 0.01])
def test_epsilon_bound_lies_between_zero_and_perfect_separation(delta):
    members = np.r_[np.ones(100, bool), np.zeros(100, bool)]
    perfect = roc_figures(members, np.r_[np.ones(100), np.zeros(100)], delta, 0.95)
    assert perfect["epsilon_lower"] == pytest.approx(_perfect_bound(100, 100, delta))
    assert perfect["auc"] == 1.0 and perfect["tpr_at_fpr_0_1pct"] == 1.0 and perfect["advantage"] == 1.0
    rng = np.random.default_rng(0)
    for trial in range(20):
        scores = rng.random(200) + rng.random() * members
        eps = roc_figures(members, scores, delta, 0.95)["epsilon_lower"]
        assert 0.0 <= eps <= _perfect_bound(100, 100, delta) + 1e-12
    inverted = roc_figures(members, np.r_[np.zeros(100), np.ones(100)], delta, 0.95)
    assert inverted["auc"] == 0.0 and inverted["advantage"] == 0.0
    # the error-swapped form certifies the same ε for a perfectly inverted test read the other way
    assert epsilon_lower_bound(np.array([0.0, 1.0]), np.array([0.0, 1.0]), 100, 100, delta, 0.95) == 0.0


def test_one_run_bound_reads_the_guesses_and_stays_in_range():
    included = np.r_[np.ones(50, bool), np.zeros(50, bool)]
    perfect = one_run_epsilon(included, included.astype(float), 10, 10, 0.95)
    assert perfect == pytest.approx(_one_run_ceiling())
    assert one_run_epsilon(included, included.astype(float), 0, 20, 0.95) == pytest.approx(perfect)
    assert one_run_epsilon(included, -included.astype(float), 10, 10, 0.95) == 0.0  # every guess wrong
    rng = np.random.default_rng(0)
    assert all(0.0 <= one_run_epsilon(included, rng.random(100), 10, 10, 0.95) <= perfect for _ in range(50))


@pytest.mark.parametrize("args,message", [
    ({"canaries": -1}, "canaries must be >= 0"),
    ({"audit_in": 0, "audit_out": 0}, "guess at least once"),
    ({"method": "lira"}, "method must be one of"),
    ({"shadows": 1}, "shadows must be >= 2"),
    ({"delta": 1.5}, "delta must lie in"),
    ({"confidence": 1.0}, "confidence must lie in"),
])
def test_bad_arguments_are_one_sentence(args, message):
    with pytest.raises(BenchError, match=message):
        Membership(**args)


@pytest.mark.parametrize("task,message", [
    ("ptb", "declares no held-out non-members"),
    ("trustpilot", "declares no held-out non-members"),
    ("clinical-deid", "declares no held-out non-members"),
    ("stsb", "is a regression"),
])
def test_membership_needs_a_task_with_non_members(task, message):
    from bench.engine.runner import make_spec

    with pytest.raises(BenchError, match=message):
        make_spec(task=task, defense="none", attack="membership", encoder="mock")


def test_membership_on_a_task_without_non_members_exits_2():
    from typer.testing import CliRunner

    from bench.cli.main import app

    result = CliRunner().invoke(app, ["run", "--task", "ptb", "--attack", "membership", "--encoder", "mock"])
    assert result.exit_code == 2 and "declares no held-out non-members" in result.output
    assert "Traceback" not in result.output


def test_candidates_are_half_training_examples_and_half_held_out_of_the_same_file(tiny_data):
    from bench.core.registry import TASKS
    from bench.engine.membership import membership_candidates

    task = TASKS.get("sst2")()
    data = task.load(60, 30, seed=3)
    candidates, members, public = membership_candidates(task, data, seed=3)
    texts = list(candidates.texts)
    assert len(texts) == 60 and members.sum() == 30 and 0 < members[:30].sum() < 30  # shuffled together
    train, evaluation = set(data.train.texts), set(data.eval.texts)
    assert all((t in train) == m for t, m in zip(texts, members))
    assert not (set(texts) - train) & evaluation  # non-members come from the training file, not the dev set
    assert not set(public.texts) & (train | evaluation | set(texts))
    assert len(public) >= 60
    assert task.membership_pools(task.load(380, 30, seed=3), 3) is None  # no room past the run's sample


@pytest.mark.parametrize("defense", ["none", "texthide"])
def test_a_cell_attacks_the_trained_servers_model(tiny_data, defense):
    from bench.engine.runner import make_spec, run_cell

    spec = make_spec(task="sst2", defense=defense, attack="membership", encoder="mock", n_train=60, n_eval=30,
                     attack_args="shadows=4", training_args="epochs=5", defense_args="m=4,k=2" * (defense != "none"))
    record = run_cell(spec)
    m, notes = record.metrics, record.notes
    assert notes["membership_candidates"] == 60 and notes["membership_shadows"] == 4 and notes["attacked_rows"] == 60
    assert notes["membership_delta"] == pytest.approx(1 / 60) and notes["membership_canaries"] == 100
    assert m["privacy/membership/epsilon_one_run"] >= 0 and m["random/membership/epsilon_one_run"] >= 0
    for prefix in ("privacy", "random"):
        assert 0 <= m[f"{prefix}/membership/auc"] <= 1 and m[f"{prefix}/membership/epsilon_lower"] >= 0
    assert "utility/accuracy" in m


def test_a_shadow_reruns_the_cell_with_its_own_secrets(tiny_data):
    from bench.engine.cell import run_defense
    from bench.engine.runner import make_spec

    spec = make_spec(task="sst2", defense="texthide", attack="membership", encoder="mock", n_train=60, n_eval=30,
                     defense_args="m=4,k=2", training_args="epochs=3")
    context, output, kind, _ = run_defense(spec)
    data = output.release(kind).data
    texts = list(data.candidates)
    rng = np.random.default_rng(0)
    target, labels, owners = data.query(texts, data.labels, rng)
    shadow = data.shadow(texts[:40], data.labels[:40], 7)
    assert target.shape == shadow(texts, data.labels, rng)[0].shape == (60, 2)
    assert (labels == data.labels).all() and (owners == np.arange(60)).all()
    assert not np.allclose(target, shadow(texts, data.labels, rng)[0])
    assert output.membership.members.sum() == 30  # the truth stays with the engine
    assert not hasattr(data, "members")
    audited = data.audit(texts[:10], data.labels[:10])  # the one-run audit: the engine draws and keeps inclusion
    assert audited(texts, data.labels, rng)[0].shape == (60, 2)
    assert output.membership.canaries.shape == (10,) and output.membership.canaries.dtype == bool


def test_bench_list_pairs_membership_with_trained_servers_and_the_clinical_attacks_with_mlms_only():
    from bench.cli.commands.listing import pairing_tasks
    from bench.core.registry import ATTACKS, DEFENSES

    membership, names = ATTACKS.get("membership"), ATTACKS.get("name-generation")
    assert "sst2" in pairing_tasks(DEFENSES.get("texthide"), membership)
    assert "conll2003" in pairing_tasks(DEFENSES.get("ndd"), membership)
    assert not {"ptb", "clinical-deid", "stsb"} & set(pairing_tasks(DEFENSES.get("none"), membership))
    assert pairing_tasks(DEFENSES.get("dchi-token"), names) == []
    assert set(pairing_tasks(DEFENSES.get("none"), names)) <= {"clinical-deid", "clinical-spl", "mimic-deid",
                                                                 "mimic-spl"}
