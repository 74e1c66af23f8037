"""RunSpec resolution and hashing."""

import pytest

from bench import BenchError
from bench.engine.runner import make_spec


def test_defaults_are_resolved_before_hashing(tiny_data):
    short = make_spec(defense="texthide", attack="rss", encoder="mock")
    explicit = make_spec(defense="texthide", defense_args="m=256,k=4", attack="rss", encoder="mock")
    assert short.defense_args == {"m": 256, "k": 4}
    assert short.config_hash() == explicit.config_hash()
    assert short.training.mode == "frozen" and short.training.epochs >= 1


def test_hash_covers_everything_but_the_seed(tiny_data):
    base = make_spec(defense="texthide", encoder="mock", seed=0)
    assert make_spec(defense="texthide", encoder="mock", seed=5).config_hash() == base.config_hash()
    assert make_spec(defense="texthide", defense_args="m=16", encoder="mock").config_hash() != base.config_hash()
    assert make_spec(defense="texthide", encoder="mock", n_train=10).config_hash() != base.config_hash()


def test_spec_round_trips_through_a_dict(tiny_data):
    spec = make_spec(defense="texthide", attack="rss", encoder="mock", seed=3)
    assert type(spec).from_dict(spec.to_dict()) == spec


def test_incompatible_pair_names_both_kinds(tiny_data, tmp_path):
    from bench import load_plugin

    plugin = tmp_path / "text_only.py"
    plugin.write_text(
        "from dataclasses import dataclass\n"
        "from bench import Attack, Metric, ReleaseKind, register_attack\n"
        "@register_attack()\n@dataclass\nclass TextOnly(Attack):\n"
        "    accepts = (ReleaseKind.TEXT,)\n"
        "    metrics = (Metric('hits', True, 'tokens recovered'),)\n"
    )
    load_plugin(plugin)
    with pytest.raises(BenchError, match="releases sentence_embeddings, gradients.*accepts text"):
        make_spec(defense="texthide", attack="text_only", encoder="mock")


@pytest.mark.parametrize(
    "kwargs", [{"mode": "gpu"}, {"n_train": 1}, {"training_args": "epochs=0"}, {"training_args": "mode=finetune"}]
)
def test_bad_run_settings(tiny_data, kwargs):
    with pytest.raises(BenchError):
        make_spec(encoder="mock", **kwargs)


def test_the_training_traffic_leaves_the_dictionary_and_hash_as_before(tiny_data):
    """The default traffic is not written: records made before traffics existed keep their hash."""
    import hashlib
    import json

    spec = make_spec(defense="texthide", attack="rss", encoder="mock")
    assert spec.traffic == "training" and "traffic" not in spec.to_dict()
    payload = {k: v for k, v in spec.to_dict().items() if k not in ("seed", "server", "precision")}  # as before
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    assert spec.config_hash() == hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def test_the_inference_traffic_is_its_own_configuration(tiny_data):
    training = make_spec(defense="texthide", attack="rss", encoder="mock")
    inference = make_spec(defense="texthide", attack="rss", encoder="mock", traffic="inference")
    assert inference.to_dict()["traffic"] == "inference" and inference.config_hash() != training.config_hash()
    assert type(inference).from_dict(inference.to_dict()) == inference
    assert "inference traffic" in inference.label()
