"""Privacy-adaptive pretraining and mask-token inference with the real offline encoder (tiny budgets).

These check the mechanics the issue's acceptance names, not the utility gain: the user-side token
embedding table is bit-identical after adaptation, checkpoints are cached by their key, adapted
encoders feed `bench run` (and an attack-only re-run of their cell does without them), and mask-inference runs
against dchi-text and santext-plus releases.
"""

import json

import pytest
import torch

from bench import DEFENSES
from bench.core.params import build_component
from bench.engine.paths.tokens import public_token_mechanism
from bench.engine.runner import make_spec, run_cell
from bench.models.adaptation import AdaptationConfig, adapt_encoder

TINY = AdaptationConfig("denoising", steps=2, batch_size=4, corpus_size=400)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    return tmp_path


# dchi-token's denoising checkpoint is checked the same way by the adapted cell's test below
@pytest.mark.parametrize("defense, args, objective", [("santext-plus", "eps=14", "prob")])
def test_adaptation_leaves_the_user_side_table_bit_identical(cache, defense, args, objective):
    from transformers import AutoModelForMaskedLM

    from bench.models.loading import load_encoder

    config = AdaptationConfig(objective, steps=2, batch_size=4, corpus_size=400)
    mechanism = public_token_mechanism(build_component(DEFENSES.get(defense), args))
    path = adapt_encoder(mechanism, "minilm", config)
    assert getattr(mechanism, "sensitive", None) is None and getattr(mechanism, "rows", None) is None  # a copy ran
    adapted = AutoModelForMaskedLM.from_pretrained(path)
    original = load_encoder("minilm").model
    assert torch.equal(adapted.get_input_embeddings().weight, original.get_input_embeddings().weight)
    layer = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(adapted.bert.state_dict()[layer], original.state_dict()[layer])  # the server's part trained
    info = json.loads((path / "adaptation.json").read_text())
    assert info["config"]["objective"] == objective and 0 <= info["privatize_share"] < 1
    assert "trained by" in info["head"] and info["mlm_top1_before"] is not None
    stamp = (path / "adaptation.json").stat().st_mtime_ns
    assert adapt_encoder(public_token_mechanism(build_component(DEFENSES.get(defense), args)), "minilm",
                         config) == path
    assert (path / "adaptation.json").stat().st_mtime_ns == stamp  # cached: not pretrained twice


@pytest.mark.parametrize("defense", ["dchi-text", "santext-plus"])
def test_mask_inference_runs_against_text_releases(defense):
    spec = make_spec(defense=defense, attack="mask-inference", attack_args="max_sentences=20,mlm=minilm-untrained",
                     n_train=60, n_eval=20, training_args="epochs=1")
    record = run_cell(spec)
    assert 0 <= record.metrics["privacy/mask-inference/token_accuracy"] <= 1
    assert 0 <= record.metrics["privacy/mask-inference/mlm_top1"] <= 1
    assert "untrained" in record.notes["mlm_head"]  # the ablation's record says its head is untrained


def test_two_processes_asking_for_one_checkpoint_pretrain_it_once(cache, monkeypatch):
    import threading
    import time

    import bench.models.adaptation as adaptation

    calls = []

    def slow_pretrain(*args):  # (defense, encoder, config, corpus, device, task, target)
        calls.append(args[-1])
        time.sleep(0.5)  # long enough for the other caller to find the work under way
        args[-1].mkdir(parents=True)
        (args[-1] / "adaptation.json").write_text("{}")

    monkeypatch.setattr(adaptation, "_pretrain", slow_pretrain)
    mechanism = public_token_mechanism(build_component(DEFENSES.get("dchi-token"), "eta=60"))
    paths = []
    callers = [threading.Thread(target=lambda: paths.append(adapt_encoder(mechanism, "minilm", TINY)))
               for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert len(calls) == 1 and len(paths) == 2 and paths[0] == paths[1]


def test_an_adapted_encoder_feeds_a_cell_and_an_attack_only_rerun_never_pretrains_it(cache, tmp_path, monkeypatch):
    import shutil

    from transformers import AutoModelForMaskedLM

    import bench.models.adaptation as adaptation
    from bench.engine.reuse import reusing
    from bench.models.loading import load_encoder
    from bench.results.release_store import ReleaseStore
    from bench.results.store import ResultStore

    cell = dict(defense="dchi-token", defense_args="eta=60", server_args="adapt=denoising,adapt_steps=2",
                attack="inversion", n_train=60, n_eval=20, training_args="epochs=1")
    results, releases = ResultStore(tmp_path / "results"), ReleaseStore(tmp_path / "releases", 1e9)
    with reusing(results, releases=releases):
        first = run_cell(make_spec(**cell))
    results.append(first)
    notes = first.notes
    assert notes["adaptation_objective"] == "denoising" and "trained by denoising MLM" in notes["adaptation_head"]
    assert 0 <= notes["adaptation_mlm_top1_after"] <= 1 and 0 <= notes["adaptation_privatize_share"] < 1
    assert "SQuAD" in notes["adaptation_corpus"] and "left out" not in notes["adaptation_corpus"]  # not SST-2 data
    assert first.versions["encoder"].startswith("minilm@adapted-")
    (path,) = (cache / "adapted").iterdir()  # one checkpoint, cached for the next cell
    adapted, original = AutoModelForMaskedLM.from_pretrained(path), load_encoder("minilm").model
    assert torch.equal(adapted.get_input_embeddings().weight, original.get_input_embeddings().weight)
    layer = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(adapted.bert.state_dict()[layer], original.state_dict()[layer])  # the server's part trained
    shutil.rmtree(cache / "adapted")  # a machine whose cache lacks it

    def refused(*args):
        raise AssertionError("an attack that reads no encoder body pretrained the server's checkpoint")

    monkeypatch.setattr(adaptation, "_pretrain", refused)
    with reusing(results, releases=releases):
        stored = run_cell(make_spec(**cell))  # from the release store
    with reusing(results, releases=None):
        regenerated = run_cell(make_spec(**cell))  # the client's part again, checked against the record's digest
    assert "stored release" in stored.notes["reused"] and "matches" in regenerated.notes["reused"]
    privacy = {k: v for k, v in first.metrics.items() if not k.startswith("utility/")}
    for again in (stored, regenerated):
        assert {k: v for k, v in again.metrics.items() if not k.startswith("utility/")} == privacy
        assert again.versions["encoder"] == first.versions["encoder"]
        assert {k: v for k, v in again.notes.items() if k.startswith("adaptation_")} == \
            {k: v for k, v in first.notes.items() if k.startswith("adaptation_")}
    assert not (cache / "adapted").exists()


def test_the_table_view_holds_the_table_and_refuses_to_run_a_body():
    from bench.core.errors import BenchError
    from bench.models.encoders import TableView
    from bench.models.loading import load_encoder

    encoder = load_encoder("minilm")
    view = TableView(encoder, "adapted-0123")
    assert [ids.tolist() for ids in view.token_ids(["a test", "another"])] == \
        [ids.tolist() for ids in encoder.token_ids(["a test", "another"])]
    assert torch.equal(view.input_embeddings(), encoder.input_embeddings()) and view.dim == encoder.dim
    for run in (lambda: view.encode(["a test"]), lambda: view.token_states([[1, 2]]), lambda: view.model):
        with pytest.raises(BenchError, match="reads_encoder_body"):
            run()
