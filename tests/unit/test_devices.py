"""--device cuda without a GPU: the parts that create tensors or load models follow the cell's device. PyTorch's
"meta" device stands in for a GPU: mixing a CPU tensor with a meta tensor fails exactly as mixing it with a CUDA
one does, so these tests catch a tensor left on the CPU."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bench import BenchError
from bench.models.encoders import cell_device, on_device, require_device, resolve_device


class Stop(Exception):
    """Raised by a stand-in loader once it has seen the device."""


def test_cell_device_is_set_for_the_block_only():
    assert cell_device() == "cpu"
    with on_device("cuda:1"):
        assert cell_device() == "cuda:1"
    assert cell_device() == "cpu"


def test_cuda_without_a_gpu_is_one_sentence(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BenchError, match="no CUDA GPU is available on worker w; run on a machine with one"):
        require_device("cuda", " on worker w")
    with pytest.raises(BenchError, match="no CUDA GPU is available"):
        resolve_device("cuda")
    assert resolve_device("cuda", here=False) == "cuda"  # a remote worker checks it
    require_device("cpu")


def test_the_adaptation_loss_keeps_its_targets_on_the_models_device():
    from bench.models.adaptation import soft_mlm_loss

    logits = torch.randn(2, 3, 5, device="meta")
    loss = soft_mlm_loss(logits, np.array([[0, 1], [1, 2]]), np.array([2, 3]), np.array([0.5, 0.5]))
    assert loss.device.type == "meta"


def test_ndd_loads_its_mlm_on_the_cells_device(monkeypatch):
    import bench.models.mlm as mlm_module
    from bench.core.registry import DEFENSES

    seen = []

    def loader(name, task=None, device="cpu"):
        seen.append(device)
        raise Stop

    monkeypatch.setattr(mlm_module, "shared_mlm", loader)
    defense = DEFENSES.get("ndd")()
    with on_device("cuda"), pytest.raises(Stop):
        defense.rewrite(SimpleNamespace(task="conll2003"), None)
    assert seen == ["cuda"]


def test_rss_scores_with_sbert_on_the_cells_device(monkeypatch):
    import bench.models.loading as loading
    from bench.core.registry import ATTACKS

    seen = []

    def loader(name, device="cpu", *args, **kwargs):
        seen.append(device)
        raise Stop

    monkeypatch.setattr(loading, "load_encoder", loader)
    public = SimpleNamespace(encoder=SimpleNamespace(device="cuda"), index=["a", "b"], task="sst2")
    truth = SimpleNamespace(texts=["a"], labels=np.array([0]), index_labels=np.array([0, 1]))
    with pytest.raises(Stop):
        ATTACKS.get("rss")().score(np.array([0]), truth, public)
    assert seen == ["cuda"]
