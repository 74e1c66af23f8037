"""Release kinds: what a defense lets out of the client and so what an adversary observes."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np


class ReleaseKind(str, Enum):
    """The kinds of release a defense can produce and an attack can consume."""

    TEXT = "text"
    TOKEN_EMBEDDINGS = "token_embeddings"
    SENTENCE_EMBEDDINGS = "sentence_embeddings"
    GRADIENTS = "gradients"
    MODEL = "model"

    def __str__(self) -> str:
        return self.value


@dataclass
class Release:
    """What the adversary observes for the attacked examples of one cell.

    Attributes:
        kind: the release kind.
        data: the observation itself (an ``(n, d)`` float array for sentence embeddings, a list
            of strings for text, ...).
        owners: for each row of ``data``, the index of the evaluation example it was produced
            for; the runner scores guesses against that example.
        public: public facts that travel with the release (mechanism name and parameters).
    """

    kind: ReleaseKind
    data: Any
    owners: np.ndarray
    public: dict[str, Any] = field(default_factory=dict)
