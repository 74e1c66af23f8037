"""Reproduction tests run the papers' settings: they need the Hugging Face hub and a CUDA GPU."""

import json
import os
from pathlib import Path

import pytest

REFERENCE_DIR = Path(__file__).resolve().parents[2] / "results" / "reference"


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


def load_reference(name: str) -> dict:
    """One results/reference file (see results/reference/README.md for the layout)."""
    return json.loads((REFERENCE_DIR / name).read_text(encoding="utf-8"))


def fraction(value, scale: int) -> float:
    """A published number as the harness reports it: ``{mean, std}`` gives its mean; printed / scale."""
    if isinstance(value, dict):
        value = value["mean"]
    assert value is not None, "the reference cell is empty"
    return value / scale


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/reproduce" in str(item.fspath):
            item.add_marker(pytest.mark.reproduce)
