"""Component parameters: caps that keep a cell inside the machine, finite floats, no repeated keys, attack
arguments only with an attack."""

from __future__ import annotations

import dataclasses
import math
import time
import typing

import pytest

from bench import BenchError
from bench.core.params import build_component, parse_arg_string
from bench.core.registry import ATTACKS, DEFENSES
from tests.conftest import files_under
from tests.reliability.conftest import MOCK_CHECK, invoke, one_sentence


@pytest.mark.parametrize("args, message", [
    ("k=100000", "k (representations mixed) must be at most 1024"),
    ("m=1000000000", "m (mask pool size) must be at most 262144"),
])
def test_texthide_caps_refuse_before_anything_runs(tiny_data, results, args, message):
    start = time.perf_counter()
    result = invoke("run", "--defense", "texthide", "--defense-args", args, *MOCK_CHECK)
    one_sentence(result, message)
    assert time.perf_counter() - start < 30  # refused up front, not after drawing the pool


def test_texthide_caps_admit_the_cap_and_inf():
    from bench.defenses.texthide import MAX_K, MAX_M

    cls = DEFENSES.get("texthide")
    assert build_component(cls, f"m={MAX_M},k={MAX_K}").k == MAX_K
    assert build_component(cls, "m=inf").m == "inf"


def _float_fields():
    from bench.engine.server_options import ServerOptions
    from bench.models.training import TrainingConfig

    classes = [DEFENSES.get(n) for n in DEFENSES.names()] + [ATTACKS.get(n) for n in ATTACKS.names()]
    classes += [TrainingConfig, ServerOptions]
    found = []
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            kind = hints[field.name]
            if field.init and (kind is float or float in typing.get_args(kind)):
                found.append((cls, field.name))
    return found


FLOAT_FIELDS = _float_fields()


def test_there_are_float_parameters_to_check():
    names = {name for _, name in FLOAT_FIELDS}
    assert {"lr", "eta", "eps", "adapt_lr", "threshold"} <= names


@pytest.mark.parametrize("cls, name", FLOAT_FIELDS, ids=[f"{c.__name__}.{n}" for c, n in FLOAT_FIELDS])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "Infinity", float("nan"), float("inf")])
def test_every_float_parameter_must_be_finite(cls, name, value):
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    if field.metadata.get("allows_infinity") and not math.isnan(float(value)):
        return  # an infinity it documents (test_a_field_may_document_infinity); NaN is still refused
    with pytest.raises(BenchError, match=f"{name} must be a finite number"):
        build_component(cls, {name: value})


def test_an_infinity_a_field_documents_is_taken_or_refused_in_its_own_words():
    from bench.engine.server_options import ServerOptions

    assert build_component(ServerOptions, "dp_epsilon=inf").dp_epsilon == float("inf")
    with pytest.raises(BenchError, match="dp_epsilon must be positive"):
        build_component(ServerOptions, "dp_epsilon=-inf")
    with pytest.raises(BenchError, match="dp_epsilon must lie in"):
        build_component(ServerOptions, "dp_epsilon=1e9")


def test_a_field_may_document_infinity():
    from bench.core.params import allows_infinity

    @dataclasses.dataclass
    class Bound:
        limit: float = allows_infinity(1.0)  # inf = no limit

    assert build_component(Bound, "limit=inf").limit == float("inf")
    with pytest.raises(BenchError, match="finite"):
        build_component(Bound, "limit=nan")


def test_infinite_learning_rate_saves_nothing(tiny_data, results):
    result = invoke("run", "--task", "stsb", "--train-args", "epochs=1,lr=inf", "--encoder", "mock")
    one_sentence(result, "lr must be a finite number")
    assert files_under(results) == []


def test_repeated_key_is_an_error():
    with pytest.raises(BenchError, match="'m' is given twice"):
        parse_arg_string("m=16,m=32")


def test_repeated_key_on_the_command_line(tiny_data, results):
    result = invoke("run", "--defense", "texthide", "--defense-args", "m=16,m=32", *MOCK_CHECK)
    one_sentence(result, "given twice", "m=16", "m=32")


def test_attack_arguments_without_an_attack(tiny_data, results):
    result = invoke("run", "--defense", "none", "--attack-args", "foo=1", *MOCK_CHECK)
    one_sentence(result, "without an attack")
