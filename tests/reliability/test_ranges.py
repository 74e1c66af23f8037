"""Accepted values must not produce wrong records: every numeric parameter declares the range in which its mechanism
is numerically meaningful (checked before anything runs), and the engine refuses to record a cell whose release,
utility or guesses are non-finite, or whose token release collapsed to one token."""

from __future__ import annotations

import dataclasses
import typing

import numpy as np
import pytest

from bench import BenchError
from bench.core.params import build_component, declared_range
from bench.core.registry import ATTACKS, DEFENSES, TASKS
from bench.core.releases import Release, ReleaseKind
from tests.conftest import files_under
from tests.reliability.conftest import MOCK_CHECK, invoke, one_sentence


def _classes():
    from bench.engine.server_options import ServerOptions
    from bench.models.training import TrainingConfig

    found = [DEFENSES.get(n) for n in DEFENSES.names()] + [ATTACKS.get(n) for n in ATTACKS.names()]
    return found + [TASKS.get(n) for n in TASKS.names()] + [TrainingConfig, ServerOptions]


def _numeric_fields():
    found = []
    for cls in _classes():
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            kinds = {hints[field.name], *typing.get_args(hints[field.name])}
            if field.init and kinds & {int, float} and bool not in kinds:
                found.append((cls, field))
    return found


NUMERIC = _numeric_fields()
IDS = [f"{getattr(c, 'registry_name', c.__name__)}.{f.name}" for c, f in NUMERIC]


def test_there_are_numeric_parameters():
    assert len(NUMERIC) > 60


@pytest.mark.parametrize("cls, field", NUMERIC, ids=IDS)
def test_every_numeric_parameter_declares_its_range(cls, field):
    interval = declared_range(field)
    assert interval is not None, f"declare {field.name}'s range with within(default, '[low, high]')"
    assert field.default is None or isinstance(field.default, str) or field.default in interval


@pytest.mark.parametrize("cls, field", NUMERIC, ids=IDS)
def test_a_value_beyond_the_range_is_one_sentence(cls, field):
    interval = declared_range(field)
    kind = typing.get_type_hints(cls)[field.name]
    above = interval.high * 10 + 1
    value = int(above) if kind is int or int in typing.get_args(kind) else float(above)
    with pytest.raises(BenchError) as caught:
        build_component(cls, {field.name: value})
    assert "\n" not in str(caught.value) and field.name in str(caught.value)


@pytest.mark.parametrize("defense, args, phrase", [
    ("santext", "eps=1e308", "eps must lie in (0, 1e30]"),
    ("santext-plus", "eps=1e308", "eps must lie in (0, 1e30]"),
    ("dchi-text", "eta=1e-300", "eta must lie in [1e-4, 1e30]"),
    ("dchi-token", "eta=1e-300", "eta must lie in [1e-4, 1e30]"),
    ("nasty-teacher", "omega=1e308", "omega must lie in [0, 1]"),
    ("softening", "tau=1e-300", "tau must lie in [1e-3, 1e3]"),
    ("perturbation", "sigma=1e300", "sigma must lie in [0, 100]"),
])
def test_extreme_defense_values_are_refused_before_anything_runs(tiny_data, results, defense, args, phrase):
    one_sentence(invoke("run", "--defense", defense, "--defense-args", args, *MOCK_CHECK), phrase)
    assert files_under(results) == []


@pytest.mark.parametrize("attack, args, phrase", [
    ("reprecon", "lr=1e308", "lr must lie in (0, 10]"),
    ("reprecon", "hidden=100000000", "hidden must lie in [1, 65536]"),
])
def test_extreme_attack_values_are_refused(tiny_data, results, attack, args, phrase):
    one_sentence(invoke("run", "--defense", "none", "--attack", attack, "--attack-args", args, *MOCK_CHECK), phrase)
    assert files_under(results) == []


def test_extreme_server_and_training_values_are_refused(tiny_data, results):
    one_sentence(invoke("run", "--train-args", "lr=1e20", *MOCK_CHECK), "lr must lie in (0, 10]")
    one_sentence(invoke("run", "--train-args", "epochs=100000000", *MOCK_CHECK), "epochs must lie in [1, 1e5]")
    assert files_under(results) == []


def test_deniability_refuses_an_eta_outside_the_range(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_sentence(invoke("analyze", "deniability", "--encoder", "mock", "--eta", "1e-300", "--tokens", "4",
                        "--trials", "2"), "eta must lie in [1e-4, 1e30]")
    one_sentence(invoke("analyze", "deniability", "--encoder", "mock", "--mechanism", "santext", "--eta", "1e308",
                        "--tokens", "4", "--trials", "2"), "eps must lie in (0, 1e30]")
    assert files_under(tmp_path) == []


NAN_PLUGIN = '''from dataclasses import dataclass

import torch

from bench import RepresentationDefense, register_defense, within
from bench.privacy.public import IdentityRepresentation


@register_defense("nan-hide")
@dataclass
class NanHide(RepresentationDefense):
    """Scales representations; a scale of 0 gives NaN (0 * inf), a broken mechanism inside its range."""

    scale: float = within(1.0, "[0, 1]")  # factor on each representation

    def representation_mechanism(self):
        """The identity (wrongly)."""
        return IdentityRepresentation()

    def hide(self, reps, generator):
        """Scale, with a bug at 0."""
        return reps * (self.scale * torch.tensor(float("inf")) if self.scale == 0 else self.scale)
'''


def test_a_non_finite_release_is_not_recorded(tiny_data, results, tmp_path):
    plugin = tmp_path / "nan_hide.py"
    plugin.write_text(NAN_PLUGIN)
    result = invoke("run", "--plugin", plugin, "--defense", "nan-hide", "--defense-args", "scale=0", "--attack", "rss",
                    "--attack-args", "sbert=mock", "--encoder", "mock", "--n-train", "40", "--n-eval", "20",
                    "--train-args", "epochs=1")
    one_sentence(result, "hide_batch returned NaN or infinite values, so nothing is recorded")
    assert files_under(results) == []


def _spec(**overrides):
    from types import SimpleNamespace

    return SimpleNamespace(**{"task": "sst2", "defense": "santext", "attack": "inversion", **overrides})


def _data(texts):
    from types import SimpleNamespace

    return SimpleNamespace(eval=SimpleNamespace(texts=texts))


def test_a_token_release_collapsed_to_one_token_is_refused():
    from types import SimpleNamespace

    from bench.engine.sanity import check_client_part

    texts = ["the film is great", "a dull plot"]
    collapsed = Release(ReleaseKind.TEXT, [np.array([7, 7, 7, 7]), np.array([7, 7, 7])], owners=np.arange(2))
    output = SimpleNamespace(utility={"accuracy": 0.5}, probe={}, releases={ReleaseKind.TEXT: collapsed})
    with pytest.raises(BenchError, match="one token repeated 7 times"):
        check_client_part(_spec(), output, _data(texts))
    varied = Release(ReleaseKind.TEXT, [np.array([7, 8, 9, 7]), np.array([7, 7, 7])], owners=np.arange(2))
    check_client_part(_spec(), SimpleNamespace(utility={"accuracy": 0.5}, probe={},
                                               releases={ReleaseKind.TEXT: varied}), _data(texts))
    one_word = Release(ReleaseKind.TEXT, [np.array([7, 7]), np.array([7])], owners=np.arange(2))  # input of one word
    check_client_part(_spec(), SimpleNamespace(utility={"accuracy": 0.5}, probe={},
                                               releases={ReleaseKind.TEXT: one_word}), _data(["ok ok", "ok"]))


def test_a_non_finite_utility_or_guess_is_refused():
    from types import SimpleNamespace

    from bench.engine.sanity import check_attack, check_client_part

    release = Release(ReleaseKind.SENTENCE_EMBEDDINGS, np.ones((2, 3), dtype=np.float32), owners=np.arange(2))
    output = SimpleNamespace(utility={"accuracy": float("nan")}, probe={}, releases={})
    with pytest.raises(BenchError, match="utility of task 'sst2'"):
        check_client_part(_spec(), output, _data(["a b", "c d"]))
    with pytest.raises(BenchError, match="guesses of attack 'inversion'"):
        check_attack(_spec(), release, _data(["a b", "c d"]), np.array([[np.nan, 1.0]]), np.zeros(2))
    with pytest.raises(BenchError, match="random-guess reference"):
        check_attack(_spec(), release, _data(["a b", "c d"]), np.zeros(2), {"x": [np.array([np.inf])]})
    check_attack(_spec(), release, _data(["a b", "c d"]), np.zeros(2, dtype=np.int64), ["a", "b"])


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_the_finite_check_finds_one_bad_value_and_passes_values_whose_sum_overflows(library):
    import torch

    from bench.engine.sanity import non_finite

    def array(values, dtype):
        if library == "numpy":
            return np.array(values, dtype=dtype)
        return torch.tensor(values, dtype=getattr(torch, dtype))

    big = 6e4 if library == "numpy" else 3e38  # float16's and float32's largest finite values are 65504 and 3.4e38
    dtype = "float16" if library == "numpy" else "float32"
    assert not non_finite(array([big, big, 1.0], dtype))  # the sum overflows; every element is finite
    for bad in (np.nan, np.inf, -np.inf):
        assert non_finite(array([big, bad, 1.0], dtype)) and non_finite(array([[0.0, 1.0], [bad, 2.0]], "float32"))
    assert non_finite(array([np.inf, -np.inf], "float32"))  # a sum of NaN
    assert not non_finite(array([1, 2], "int64")) and not non_finite(array([], "float32"))


def test_nearest_neighbour_search_refuses_nan_queries():
    from bench.privacy.neighbours import cosine_search

    with pytest.raises(BenchError, match="NaN or infinite"):
        cosine_search(np.eye(3, dtype=np.float32), np.full((2, 3), np.nan, dtype=np.float32))


def test_a_prediction_api_with_nan_outputs_is_refused():
    from bench.models.api import PredictionAPI

    api = PredictionAPI(None, None, None, np.random.default_rng(0))
    with pytest.raises(BenchError, match="victim's outputs hold NaN"):
        api.answer_logits(np.array([[np.nan, 0.0]]))
