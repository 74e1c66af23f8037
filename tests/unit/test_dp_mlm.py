"""DP-MLM: draws follow the exponential mechanism over the MLM's clipped logits; eps moves them from the MLM's argmax
to uniform; seeded; the composition is recorded; bad input is one sentence and exit code 2."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core.errors import BenchError
from bench.core.registry import load_plugin
from tests.conftest import files_under
from tests.unit.tiny_models import tiny_masked_lm

DP_MLM = sys.modules[load_plugin(Path(__file__).resolve().parent / "../../defenses/dp_mlm.py")]
SENTENCE = np.array([2023, 3185, 2001, 1037, 2200, 2204, 2143])  # "this movie was a very good film"


class Space:
    """A bare token space: the MLM's regular tokens, no encoder (ids are the MLM's)."""

    def __init__(self, mlm):
        self.candidates = np.asarray(mlm.regular)


@pytest.fixture(scope="module")
def tiny():
    return tiny_masked_lm()


def mechanism(tiny, eps, low=-1e3, high=1e3):
    found = DP_MLM.MaskedLMExponential(eps, "tiny", low, high)
    found.model = tiny
    return found


def law(tiny, ids, position, eps, low, high):
    """Pr[y] at ``position`` from the equation: softmax(eps · clip(u) / (2 Delta)) over the regular tokens."""
    logits = DP_MLM.masked_logits(tiny, [ids], [position])[0].double()
    utility = logits[torch.as_tensor(tiny.regular)].clamp(low, high)
    return torch.softmax(utility * eps / (2 * (high - low)), dim=0).numpy()


def test_draws_follow_the_equation(tiny):
    one, draws, low, high = SENTENCE[3:4], 4000, -3.0, 3.0
    logits = DP_MLM.masked_logits(tiny, [one], [0])[0].double()[torch.as_tensor(tiny.regular)]
    high = float(logits.max()) - 0.5  # the top token is clipped, and ties with every token above high
    low = high - 6.0
    eps = next(e for e in (1, 2, 4, 8, 16, 32, 64, 128) if law(tiny, one, 0, e, low, high).max() > 0.01)
    expected = law(tiny, one, 0, eps, low, high)
    released = mechanism(tiny, eps, low, high).privatize([one] * draws, Space(tiny), np.random.default_rng(0))
    drawn = np.array([x[0] for x in released])
    top = np.argsort(expected)[::-1][:5]
    assert expected[top[0]] > 0.01  # the test can see the law's shape
    for index in top:
        token = tiny.regular[index]
        observed = np.mean(drawn == token)
        bound = 5 * np.sqrt(expected[index] * (1 - expected[index]) / draws)
        assert abs(observed - expected[index]) < bound, (token, observed, expected[index])


def test_large_eps_draws_the_argmax_of_the_clipped_logits(tiny):
    released = mechanism(tiny, 1e6).privatize([SENTENCE], Space(tiny), np.random.default_rng(1))[0]
    logits = DP_MLM.masked_logits(tiny, [SENTENCE] * len(SENTENCE), list(range(len(SENTENCE))))
    argmax = np.asarray(tiny.regular)[logits[:, torch.as_tensor(tiny.regular)].argmax(dim=1).numpy()]
    assert np.array_equal(released, argmax)


def test_tiny_eps_draws_nearly_uniformly_over_the_vocabulary(tiny):
    draws = 3000
    released = mechanism(tiny, 1e-6).privatize([SENTENCE[3:4]] * draws, Space(tiny), np.random.default_rng(2))
    drawn = np.array([x[0] for x in released])
    size = len(tiny.regular)
    distinct = len(np.unique(drawn))
    expected = size * (1 - (1 - 1 / size) ** draws)  # distinct tokens among uniform draws
    assert distinct > expected - 5 * np.sqrt(expected) and np.bincount(drawn).max() <= 4
    narrower = mechanism(tiny, 1e5).privatize([SENTENCE[3:4]] * draws, Space(tiny), np.random.default_rng(2))
    assert len(np.unique([x[0] for x in narrower])) < distinct / 2  # a larger eps concentrates the draws


def test_same_seed_same_release_and_the_composition_is_recorded(tiny):
    ids = [SENTENCE, SENTENCE[:3], np.zeros(0, dtype=np.int64)]
    first = mechanism(tiny, 30.0, -2.0, 2.0)
    a = first.privatize(ids, Space(tiny), np.random.default_rng(5))
    b = mechanism(tiny, 30.0, -2.0, 2.0).privatize(ids, Space(tiny), np.random.default_rng(5))
    c = mechanism(tiny, 30.0, -2.0, 2.0).privatize(ids, Space(tiny), np.random.default_rng(6))
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) and [len(x) for x in a] == [7, 3, 0]
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    facts = first.facts()
    assert facts["dp_mlm_sentence_eps_max"] == 7 * 30.0 and facts["dp_mlm_sentence_eps_mean"] == 5 * 30.0
    assert facts["dp_mlm_sensitivity"] == 4.0 and facts["dp_mlm_tokens"] == 10


def test_the_mlm_reads_the_sentence_then_its_masked_copy(tiny):
    row, types, at = DP_MLM.pair_input(tiny.tokenizer, SENTENCE, 2, 512)
    cls, sep, mask = tiny.tokenizer.cls_token_id, tiny.tokenizer.sep_token_id, tiny.tokenizer.mask_token_id
    copy = SENTENCE.copy()
    copy[2] = mask
    assert row == [cls, *SENTENCE, sep, *copy, sep] and at == 1 + 7 + 1 + 2 and row[at] == mask
    assert types == [0] * 9 + [1] * 8
    long = np.arange(1000, 1300)  # 300 tokens: two copies do not fit in 512, a window centred on the token does
    row, _, at = DP_MLM.pair_input(tiny.tokenizer, long, 150, 512)
    window = (512 - 3) // 2  # tokens of each copy
    assert len(row) == 3 + 2 * window and row[at] == mask and at == 1 + window + 1 + window // 2
    assert row[at - window - 1] == 1150 and row[1] == 1150 - window // 2  # the original, centred on the token
    _, _, at = DP_MLM.pair_input(tiny.tokenizer, long, 290, 512)  # near the end: the window ends with the sentence
    assert at == 1 + window + 1 + 290 - (300 - window)


def test_an_mlm_of_another_vocabulary_is_refused(tiny):
    class Other:
        name = "other"
        tokenizer = type("T", (), {"get_vocab": lambda self: {"a": 0}})()

    space = Space(tiny)
    space.encoder = Other()
    with pytest.raises(BenchError, match="another vocabulary"):
        mechanism(tiny, 1.0).privatize([SENTENCE], space, np.random.default_rng(0))


@pytest.mark.parametrize("args, message", [
    ("eps=0", "eps must be > 0"),
    ("eps=-3", "eps must be > 0"),
    ("clip_min=5,clip_max=1", "clip_min < clip_max"),
    ("clip_min=1", "both clip_min and clip_max"),
    ("mlm=minilm", "untrained prediction head"),
    ("mlm=mock", "is not a masked LM"),
    ("mlm=no-such-owner/no-such-mlm", "is not a masked LM found here"),
])
def test_bad_input_exits_2_with_one_sentence(tiny_data, results, args, message):
    result = CliRunner().invoke(app, ["run", "--defense", "dp-mlm", "--defense-args", args, "--attack", "inversion",
                                      "--encoder", "mock"])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert files_under(results) == []


def test_the_client_runs_the_mlm_trained_without_its_task():
    from bench.engine.paths.tokens import public_token_mechanism

    assert public_token_mechanism(DP_MLM.DPMLM(), "conll2003").task == "conll2003"
    assert public_token_mechanism(DP_MLM.DPMLM()).task == ""  # a release's copy: the adversary's, no task bound
