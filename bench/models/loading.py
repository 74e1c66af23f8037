"""Which encoder a name means: the shared frozen one, or a private copy for modes that train it.

Kept apart from ``bench.models.encoders`` so that the BiLSTM (a subclass of ``Encoder``) and the
adapter import in one direction only.
"""

from __future__ import annotations

import functools
from pathlib import Path

from bench.core.errors import BenchError
from bench.core.hub import unreachable_note
from bench.models.bilstm import BiLSTMEncoder
from bench.models.encoders import DEFAULT_ENCODER, Encoder, MockEncoder, locate, mock_dimension


def load_encoder(name: str = DEFAULT_ENCODER, device: str = "cpu", pooling: str = "mean", max_length: int = 128):
    """The shared, frozen encoder called ``name`` (loaded once per process per setting)."""
    return _shared_encoder(name, device, pooling, max_length)


def check_encoder(name: str, where: str = "") -> None:
    """Refuse an encoder name that cannot load, without loading weights: a mock's size is checked, the
    packaged default must be installed, a hub id's configuration must resolve (offline: from the local cache)."""
    check_model_name(name, f"{where} names encoder '{name}', which" if where else f"encoder '{name}'")


def check_model_name(name: str, subject: str) -> None:
    """Raise ``BenchError("<subject> cannot be found (...); use ...")`` unless ``name`` can load as an encoder
    (a mock, bilstm, the packaged default, a saved directory or a hub id whose configuration resolves, from the
    local cache when the hub is unreachable). No weights are loaded; answers are kept per process."""
    problem = model_problem(name)
    if problem is not None:
        raise BenchError(f"{subject} cannot be found ({problem}); use the offline default '{DEFAULT_ENCODER}', a "
                         "mock, or a hub id that is reachable or cached.")


@functools.lru_cache(maxsize=64)
def model_problem(name: str) -> str | None:
    """Why encoder ``name`` cannot load (a short reason), or None when its configuration resolves."""
    if mock_dimension(name) is not None or name == "bilstm":
        return None
    path, revision = locate(name)
    if revision is not None:  # the packaged default: its configuration is a file in the package
        return None if (Path(path) / "config.json").is_file() else "its config.json is missing from the package"
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(path)
    except Exception as exc:  # OSError when absent, ValueError for a malformed id or config
        return unreachable_note() or exc.__class__.__name__
    return None


def fresh_encoder(name: str, device: str, pooling: str, max_length: int, seed: int = 0):
    """A private copy of the encoder for modes that change its weights; it bypasses the feature cache."""
    if (dim := mock_dimension(name)) is not None:
        return MockEncoder(dim)
    if name == "bilstm":
        return BiLSTMEncoder(device, pooling, max_length, cache=False, seed=seed)
    return Encoder(name, device, pooling, max_length, cache=False)


@functools.lru_cache(maxsize=4)
def _shared_encoder(name: str, device: str, pooling: str, max_length: int):
    if (dim := mock_dimension(name)) is not None:
        return MockEncoder(dim)
    if name == "bilstm":
        return BiLSTMEncoder(device=device, pooling=pooling, max_length=max_length)
    return Encoder(name, device=device, pooling=pooling, max_length=max_length)
