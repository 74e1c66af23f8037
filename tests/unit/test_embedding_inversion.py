"""Embedding inversion: it recovers the words of undefended representations, falls to its frequency reference as
d_chi noise grows, reads what a sign mask leaves, and refuses an inversion budget of 0."""

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from bench.attacks.embedding_inversion import Channel, EmbeddingInversion, word_scores
from bench.cli.main import app
from bench.core.components import PublicKnowledge, Truth
from bench.core.releases import Release, ReleaseKind
from bench.models.encoders import MockEncoder
from bench.privacy.mechanisms import dchi_noise
from bench.privacy.public import DchiSentenceNoise, IdentityRepresentation, MixAndMask
from tests.conftest import files_under

ATTACKED = 150


@pytest.fixture(scope="module")
def corpus():
    """Sentences over 200 words of skewed frequencies; the attacked ones are drawn apart from the public ones."""
    rng = np.random.default_rng(0)
    lexicon = [f"w{i}" for i in range(200)]
    p = 1 / np.sqrt(np.arange(1, 201))
    p /= p.sum()

    def sentence():
        return " ".join(["the", *rng.choice(lexicon, size=rng.integers(4, 9), p=p), "of"])

    public, attacked = [sentence() for _ in range(2000)], [sentence() for _ in range(ATTACKED)]
    encoder = MockEncoder(64)  # a bag of seeded word vectors: the words are in the representation
    knowledge = PublicKnowledge(encoder, "synthetic", frozenset({"public"}), public_texts=public)
    truth = Truth(attacked, np.zeros(ATTACKED), np.zeros(0))
    return encoder.encode(attacked), knowledge, truth


def invert(corpus, mechanism, released):
    reps, knowledge, truth = corpus
    attack = EmbeddingInversion(hidden=256, epochs=15, vocabulary=400, batch_size=32)
    release = Release(ReleaseKind.SENTENCE_EMBEDDINGS, released, np.arange(ATTACKED), mechanism=mechanism)
    found = attack.score(attack.attack(release, knowledge), truth, knowledge)
    reference = attack.score(attack.random_guess(release, knowledge, np.random.default_rng(0)), truth, knowledge)
    return found, reference


def test_word_scores_known_answer():
    """Row 1: 2 of 4 guessed, 2 of 2 true; row 2: nothing right; a row without true words is left out."""
    p, r, f = word_scores([["a", "b", "c", "d"], ["x"], ["y"]], [{"a", "b"}, {"z"}, set()])
    assert (p, r) == (0.25, 0.5) and f == pytest.approx((2 * 0.5 * 1 / 1.5) / 2)


def test_recovers_most_words_and_falls_to_its_reference_with_noise(corpus):
    reps = corpus[0]
    found, reference = invert(corpus, IdentityRepresentation(), reps)
    assert found["recall"] > 0.6 and found["recall_all"] > 0.7  # most words of the attacked sentences
    assert found["f1"] > 2 * reference["f1"] and found["f1_all"] > reference["f1_all"] + 0.3
    by_eta = {}
    for eta in (30.0, 1.0):  # mean noise radius 2 and 64, against representations of norm about 3
        noisy = reps + dchi_noise(ATTACKED, reps.shape[1], eta, np.random.default_rng(1))
        by_eta[eta] = invert(corpus, DchiSentenceNoise(eta), noisy)[0]
    assert found["f1"] > by_eta[30.0]["f1"] > by_eta[1.0]["f1"]
    assert abs(by_eta[1.0]["f1"] - reference["f1"]) < 0.05 and abs(by_eta[1.0]["f1_all"] - reference["f1_all"]) < 0.05


def test_a_sign_mask_leaves_absolute_values_which_the_model_reads():
    """Unmixed (k = 1) and masked by the adversary's own pool: the model's view is |e|, whatever the mask."""
    reps = torch.randn(32, 16)
    channel = Channel(MixAndMask(m=8, k=1), 16, seed=0)
    view, _ = channel(reps, torch.arange(32), torch.Generator().manual_seed(1))
    assert torch.equal(view, reps.abs()) and torch.equal(channel.view(-reps), reps.abs())
    mixed, _ = Channel(MixAndMask(m=0, k=4), 16, seed=0)(reps, torch.arange(32), torch.Generator().manual_seed(1))
    assert not torch.allclose(mixed, reps) and (mixed < 0).any()  # mixed, unmasked: signed mixtures


@pytest.mark.parametrize("budget", ["epochs=0", "hidden=0", "vocabulary=0", "public_size=0"])
def test_an_inversion_budget_of_0_exits_2_with_one_sentence(tiny_data, results, budget):
    result = CliRunner().invoke(app, ["run", "--defense", "none", "--attack", "embedding-inversion", "--encoder",
                                      "mock", "--attack-args", budget])
    assert result.exit_code == 2
    assert "embedding-inversion" in result.stderr and "must be >= 1" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert files_under(results) == []
