"""Base classes of tasks, defenses and attacks, and the cell context the runner hands them.

Every component is a dataclass whose fields are its parameters (defaults plus a one-line comment);
``__post_init__`` rejects bad values with ``BenchError``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from bench.data.examples import TaskData, Text
from bench.core.releases import Release, ReleaseKind
from bench.core.spec import RunSpec


class Task:
    """A task family member: loads seeded splits and scores predictions with its metric."""

    version: ClassVar[str] = "1"
    metric: ClassVar[str]  # the headline utility metric, a key of bench.core.metrics.METRICS
    num_labels: ClassVar[int]  # classes; 1 for regression
    default_n_train: ClassVar[int] = 4000
    default_n_eval: ClassVar[int] = 1000

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """Seeded train and evaluation examples of the requested sizes."""
        raise NotImplementedError

    def score(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """Utility metrics by name (the headline metric first)."""
        raise NotImplementedError


@dataclass
class Cell:
    """What one run gives its defense: the spec, the task, its data and the encoder."""

    spec: RunSpec
    task: Task
    data: TaskData
    training: Any  # bench.models.training.TrainingConfig

    @functools.cached_property
    def encoder(self):
        """The shared (frozen, cached) encoder of this run."""
        from bench.models.encoders import load_encoder

        return load_encoder(self.spec.encoder, self.spec.device, self.spec.pooling, self.spec.max_length)

    def fresh_encoder(self):
        """A private copy of the encoder for modes that change its weights; it bypasses the feature cache."""
        from bench.models.encoders import Encoder, MockEncoder, mock_dimension

        if (dim := mock_dimension(self.spec.encoder)) is not None:
            return MockEncoder(dim)
        if self.spec.encoder == "bilstm":
            from bench.models.bilstm import BiLSTMEncoder

            return BiLSTMEncoder(self.spec.device, self.spec.pooling, self.spec.max_length, cache=False,
                                 seed=self.spec.seed)
        return Encoder(self.spec.encoder, self.spec.device, self.spec.pooling, self.spec.max_length, cache=False)


@dataclass
class DefenseOutput:
    """Utility of the server's model on privatized evaluation data, and the releases attacks see."""

    utility: dict[str, float]
    releases: dict[ReleaseKind, Release]
    notes: dict[str, Any] = field(default_factory=dict)
    encoder: Any = None  # the encoder that produced the releases (public in the threat model)
    deferred: dict[ReleaseKind, Any] = field(default_factory=dict)  # kind -> () -> Release, built only if attacked

    def release(self, kind: ReleaseKind) -> Release:
        """The release of ``kind``, building a deferred one on first use."""
        if kind not in self.releases:
            self.releases[kind] = self.deferred.pop(kind)()
        return self.releases[kind]


class Defense:
    """A text-privacy defense: the client's local part plus the server's training on releases."""

    version: ClassVar[str] = "1"
    releases: ClassVar[tuple[ReleaseKind, ...]] = ()

    def run(self, cell: Cell) -> DefenseOutput:
        """Privatize the cell's data, train and evaluate the server's model, return the releases."""
        raise NotImplementedError

    def describe(self, dim: int) -> dict[str, Any]:
        """Derived facts worth keeping in the record (e.g. the mean noise radius); default none."""
        return {}


@dataclass
class PublicKnowledge:
    """What an adversary may use besides the release: public weights and a public corpus."""

    encoder: Any
    corpus: list[Text]  # every text (sentence or pair) of the task corpus the run holds (train and evaluation)
    task: str


@dataclass
class Truth:
    """Ground truth held by the runner only, for scoring guesses."""

    texts: list[Text]  # the true text (sentence or pair) of each release row
    labels: np.ndarray  # the true label of each release row
    corpus_labels: np.ndarray  # labels of PublicKnowledge.corpus, for label-agreement metrics


class Attack:
    """An attack: turns a release into guesses; the runner scores them against the truth."""

    version: ClassVar[str] = "1"
    accepts: ClassVar[tuple[ReleaseKind, ...]] = ()

    def attack(self, release: Release, public: PublicKnowledge) -> Any:
        """Guesses about the private inputs behind ``release``."""
        raise NotImplementedError

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> Any:
        """Guesses of the same form drawn at random: the reference every attack reports beside."""
        raise NotImplementedError

    def score(self, guesses: Any, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Metric name -> value for ``guesses`` against the truth."""
        raise NotImplementedError
