"""--check's smoke budget (bench.core.smoke): what a cell builds once is built small, under keys no real run has; real
runs keep the keys they had; a smoke record never reaches the board."""

import json

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core import smoke
from bench.core.errors import BenchError

MOCK = ["--encoder", "mock", "--attack-args", "sbert=mock"]


@pytest.fixture
def fixed_revision(monkeypatch):
    """The encoder's revision pinned, so keys do not move with the installed encoder package."""
    import bench.models.encoders as encoders

    monkeypatch.setattr(encoders, "locate", lambda name: ("/nonexistent", "rev-1"))


def test_real_runs_keep_the_keys_they_had(fixed_revision):
    # computed by the code before the smoke budget existed (same pinned revision): a real run finds every MLM,
    # adapted and further pretrained checkpoint and cell hash it found before
    from bench.core.spec import RunSpec
    from bench.models.adaptation import AdaptationConfig, adaptation_key
    from bench.models.further_pretraining import PretrainingBudget, pretraining_key
    from bench.models.offline_mlm import MLMRecipe, mlm_key, recipe_for

    assert mlm_key(MLMRecipe(), "corpus") == "f4312513c67690d2"  # the default minilm-mlm
    assert mlm_key(recipe_for("conll2003"), "corpus") == "4db7d82af43ced0a"
    assert mlm_key(recipe_for("ptb", 100), "corpus") == "db75e2420b201f10"  # minilm-mlm@100
    assert adaptation_key("minilm", {"name": "dchi", "eta": 100.0}, AdaptationConfig("denoising"), "corpus") == \
        "474f66b826d81e2f"
    assert pretraining_key(PretrainingBudget(mlm="minilm"), ["a b", "c d"]) == "cfb4f14437ae29ad"
    # a spec holds typed training settings, the defaults when none are given (the older code hashed this spec,
    # given them as a dictionary, to the same value)
    spec = RunSpec("sst2", "ndd", "span-recovery", "minilm", defense_args={"mlm": "minilm-mlm"}, n_train=64, n_eval=32)
    assert spec.config_hash() == "f8e3b451639f340c" and "smoke" not in spec.to_dict()


def test_smoke_keys_differ_from_every_real_key(fixed_revision):
    from dataclasses import replace

    from bench.core.spec import RunSpec
    from bench.models.adaptation import AdaptationConfig, adaptation_key
    from bench.models.further_pretraining import PretrainingBudget, pretraining_key
    from bench.models.offline_mlm import mlm_key, recipe_for, smoke_recipe

    config, budget, mechanism = AdaptationConfig("denoising", steps=3), PretrainingBudget("minilm", 3), {"name": "x"}
    real = (adaptation_key("minilm", mechanism, config, "c"), pretraining_key(budget, ["a b"]))
    with smoke.smoke_budget():
        assert smoke.active()
        at_smoke = (adaptation_key("minilm", mechanism, config, "c"), pretraining_key(budget, ["a b"]))
    assert not smoke.active()
    assert all(a != b for a, b in zip(real, at_smoke))
    recipe = smoke_recipe("conll2003")
    assert (recipe.steps, recipe.layers, recipe.smoke) == (smoke.MLM_STEPS, smoke.MLM_LAYERS, True)
    # not the real minilm-mlm@20 either, even with its small batches: the smoke mark alone changes the key
    assert mlm_key(recipe, "c") != mlm_key(recipe_for("conll2003", smoke.MLM_STEPS), "c")
    assert mlm_key(recipe, "c") != mlm_key(replace(recipe, smoke=False), "c")
    spec = RunSpec("sst2", "none", "rss", "minilm")
    assert replace(spec, smoke=True).config_hash() != spec.config_hash()
    assert replace(spec, smoke=True).to_dict()["smoke"] is True


def test_offline_mlm_names_resolve_to_the_smoke_mlm_inside_the_budget(monkeypatch, tmp_path):
    from bench.models import offline_mlm

    built = []
    monkeypatch.setattr(offline_mlm, "prepare", lambda recipe, **k: built.append(recipe) or tmp_path / "key-1")
    offline_mlm.offline_dir("minilm-mlm", "conll2003")
    with smoke.smoke_budget() as used:
        for name in ("minilm-mlm", "minilm-mlm@100"):
            offline_mlm.offline_dir(name, "conll2003")
        assert offline_mlm.offline_dir("bert-base-cased") is None  # not an offline MLM: resolved as ever
    assert [r.smoke for r in built] == [False, True, True] and built[0].steps == offline_mlm.MLMRecipe().steps
    assert built[1] == built[2] == offline_mlm.smoke_recipe("conll2003")
    assert used == [f"minilm-mlm@{smoke.MLM_STEPS} for minilm-mlm (key key-1)",
                    f"minilm-mlm@{smoke.MLM_STEPS} for minilm-mlm@100 (key key-1)"]


def test_one_process_keeps_smoke_and_real_mlms_apart(monkeypatch):
    import bench.models.mlm as mlm

    mlm._shared_mlm.cache_clear()
    monkeypatch.setattr(mlm, "load_mlm", lambda name, device, task=None: ("smoke" if smoke.active() else "real", name))
    try:
        with smoke.smoke_budget():
            assert mlm.shared_mlm("minilm-mlm") == ("smoke", "minilm-mlm")
        assert mlm.shared_mlm("minilm-mlm") == ("real", "minilm-mlm")
    finally:
        mlm._shared_mlm.cache_clear()


def test_a_smoke_rewrite_is_cached_apart_and_a_real_one_keyed_as_before(monkeypatch, tmp_path):
    import numpy as np

    import bench.core.cache as cache
    from bench.engine.spans import cached_rewrite

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    identities = []
    real_key = cache.identity_key
    monkeypatch.setattr(cache, "identity_key", lambda identity: identities.append(identity) or real_key(identity))

    class Rewriter:
        calls = 0

        def rewrite_identity(self, task):
            return ("rewriter", task)

        def rewrite(self, batch, rng):
            Rewriter.calls += 1
            return [["edit"]]

    class Batch:
        texts, labels, chosen, pool, task = ["a b"], [0], [[]], {}, "toy"

    for at_smoke in (False, True, False, True):
        with smoke.smoke_budget(at_smoke):
            assert cached_rewrite(Rewriter(), Batch(), np.random.default_rng(0)) == [["edit"]]
    assert Rewriter.calls == 2  # once for real, once at the smoke budget; each read back the second time
    assert len(identities[0]) == 8 and identities[1] == (*identities[0], "smoke")  # real: the identity as before


def _record(spec_extra=None, notes=None):
    from bench.results.record import ResultRecord

    spec = {"task": "sst2", "defense": "none", "attack": None, "encoder": "minilm", "n_train": 64, "n_eval": 32,
            **(spec_extra or {})}
    return ResultRecord(run_id="r", config_hash="h" + str(bool(spec_extra or notes)), seed=0, spec=spec,
                        versions={}, data_hash="d", data_source="s", sizes={"n_train": 64, "n_eval": 32},
                        metrics={"utility/accuracy": 0.5}, higher_is_better={"utility/accuracy": True},
                        notes=notes or {}, runtime_s=1.0, hardware={}, created_at="now")


def test_smoke_records_never_reach_the_board():
    from bench.results.leaderboard import leaderboard_frame

    real = _record()
    board = leaderboard_frame([real, _record({"smoke": True}), _record(notes={smoke.NOTE: []})])
    assert list(board["config_hash"]) == [real.config_hash]
    assert not real.at_smoke_budget and _record({"smoke": True}).at_smoke_budget


def test_check_builds_at_the_smoke_budget_and_says_so(monkeypatch, tiny_data):
    import bench.engine.runner as runner
    from bench.engine.runner import CHECK_SIZES, CHECK_STEPS

    specs = []
    real_run_cell = runner.run_cell

    def capture(spec):
        specs.append(spec)
        if spec.attack != "rss":
            raise BenchError("captured")
        return real_run_cell(spec)

    monkeypatch.setattr(runner, "run_cell", capture)
    result = CliRunner().invoke(app, ["run", "--defense", "texthide", "--attack", "rss", "--check", *MOCK])
    assert result.exit_code == 0, result.output
    assert specs[-1].smoke and "smoke budget: no cached artefact built" in result.output
    result = CliRunner().invoke(app, ["run", "--defense", "none", "--attack", "rss", "--check", "--json", *MOCK])
    assert json.loads(result.stdout)["notes"][smoke.NOTE] == [] and json.loads(result.stdout)["spec"]["smoke"]
    # an attack's check_args apply unless chosen; a pretraining task's utility task runs at --check's sizes
    cell = ["run", "--defense", "texthide", "--attack", "gradient-matching", "--check", "--encoder", "mock"]
    assert CliRunner().invoke(app, [*cell, "--attack-args", "steps=7"]).exit_code == 2
    from bench.core.registry import ATTACKS

    assert specs[-1].attack_args["steps"] == 7
    assert specs[-1].attack_args["attacks"] == ATTACKS.get("gradient-matching").check_args["attacks"]
    clinical = ["run", "--task", "clinical-spl", "--defense", "none", "--attack", "name-generation", "--check"]
    assert CliRunner().invoke(app, clinical).exit_code == 2
    assert specs[-1].smoke and specs[-1].server.pretrain_steps == CHECK_STEPS
    assert (specs[-1].server.utility_n_train, specs[-1].server.utility_n_eval) == \
        (CHECK_SIZES["n_train"], CHECK_SIZES["n_eval"])
    assert CliRunner().invoke(app, [*clinical, "--server-args", "utility_n_eval=40"]).exit_code == 2
    assert specs[-1].server.utility_n_eval == 40


def test_a_real_run_is_not_at_the_smoke_budget(monkeypatch, tiny_data, results):
    result = CliRunner().invoke(app, ["run", "--defense", "none", "--attack", "rss", "--json", *MOCK,
                                      "--train-args", "epochs=1"])
    record = json.loads(result.stdout)
    assert smoke.NOTE not in record["notes"] and "smoke" not in record["spec"]
