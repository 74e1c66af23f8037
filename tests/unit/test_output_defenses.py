"""Output defenses of a prediction API (softening, perturbation, reverse sigmoid, most-least, nasty teacher), the
aia attack's scoring, and bad input refused before a cell runs (one sentence, exit code 2).

The math is checked against values worked by hand; the nasty teacher on a small synthetic problem (frozen
"features" drawn at random, labels from a linear rule).
"""

import math

import numpy as np
import pytest
from typer.testing import CliRunner

from bench import BenchError
from bench.cli.main import app
from bench.privacy.outputs import gaussian_perturbation, most_least, reverse_sigmoid, softmax

LOGITS = np.array([[0.0, math.log(3.0)], [2.0, -1.0]])


def test_softening_is_the_tempered_softmax():
    from bench.defenses.softening import Softening

    plain = Softening(tau=1.0).answer(LOGITS, np.random.default_rng(0))
    assert np.allclose(plain[0], [0.25, 0.75])
    soft = Softening(tau=2.0).answer(LOGITS, np.random.default_rng(0))
    root = math.sqrt(3.0)  # softmax([0, ln 3 / 2]) = [1, sqrt 3] / (1 + sqrt 3)
    assert np.allclose(soft[0], [1 / (1 + root), root / (1 + root)])
    assert np.allclose(soft.sum(axis=1), 1.0)
    assert (soft.argmax(axis=1) == LOGITS.argmax(axis=1)).all()
    assert soft[0, 1] < plain[0, 1]  # tau > 1 flattens


def test_perturbation_adds_clipped_renormalised_gaussian_noise():
    from bench.defenses.perturbation import PredictionPerturbation

    p = softmax(LOGITS)
    assert np.allclose(gaussian_perturbation(p, 0.0, np.random.default_rng(0)), p)
    noise = np.random.default_rng(7).standard_normal(p.shape)
    expected = np.clip(p + 0.2 * noise, 0, 1)
    expected /= expected.sum(axis=1, keepdims=True)
    answer = PredictionPerturbation(sigma=0.2).answer(LOGITS, np.random.default_rng(7))
    assert np.allclose(answer, expected)
    assert (answer >= 0).all() and np.allclose(answer.sum(axis=1), 1.0)
    huge = gaussian_perturbation(p, 50.0, np.random.default_rng(1))
    assert (huge >= 0).all() and np.allclose(huge.sum(axis=1), 1.0)  # all-zero rows answer uniform


def test_reverse_sigmoid_by_hand():
    # y = 0.9: logit ln 9, gamma 0.5 -> ln 3, sigmoid 0.75, minus beta * 0.25 = 0.125 -> 0.775; y = 0.1 -> 0.225
    out = reverse_sigmoid(np.array([[0.9, 0.1]]), beta=0.5, gamma=0.5)
    assert np.allclose(out, [[0.775, 0.225]])
    p = softmax(np.array([[1.0, 0.2, -0.5]]))
    assert np.allclose(reverse_sigmoid(p, beta=0.0, gamma=1.0), p)
    big = reverse_sigmoid(np.array([[0.98, 0.01, 0.01]]), beta=3.0, gamma=1.0)
    assert (big >= 0).all() and np.allclose(big.sum(), 1.0)


def test_most_least_keeps_only_the_extremes_and_the_argmax():
    out = most_least(np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]), 0.1)
    assert np.allclose(out, [[0.4, 0.6, 0.0], [0.4, 0.0, 0.6]])
    uniform = most_least(np.full((1, 4), 0.25), 0.2)
    assert np.allclose(uniform, [[0.7, 0.3, 0.0, 0.0]])
    logits = np.random.default_rng(0).standard_normal((50, 4))
    from bench.defenses.most_least import MostLeast

    answer = MostLeast(eps=0.05).answer(logits, np.random.default_rng(0))
    assert (answer.argmax(axis=1) == logits.argmax(axis=1)).all() and np.allclose(answer.sum(axis=1), 1.0)


def test_nasty_teacher_keeps_accuracy_and_moves_away_from_a_normal_network():
    from bench.models.api import logits_of, train_victim
    from bench.models.training import TrainingConfig
    from bench.privacy.public import SelfUndermining

    rng = np.random.default_rng(0)
    x = rng.standard_normal((240, 16)).astype(np.float32)
    y = (x[:, :3] @ np.array([1.0, -1.0, 0.5]) > 0).astype(int) + (x[:, 3] > 1).astype(int)
    config = TrainingConfig(epochs=30, lr=3e-3, batch_size=32, head_layers=1)
    plain, _ = train_victim(x, y, 3, config, seed=0)
    nasty, facts = train_victim(x, y, 3, config, seed=0, objective=SelfUndermining(tau=4.0, omega=0.05))
    _, neutral_facts = train_victim(x, y, 3, config, seed=0, objective=SelfUndermining(tau=4.0, omega=0.0))
    plain_acc = np.mean(logits_of(plain, x).argmax(axis=1) == y)
    nasty_acc = np.mean(logits_of(nasty, x).argmax(axis=1) == y)
    assert nasty_acc >= plain_acc - 0.05 and nasty_acc > 0.8
    # the KL term pushes the victim's tempered answers away from the normal network's (measured: 8.9e-5 against
    # 4.9e-5 at omega 0; a large omega such as 2 collapses the victim's accuracy, so the weight must stay small)
    assert facts["nasty_kl_from_adversary"] > 1.5 * neutral_facts["nasty_kl_from_adversary"]


@pytest.mark.parametrize("cls, args, message", [
    ("bench.defenses.softening.Softening", {"tau": 0.0}, "tau must be > 0"),
    ("bench.defenses.softening.Softening", {"tau": -1.0}, "tau must be > 0"),
    ("bench.defenses.perturbation.PredictionPerturbation", {"sigma": -0.1}, "sigma must be >= 0"),
    ("bench.defenses.most_least.MostLeast", {"eps": 0.0}, r"eps must lie in \(0, 0.5\)"),
    ("bench.defenses.most_least.MostLeast", {"eps": 0.5}, r"eps must lie in \(0, 0.5\)"),
    ("bench.defenses.reverse_sigmoid.ReverseSigmoid", {"gamma": 0.0}, "gamma must be > 0"),
    ("bench.defenses.nasty_teacher.NastyTeacher", {"omega": -1.0}, "omega must be >= 0"),
])
def test_bad_parameters_are_refused(cls, args, message):
    import importlib

    module, name = cls.rsplit(".", 1)
    with pytest.raises(BenchError, match=message):
        getattr(importlib.import_module(module), name)(**args)


@pytest.mark.parametrize("args, message", [
    (["--defense", "softening", "--defense-args", "tau=0"], "tau must be > 0"),
    (["--defense", "perturbation", "--defense-args", "sigma=-1"], "sigma must be >= 0"),
    (["--defense", "most-least", "--defense-args", "eps=0.7"], "eps must lie in (0, 0.5)"),
    (["--defense", "none", "--attack-args", "budget=0"], "a budget of 0 queries extracts nothing"),
    (["--defense", "none", "--attack-args", "attributes=race"], "has no attribute 'race'"),
])
def test_bad_input_is_one_sentence_and_exit_code_2(args, message, tmp_path):
    result = CliRunner().invoke(app, ["run", "--task", "trustpilot", "--attack", "aia", *args,
                                      "--results-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert message in text and not (tmp_path / "records").exists()
    assert "Traceback" not in result.output


def test_prediction_attacks_need_an_api_task():
    from bench.engine.runner import make_spec

    with pytest.raises(BenchError, match="prediction-API attacks need a task that serves one"):
        make_spec(task="sst2", defense="none", attack="aia", encoder="minilm")
    with pytest.raises(BenchError, match="cannot be paired"):
        make_spec(task="trustpilot", defense="most-least", attack="rss", encoder="minilm")


def test_aia_scores_per_attribute_and_table4_as_he_et_al():
    from types import SimpleNamespace

    from bench.attacks.aia import AttributeInference

    truth = SimpleNamespace(attributes={"gender": np.array([1, 1, 0, 0]), "age": np.array([0, 0, 0, 1])})
    attack = AttributeInference()
    scores = attack.score({"gender": np.array([1, 0, 0, 0]), "age": np.array([0, 0, 0, 0])}, truth, None)
    assert scores["gender_accuracy"] == 0.75 and scores["age_accuracy"] == 0.75
    assert scores["gender_majority"] == 0.5 and scores["age_majority"] == 0.75
    assert scores["accuracy"] == 0.75 and scores["table4"] == pytest.approx(25.0)
    # positives: gender 2 (1 found), age 1 (none found) -> precision 1, recall 1/3, micro F1 0.5
    assert scores["micro_f1"] == pytest.approx(0.5)
    attack.measure = "micro_f1"  # AG News: He et al. report F1 on the sparse person attributes
    assert attack.score({"gender": np.array([1, 0, 0, 0]), "age": np.array([0, 0, 0, 0])}, truth,
                        None)["table4"] == pytest.approx(50.0)


def test_attribute_splits_are_disjoint_and_agnews_shares_its_leftovers(monkeypatch):
    """Five disjoint blocks of one permutation; on AG News (sparse person attributes) the examples the blocks
    leave go half to the auxiliary and half to the attribute evaluation split."""
    from bench.tasks.attributes import AGNews, Trustpilot

    n = 100
    pool = (tuple(f"text {i}" for i in range(n)), np.arange(n) % 4, {"person1": (np.arange(n) % 7 == 0).astype(int)},
            {})
    for cls, rest in ((Trustpilot, False), (AGNews, True)):
        monkeypatch.setattr(cls, "pool", lambda self: pool)
        data = cls().load(10, 5, 0)
        splits = [data.train, data.queries, data.auxiliary, data.attribute_eval, data.eval]
        seen = [set(split.texts) for split in splits]
        assert sum(map(len, seen)) == len(set().union(*seen))  # disjoint
        assert [len(s) for s in splits] == ([10, 10, 10 + 30, 5 + 30, 5] if rest else [10, 10, 10, 5, 5])
        for name in ("auxiliary", "attribute_eval"):  # attributes follow their examples
            texts, flags = getattr(data, name).texts, data.attributes[name]["person1"]
            assert [int(t.split()[1]) % 7 == 0 for t in texts] == [bool(f) for f in flags]


def test_blog_splits_by_author(monkeypatch, tmp_path):
    """No Blog author has posts in two splits (an author's posts in the auxiliary and the evaluation sets let the
    attacker recognise the author instead of inferring the attribute); every split still has every industry."""
    from bench.tasks.attributes import BLOG_INDUSTRIES, Blog

    folder = tmp_path / "aia" / "blog"
    folder.mkdir(parents=True)
    for author in range(30):  # six authors per industry, 20 posts each (600 posts)
        gender, age, industry = ("male", "female")[author % 2], (15, 25, 35)[author % 3], BLOG_INDUSTRIES[author % 5]
        posts = "".join(f"<post>author{author} writes post number {post} today</post>" for post in range(20))
        (folder / f"{1000 + author}.{gender}.{age}.{industry}.Leo.xml").write_text(f"<Blog>{posts}</Blog>")
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    for seed in range(3):
        data = Blog().load(40, 20, seed)
        splits = [data.train, data.queries, data.auxiliary, data.attribute_eval, data.eval]
        assert [len(s.texts) for s in splits] == [40, 40, 40, 20, 20]
        authors = [{text.split()[0] for text in split.texts} for split in splits]
        assert sum(map(len, authors)) == len(set().union(*authors)), f"seed {seed}: an author is in two splits"
        assert all(set(split.labels) == set(range(5)) for split in splits)  # every industry in every split
        for name, split in zip(("train", "auxiliary", "attribute_eval"), (data.train, data.auxiliary,
                                                                          data.attribute_eval)):
            ids = [int(text.split()[0][len("author"):]) for text in split.texts]  # attributes follow their posts
            assert list(data.attributes[name]["gender"]) == [int(i % 2 == 0) for i in ids]
            assert list(data.attributes[name]["age"]) == [i % 3 for i in ids]


def test_aia_micro_f1_leaves_out_a_three_class_attribute_whose_targets_hold_two_classes():
    """Blog's age group has three classes; split by author, an attacked set may hold two of them (crashed scoring);
    with one binary attribute left, micro F1 is still its positive class's F1 (not the accuracy)."""
    from types import SimpleNamespace

    from bench.attacks.aia import AttributeInference

    truth = SimpleNamespace(attributes={"gender": np.array([1, 1, 0, 0]), "age": np.array([0, 1, 0, 1])})
    attack = AttributeInference()
    attack.classes = {"gender": {0, 1}, "age": {0, 1, 2}}  # as the auxiliary set holds them
    for age_guess in ([0, 2, 0, 1], [0, 1, 1, 1]):  # a guess of the third class, or none
        scores = attack.score({"gender": np.array([1, 0, 0, 0]), "age": np.array(age_guess)}, truth, None)
        assert scores["micro_f1"] == pytest.approx(2 / 3)  # gender alone: precision 1, recall 1/2
