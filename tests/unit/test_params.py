"""Parameter strings, type coercion and validation."""

import pytest

from bench import DEFENSES, BenchError
from bench.params import build_component, component_args, parse_arg_string


def test_parse_arg_string():
    assert parse_arg_string("m=256, k=4") == {"m": "256", "k": "4"}
    assert parse_arg_string("") == {}
    with pytest.raises(BenchError, match="key=value"):
        parse_arg_string("m256")


def test_build_coerces_types_and_fills_defaults():
    texthide = build_component(DEFENSES.get("texthide"), "m=16")
    assert component_args(texthide) == {"m": 16, "k": 4}


@pytest.mark.parametrize(
    "args, message",
    [
        ("m=-1", "m .* must be >= 0"),
        ("k=0", "k .* must be >= 1"),
        ("m=lots", "m must be int"),
        ("mm=3", "no parameter 'mm'.*Did you mean 'm'"),
    ],
)
def test_bad_values_are_rejected(args, message):
    with pytest.raises(BenchError, match=message):
        build_component(DEFENSES.get("texthide"), args)


def test_yaml_booleans_are_not_integers():
    with pytest.raises(BenchError, match="m must be int"):
        build_component(DEFENSES.get("texthide"), {"m": True})
