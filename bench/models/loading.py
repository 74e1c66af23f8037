"""Which encoder a name means: the shared frozen one, or a private copy for modes that train it.

Kept apart from ``bench.models.encoders`` so that the BiLSTM (a subclass of ``Encoder``) and the
adapter import in one direction only.
"""

from __future__ import annotations

import functools

from bench.models.encoders import DEFAULT_ENCODER, Encoder, MockEncoder, mock_dimension


def load_encoder(name: str = DEFAULT_ENCODER, device: str = "cpu", pooling: str = "mean", max_length: int = 128):
    """The shared, frozen encoder called ``name`` (loaded once per process per setting)."""
    return _shared_encoder(name, device, pooling, max_length)


def fresh_encoder(name: str, device: str, pooling: str, max_length: int, seed: int = 0):
    """A private copy of the encoder for modes that change its weights; it bypasses the feature cache."""
    if (dim := mock_dimension(name)) is not None:
        return MockEncoder(dim)
    if name == "bilstm":
        from bench.models.bilstm import BiLSTMEncoder

        return BiLSTMEncoder(device, pooling, max_length, cache=False, seed=seed)
    return Encoder(name, device, pooling, max_length, cache=False)


@functools.lru_cache(maxsize=4)
def _shared_encoder(name: str, device: str, pooling: str, max_length: int):
    if (dim := mock_dimension(name)) is not None:
        return MockEncoder(dim)
    if name == "bilstm":
        from bench.models.bilstm import BiLSTMEncoder

        return BiLSTMEncoder(device=device, pooling=pooling, max_length=max_length)
    return Encoder(name, device=device, pooling=pooling, max_length=max_length)
