"""The public mechanism's contract: the base classes, and the mechanisms a defense declares without math.

A defense's default mechanism is one of these (its name and parameters); the executable mechanisms, and the
math they run, are in ``bench.privacy.public`` and the modules beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from bench.core.releases import ReleaseKind


class PublicMechanism:
    """Base of every public mechanism: a name and the parameters an adversary knows."""

    name: ClassVar[str] = "mechanism"
    # the defense and parameters that made it ({"defense": name, **arguments}), set by the engine; public
    # like the mechanism itself. It names cached artefacts built for the mechanism (adapted checkpoints),
    # so they and their random streams stay those of the records made before mechanisms had types.
    origin: dict | None = None

    def identity(self) -> dict[str, Any]:
        """What names artefacts built for this mechanism: its origin when known, else its description."""
        return dict(self.origin) if self.origin else self.describe()

    def describe(self) -> dict[str, Any]:
        """``{"mechanism": name, **parameters}``: JSON-ready, for records and cache keys."""
        params = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init} \
            if dataclasses.is_dataclass(self) else {}
        return {"mechanism": self.name, **params}

    def fresh(self) -> "PublicMechanism":
        """An unfitted copy with the same public parameters (and origin)."""
        copy = dataclasses.replace(self) if dataclasses.is_dataclass(self) else type(self)()
        copy.origin = self.origin
        return copy


# -- token mechanisms ------------------------------------------------------------------------------


class TokenMechanism(PublicMechanism):
    """Maps each regular token of a token space to a released token id (``text``) or vector."""

    release_kind: ClassVar[ReleaseKind] = ReleaseKind.TEXT
    has_channel: ClassVar[bool] = False  # whether ``bayes_channel`` gives Pr[output | input]

    def fit(self, ids: list[np.ndarray], space) -> None:
        """Learn statistics of the token ids it will privatize (default: none; nothing is released)."""

    def bind_task(self, task: str) -> None:
        """Learn the cell's task (a mechanism running a model that must never have seen the task's text); default
        nothing."""

    def streaming(self) -> None:
        """Prepare for many small ``privatize`` calls (pretraining privatizes on the fly); default nothing."""

    def privatize(self, ids: list[np.ndarray], space, rng: np.random.Generator) -> list[np.ndarray]:
        """The released ids (or vectors) of each sentence, in ``space`` (``table``, ``candidates``)."""
        raise NotImplementedError

    def bayes_channel(self, outputs, table, regular, corpus_counts, rng, trials: int, support: int):
        """Candidate inputs and ``rows -> log Pr[outputs | rows]`` for a Bayesian guess; None if unknown."""
        return None

    def facts(self) -> dict[str, Any]:
        """What the record keeps of the fitted state (sizes only, never private statistics); default none."""
        return {}


@dataclass
class IdentityTokens(TokenMechanism):
    """No privatization: every token released as it is (the undefended baseline)."""

    name: ClassVar[str] = "identity"

    def privatize(self, ids, space, rng):
        """The ids unchanged."""
        return [np.asarray(x) for x in ids]


@dataclass
class SpanRewrite(TokenMechanism):
    """A span defense's rewrite (``bench.core.components.SpanDefense``): the sensitive spans were replaced on the
    client before release, then every token was released unchanged. ``params`` are the defense's (the MLM an
    adversary may reuse among them)."""

    name: ClassVar[str] = "span-rewrite"
    release_kind: ClassVar[ReleaseKind] = ReleaseKind.REWRITTEN_TEXT
    defense: str = ""
    params: dict = field(default_factory=dict)

    def privatize(self, ids, space, rng):
        """The (already rewritten) ids unchanged."""
        return [np.asarray(x) for x in ids]


# -- sentence-representation mechanisms ------------------------------------------------------------


class RepresentationMechanism(PublicMechanism):
    """Transforms sentence representations (and, when mixing, their targets)."""

    @property
    def masked(self) -> bool:
        """Whether released representations are multiplied by a secret sign mask."""
        return False


@dataclass
class IdentityRepresentation(RepresentationMechanism):
    """No transformation: the encoder's representation is released."""

    name: ClassVar[str] = "identity"


@dataclass
class DeclaredRepresentation(RepresentationMechanism):
    """A representation mechanism known only by its defense's name and parameters (a new defense's default)."""

    name: ClassVar[str] = "declared"
    defense: str = ""
    parameters: dict = field(default_factory=dict)


# -- the token space a release was made in ---------------------------------------------------------


@dataclass(frozen=True)
class SpaceRef:
    """The public token space of a release: the encoder's WordPieces, or the words of a vector file."""

    format: str = "wordpiece"  # wordpiece or words
    vectors: str = ""  # the GloVe-format file of a word space

    @classmethod
    def of(cls, vectors: str = "") -> "SpaceRef":
        """The word space of a vector file, or the WordPiece space when ``vectors`` is empty."""
        return cls("words", vectors) if vectors else cls()


# -- output mechanisms -----------------------------------------------------------------------------


@dataclass
class DeclaredOutput(PublicMechanism):
    """An output defense of a prediction API known by its defense's name and parameters."""

    name: ClassVar[str] = "declared-output"
    defense: str = ""
    parameters: dict = field(default_factory=dict)
