"""A deterministic convex probe on the server's frozen features: a second utility figure that does not wobble.

The MLP head (``bench.models.training``) is trained by Adam in float32 for many steps, so the last-bit differences
of features between CPUs, thread counts and BLAS libraries grow into differences of its utility (up to 0.03 per
seed). The probe fits a convex model with a unique optimum instead: features are standardised with the training
split's mean and standard deviation in float64 and rounded to ``DECIMALS`` decimals (a float32 rounding difference
moves a value by ~1e-7 standard deviations, so it almost never crosses a rounding boundary), then

- classification: multinomial logistic regression (scikit-learn, lbfgs, float64, fixed C, tol and max_iter);
  soft targets (TextHide's mixed labels) enter as one weighted row per class with mass;
- regression (STS-B): ridge regression in float64 with a fixed alpha, solved by Cholesky.

Token taggers fit the same logistic regression on every released token's state and its tag. Everything runs on one
BLAS thread. docs/probe.md gives the measured spread of its figures across thread counts, batch compositions and
bf16-sized perturbations of the features, and the tolerance regression tests use.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

DECIMALS = 2  # standardised features are rounded to this many decimals before fitting and predicting
C = 1.0  # inverse L2 strength of the logistic regression (scikit-learn's C)
TOL = 1e-6  # lbfgs gradient tolerance
MAX_ITER = 1000  # lbfgs iterations at most
RIDGE_ALPHA = 1.0  # L2 strength of the ridge regression (regression tasks)
MIN_STD = 1e-6  # a feature whose training spread is below this is only centred

# The stated tolerance of the probe's figures across CPUs, thread counts and BLAS libraries (docs/probe.md, measured
# by scripts/probe_tolerance.py on SST-2, CoLA, MRPC and STS-B at 2,000 training sentences): re-encoding with 1 or 2
# torch threads, batches of 16 or 64, or a shuffled order changed no probe prediction; bf16-sized noise on every
# feature (relative 2^-8, far above a CPU's float32 rounding) flipped at most 3 of 408 evaluation predictions and moved
# each metric by about half of TOLERANCE at most.
# Token taggers (NCBI-disease BioNER, CoNLL-03 NER, 1,000 training sentences): no re-encoding changed a span metric,
# bf16-sized noise moved each by at most 0.004; their entity precision, recall and F1 share F1's tolerance.
FLIPS = 0.015  # stated share of evaluation predictions that may flip (measured at most 0.0074)
SPAN_METRICS = ("f1", "precision", "recall", "lf", "lp", "lr", "uf", "up", "ur")  # F1 (MRPC, QQP) and taggers' spans
TOLERANCE = {"accuracy": 0.01, "mcc": 0.02, "pearson": 0.002, "spearman": 0.002, **dict.fromkeys(SPAN_METRICS, 0.01)}
SMALL_SLICE_FLIPS = 2  # on a small evaluation slice, accuracy may move by this many predictions


def describe() -> str:
    """The probe's settings, as a record's notes state them."""
    return (f"float64 logistic regression (lbfgs, C={C}, tol={TOL:g}, max_iter={MAX_ITER}; ridge alpha={RIDGE_ALPHA} "
            f"for regression) on frozen features standardised by the training split and rounded to {DECIMALS} "
            "decimals, one thread (docs/probe.md)")


@dataclass
class Probe:
    """A fitted probe: the training split's standardisation and the convex model on top."""

    mean: np.ndarray
    scale: np.ndarray
    model: Any  # LogisticRegression, Ridge, or a class id when training held one class only
    regression: bool
    iterations: int = 0

    def transform(self, features: np.ndarray) -> np.ndarray:
        """Features standardised with the training statistics and rounded (float64)."""
        return standardise(features, self.mean, self.scale)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Class ids (or regression values) for released features."""
        z = self.transform(features)
        if isinstance(self.model, (int, np.integer)):
            return np.full(len(z), int(self.model))
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            predictions = self.model.predict(z)
        return predictions.astype(np.float64) if self.regression else predictions.astype(np.int64)


def standardise(features: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``round((features - mean) / scale, DECIMALS)`` in float64."""
    z = (np.asarray(features, dtype=np.float64) - mean) / scale
    return np.round(z, DECIMALS) + 0.0  # + 0.0: -0.0 becomes 0.0, so equal inputs give equal bytes


def fit_probe(features: np.ndarray, targets: np.ndarray, num_labels: int) -> Probe:
    """Fit the probe on training features and targets (one-hot or mixed rows, or a column for regression)."""
    from threadpoolctl import threadpool_limits

    x = np.asarray(features, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.float64).reshape(len(x), -1)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < MIN_STD] = 1.0
    z = standardise(x, mean, scale)
    with threadpool_limits(1):
        if num_labels == 1:
            from sklearn.linear_model import Ridge

            model = Ridge(alpha=RIDGE_ALPHA, solver="cholesky").fit(z, targets[:, 0])
            return Probe(mean, scale, model, regression=True)
        rows, classes = np.nonzero(targets > 0)
        weights = targets[rows, classes]
        if len(np.unique(classes)) < 2:  # one class only: the probe answers it
            return Probe(mean, scale, int(classes[0]) if len(classes) else 0, regression=False)
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=C, solver="lbfgs", tol=TOL, max_iter=MAX_ITER)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # the record's notes give the iterations
            model.fit(z[rows], classes, sample_weight=None if np.all(weights == 1.0) else weights)
    return Probe(mean, scale, model, regression=False, iterations=int(np.max(model.n_iter_)))


def tolerance(metric: str, n_eval: int) -> float:
    """The stated tolerance of ``probe_<metric>`` with ``n_eval`` evaluation examples: TOLERANCE, and for accuracy
    at least SMALL_SLICE_FLIPS predictions' worth (a slice of 100 moves in steps of 0.01)."""
    stated = TOLERANCE[metric]
    return max(stated, SMALL_SLICE_FLIPS / n_eval) if metric == "accuracy" else stated

