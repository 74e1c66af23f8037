"""Explicit randomness: every random draw comes from a generator derived from (seed, purpose)."""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(seed: int, *purpose: str) -> int:
    """A 63-bit seed that depends only on the run seed and the named purpose."""
    text = "/".join([str(seed), *purpose]).encode("utf-8")
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def numpy_generator(seed: int, *purpose: str) -> np.random.Generator:
    """A NumPy generator for one purpose of one run."""
    return np.random.default_rng(derive_seed(seed, *purpose))
