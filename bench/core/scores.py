"""Score functions shared by tasks and attacks (the field's libraries: scikit-learn, SciPy)."""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

# -- task metrics (GLUE) -------------------------------------------------------------------------


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of equal entries."""
    return float(np.mean(np.asarray(predictions) == np.asarray(labels)))


def mcc(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Matthews correlation coefficient (scikit-learn)."""
    from sklearn.metrics import matthews_corrcoef

    return float(matthews_corrcoef(labels, predictions))


def f1(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Binary F1 of class 1 (scikit-learn)."""
    from sklearn.metrics import f1_score

    return float(f1_score(labels, predictions))


def pearson(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Pearson correlation (SciPy)."""
    from scipy.stats import pearsonr

    return float(pearsonr(predictions, labels)[0])


def spearman(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Spearman rank correlation (SciPy)."""
    from scipy.stats import spearmanr

    return float(spearmanr(predictions, labels)[0])


# -- similarity of a guessed sentence to the true one --------------------------------------------

_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    """Lower-cased word set of a text."""
    return set(_WORD.findall(text.lower()))


def jaccard_words(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """|words(a) ∩ words(b)| / |words(a) ∪ words(b)| per pair (1.0 for two texts without words)."""
    out = np.empty(len(a))
    for i, (x, y) in enumerate(zip(a, b)):
        wx, wy = words(x), words(y)
        union = wx | wy
        out[i] = len(wx & wy) / len(union) if union else 1.0
    return out


def tfidf_cosine(a: Sequence[str], b: Sequence[str], corpus: Sequence[str]) -> np.ndarray:
    """Cosine of TF-IDF vectors (fitted on ``corpus``) per pair."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer().fit(corpus)
    va, vb = vectorizer.transform(a), vectorizer.transform(b)  # rows are L2-normalised
    return np.asarray(va.multiply(vb).sum(axis=1)).ravel()


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two equally shaped arrays."""
    na = np.linalg.norm(a, axis=1).clip(min=1e-12)
    nb = np.linalg.norm(b, axis=1).clip(min=1e-12)
    return np.einsum("ij,ij->i", a, b) / (na * nb)
