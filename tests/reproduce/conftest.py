"""Reproduction tests run the papers' settings: they need the Hugging Face hub and a CUDA GPU."""

import os

import pytest


def hub_and_gpu(model: str) -> bool:
    """True when ``model`` can be fetched from the hub and a CUDA GPU is present."""
    import torch

    if os.environ.get("HF_HUB_OFFLINE") == "1" or not torch.cuda.is_available():
        return False
    try:
        from huggingface_hub import model_info

        model_info(model)
        return True
    except Exception:
        return False


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/reproduce" in str(item.fspath):
            item.add_marker(pytest.mark.reproduce)
