"""Reference test of dp-mlm: the released tokens' law against the mechanism's equation.

Pr[y | x] is computed one candidate at a time from the equation, then compared with the frequencies of many
releases. Replace the reference with your paper's equation when you replace the mechanism.
"""

import math
import sys
from pathlib import Path

import numpy as np

from bench.core.registry import load_plugin
from bench.engine.contracts import FakeSpace

COMPONENT = sys.modules[load_plugin(Path(__file__).resolve().parent / "../../defenses/dp_mlm.py")]


def reference_probabilities(x: int, candidates, eps: float) -> np.ndarray:
    """Pr[y | x] for each candidate y, from the equation, one at a time."""
    total = math.exp(eps) + len(candidates) - 1
    return np.array([(math.exp(eps) if y == x else 1.0) / total for y in candidates])


def test_released_tokens_follow_the_equation():
    space = FakeSpace(candidates=np.arange(5, 11))  # six tokens: every probability is large enough to test
    mechanism = COMPONENT.DpMlm(eps=1.0).token_mechanism()
    draws = 60000
    for x in (5, 8, 10):
        released = mechanism.privatize([np.full(draws, x)], space, np.random.default_rng(x))[0]
        observed = np.array([(released == y).mean() for y in space.candidates])
        expected = reference_probabilities(x, space.candidates, 1.0)
        bound = 5 * np.sqrt(expected * (1 - expected) / draws)  # five standard errors
        assert (np.abs(observed - expected) < bound).all(), (x, observed, expected)


def test_sentences_keep_their_lengths_and_stay_in_the_space():
    space = FakeSpace()
    ids = [np.array([5, 6, 7]), np.array([], dtype=np.int64), np.array([49])]
    out = COMPONENT.DpMlm().token_mechanism().privatize(ids, space, np.random.default_rng(0))
    assert [len(x) for x in out] == [3, 0, 1] and np.isin(np.concatenate(out), space.candidates).all()
