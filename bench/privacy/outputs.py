"""The math of a prediction API's output defenses, on NumPy batches ``(n, classes)``.

Each function takes a batch of the victim's logits or probability vectors and returns probability vectors (rows
summing to 1); the defenses in ``defenses/`` call them, and tests check them by hand.
"""

from __future__ import annotations

import numpy as np

from bench.core.params import require
from bench.core.releases import softmax  # noqa: F401 - the defenses' name for it


def renormalise(p: np.ndarray) -> np.ndarray:
    """Rows clipped to [0, 1] and divided by their sum; a row that clips to all zeros becomes uniform."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    total = p.sum(axis=1, keepdims=True)
    uniform = np.full_like(p, 1.0 / p.shape[1])
    return np.where(total > 0, p / np.where(total > 0, total, 1.0), uniform)


def gaussian_perturbation(p: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Prediction perturbation (Xu et al. 2022): ``p + N(0, sigma^2)`` per entry, clipped to [0, 1], renormalised."""
    require(sigma >= 0, f"the perturbation sigma must be >= 0, got {sigma}.")
    p = np.asarray(p, dtype=np.float64)
    return renormalise(p + sigma * rng.standard_normal(p.shape))


def reverse_sigmoid(p: np.ndarray, beta: float, gamma: float) -> np.ndarray:
    """Reverse sigmoid (Lee et al. 2019): ``y - beta * (sigmoid(gamma * logit(y)) - 1/2)`` per entry, then clipped
    at 0 and renormalised (their alpha). Entries are kept inside (1e-7, 1 - 1e-7) before the logit."""
    require(beta >= 0, f"reverse sigmoid beta must be >= 0, got {beta}.")
    require(gamma > 0, f"reverse sigmoid gamma must be > 0, got {gamma}.")
    y = np.clip(np.asarray(p, dtype=np.float64), 1e-7, 1 - 1e-7)
    inner = gamma * np.log(y / (1 - y))
    return renormalise(y - beta * (1.0 / (1.0 + np.exp(-inner)) - 0.5))


def most_least(p: np.ndarray, eps: float) -> np.ndarray:
    """Most-least (He et al. 2022): ``0.5 + eps`` on each row's most likely class, ``0.5 - eps`` on its least
    likely, 0 elsewhere. Ties go to the lower class index (NumPy's argmax), and the least likely class is never the
    most likely one (a uniform row answers its first class most, its second least)."""
    require(0 < eps < 0.5, f"most-least eps must lie in (0, 0.5), got {eps}.")
    p = np.asarray(p, dtype=np.float64)
    out = np.zeros_like(p)
    rows = np.arange(len(p))
    top = p.argmax(axis=1)
    others = p.copy()
    others[rows, top] = np.inf
    out[rows, others.argmin(axis=1)] = 0.5 - eps
    out[rows, top] = 0.5 + eps
    return out
