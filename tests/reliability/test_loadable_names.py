"""Names an attack or defense argument holds (a model, a vector file, a task) are checked by the component's
``check()`` in ``make_spec``, so ``bench run`` and a grid refuse them before anything runs, naming the parameter."""

from __future__ import annotations

import pytest

from bench import BenchError
from bench.engine.grid import load_grid
from bench.engine.runner import make_spec
from tests.conftest import files_under
from tests.reliability.conftest import MOCK_CHECK, invoke, one_sentence


@pytest.fixture
def no_cell(monkeypatch):
    """Fail the test if a cell starts."""
    import bench.engine.grid as grid_module
    import bench.engine.runner as runner

    monkeypatch.setattr(runner, "run_cell", lambda spec: pytest.fail("a cell ran before the bad name was refused"))
    monkeypatch.setattr(grid_module, "run_cell", lambda spec: pytest.fail("a cell ran before the bad name was refused"))


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_rss_sbert_that_cannot_load_is_refused_before_the_cell(tiny_data, results, offline, no_cell):
    result = invoke("run", "--task", "sst2", "--defense", "texthide", "--attack", "rss", "--attack-args",
                    "sbert=foo", *MOCK_CHECK)
    one_sentence(result, "rss sbert='foo'", "cannot be found")


@pytest.mark.parametrize("args, fragments", [
    ("mlm=no-such-org/no-such-mlm", ["mask-inference mlm='no-such-org/no-such-mlm'", "cannot be found"]),
    ("mlm=mock", ["mask-inference mlm='mock'", "no WordPiece transformer"]),
])
def test_mask_inference_mlm_is_checked(tiny_data, results, offline, no_cell, args, fragments):
    result = invoke("run", "--defense", "santext", "--attack", "mask-inference", "--attack-args", args, *MOCK_CHECK)
    one_sentence(result, *fragments)


@pytest.mark.parametrize("defense", ["dchi-text", "santext", "santext-plus", "random"])
def test_missing_vector_file_is_refused_before_the_cell(tiny_data, results, no_cell, tmp_path, defense):
    missing = tmp_path / "glove.missing.txt"
    result = invoke("run", "--defense", defense, "--defense-args", f"vectors={missing}", *MOCK_CHECK)
    one_sentence(result, f"{defense} vectors='{missing}' is not a file")


def test_texthide_public_task_is_checked(tiny_data, results, no_cell):
    result = invoke("run", "--defense", "texthide", "--defense-args", "scheme=inter,public=sst3", *MOCK_CHECK)
    one_sentence(result, "texthide public='sst3' names no task", "sst2")


def test_grid_with_an_attack_argument_that_cannot_load_records_nothing(tiny_data, results, offline, no_cell,
                                                                        tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("tasks: [sst2]\nencoders: [mock]\ndefenses: [texthide]\nattacks: [rss]\nseeds: [0, 1]\n"
                    "settings: {attack_args: {sbert: foo}, n_train: 40, n_eval: 20}\n")
    one_sentence(invoke("run", "--grid", grid), "rss sbert='foo'", "cannot be found")
    assert files_under(results) == []


def test_valid_loadable_names_pass(tiny_data, offline, tmp_path):
    vectors = tmp_path / "glove.txt"
    vectors.write_text("film 0.1 0.2\nmovie 0.2 0.1\n")
    assert make_spec(defense="texthide", attack="rss", attack_args="sbert=mock", encoder="mock").attack_args
    assert make_spec(defense="texthide", attack="rss", encoder="mock").attack_args["sbert"] == "minilm"
    assert make_spec(defense="dchi-text", defense_args=f"vectors={vectors}", encoder="mock")
    assert make_spec(defense="santext", attack="mask-inference", attack_args="mlm=minilm-mlm", encoder="mock")


def test_load_grid_runs_the_checks(tiny_data, offline, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("encoders: [mock]\ndefenses: [{name: dchi-text, args: {vectors: /no/such/file.txt}}]\n")
    with pytest.raises(BenchError, match="dchi-text vectors='/no/such/file.txt' is not a file"):
        load_grid(grid)


def test_the_contract_runs_check_on_defaults():
    from dataclasses import dataclass

    from bench.engine.contracts import _check_loadable_defaults

    @dataclass
    class Unloadable:
        model: str = "no-such-model"  # what it loads

        def check(self):
            raise BenchError(f"model='{self.model}' cannot be found.")

    assert "check() fails on the default parameters" in _check_loadable_defaults(Unloadable)[0]
    assert _check_loadable_defaults(type("Fine", (), {"check": lambda self: None})) == []
