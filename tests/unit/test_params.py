"""Parameter strings, type coercion and validation."""

import pytest

from bench import DEFENSES, BenchError
from bench.core.params import build_component, component_args, parse_arg_string


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
        ("m=lots", "m must be a non-negative integer or inf"),
        ("mm=3", "no parameter 'mm'.*Did you mean 'm'"),
    ],
)
def test_bad_values_are_rejected(args, message):
    with pytest.raises(BenchError, match=message):
        build_component(DEFENSES.get("texthide"), args)


def test_yaml_booleans_are_not_integers():
    with pytest.raises(BenchError, match="m must be int"):
        build_component(DEFENSES.get("texthide"), {"m": True})


def test_a_parameter_added_later_keeps_old_config_hashes_while_at_its_default():
    from dataclasses import dataclass

    from bench.core.params import added_later, build_component, component_args

    @dataclass
    class Before:
        eta: float = 1.0

    @dataclass
    class After:
        eta: float = 1.0
        vectors: str = added_later("")

    assert component_args(build_component(After, "eta=2")) == component_args(build_component(Before, "eta=2"))
    assert component_args(build_component(After, "eta=2,vectors=glove.txt")) == {"eta": 2.0, "vectors": "glove.txt"}


def test_every_committed_record_resolves_to_its_config_hash(committed_records):
    """Current defaults reproduce each current record's hash, so grids skip it and the leaderboard groups it."""
    from bench.core.versions import component_versions
    from bench.engine.runner import make_spec

    for record in committed_records:
        spec = dict(record.spec)
        training = dict(spec.pop("training"))
        mode = training.pop("mode")
        spec.pop("seed")
        server = spec.pop("server")
        rebuilt = make_spec(**spec, mode=mode, training_args=training, server_args=server, seed=record.seed)
        if component_versions(rebuilt) != record.component_versions():
            continue  # measured by an older version of a component: a grid reruns it anyway
        assert rebuilt.config_hash() == record.config_hash, record.spec
