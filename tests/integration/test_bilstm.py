"""The ``bilstm`` encoder: minilm's frozen WordPiece table under a seeded BiLSTM that fine-tunes."""

import numpy as np
import pytest
import torch

from bench import BenchError
from bench.engine.runner import make_spec, run_cell
from bench.models.bilstm import BiLSTMEncoder
from bench.models.loading import load_encoder
from bench.privacy.mechanisms import embedding_table


def test_reads_minilm_table_and_tokenizer():
    encoder = BiLSTMEncoder(cache=False, seed=3)
    minilm = load_encoder("minilm")
    assert np.array_equal(embedding_table(encoder), embedding_table(minilm))
    assert encoder.dim == 384
    features = encoder.encode(["a fine film", "a dull one"])
    assert features.shape == (2, 384) and np.isfinite(features).all()


def test_loading_prints_no_progress_bar_of_its_own(capfd):
    # our bars report the long steps; transformers' "Loading weights" bar leaked into bilstm runs' stderr
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()  # as in a fresh process, whatever an earlier test loaded
    BiLSTMEncoder(cache=False, seed=0)
    assert "Loading weights" not in capfd.readouterr().err


def test_seed_sets_the_initial_weights():
    first = BiLSTMEncoder(cache=False, seed=0).encode(["a fine film"])
    assert np.array_equal(first, BiLSTMEncoder(cache=False, seed=0).encode(["a fine film"]))
    assert not np.array_equal(first, BiLSTMEncoder(cache=False, seed=1).encode(["a fine film"]))


def test_frozen_mode_is_refused():
    with pytest.raises(BenchError, match="--mode finetune"):
        make_spec(encoder="bilstm", defense="dchi-token")


def test_finetune_trains_the_lstm_not_the_table(monkeypatch):
    from bench.engine.paths import CellContext

    copies = []
    original = CellContext.fresh_encoder

    def keep(cell):
        encoder = original(cell)
        copies.append((encoder, {n: p.detach().clone() for n, p in encoder.model.named_parameters()}))
        return encoder

    monkeypatch.setattr(CellContext, "fresh_encoder", keep)
    spec = make_spec(task="sst2", encoder="bilstm", mode="finetune", defense="dchi-token", defense_args={"eta": 100},
                     attack="inversion", n_train=32, n_eval=16, training_args="epochs=1,batch_size=8")
    record = run_cell(spec)
    assert "utility/accuracy" in record.metrics and record.versions["encoder"].startswith("bilstm@bilstm-")
    encoder, before = copies[0]
    after = dict(encoder.model.named_parameters())
    assert torch.equal(before["embeddings.weight"], after["embeddings.weight"])
    assert any(not torch.equal(before[n], after[n]) for n in before if n.startswith("lstm."))
