"""Public mechanisms: what an adversary knows of how a release was made — everything but the secrets.

Every release carries one of these typed objects. A defense builds it from its parameters
(``Defense.mechanism()``); the engine runs it on the client's data; attacks, privacy-adaptive
pretraining and analyses use the same object to sample the mechanism again, to compute its channel
for a Bayesian guess, or to know that a mask exists. Nobody outside a defense file needs to know
which defense made a release, and no attack compares registry names.

Token mechanisms are executable: ``fit`` (statistics of the texts it will privatize: SanText+'s
sensitive set), ``streaming`` (keep state between many small calls) and ``privatize`` (ids of a token
space in, released ids or vectors out). A release carries a fresh, unfitted copy: what the client
fitted on its private text is not public.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from bench.core.params import require
from bench.core.public import (  # noqa: F401 - the contract, re-exported beside the mechanisms
    DeclaredOutput,
    DeclaredRepresentation,
    IdentityRepresentation,
    IdentityTokens,
    PublicMechanism,
    RepresentationMechanism,
    SpaceRef,
    SpanRewrite,
    TokenMechanism,
)
from bench.core.releases import ReleaseKind
from bench.privacy.mechanisms import (
    ExponentialRows,
    dchi_token_text,
    dchi_token_vectors,
    least_frequent,
    santext_tokens,
    token_counts,
    uniform_tokens,
)
from bench.privacy.posterior import exponential_channel, nearest_token_channel

# -- token mechanisms ------------------------------------------------------------------------------


@dataclass
class DchiTokenNoise(TokenMechanism):
    """M_rep (Qu et al. §3.2): each token's embedding plus d_chi noise of density ∝ exp(-eta·||N||)."""

    name: ClassVar[str] = "dchi-token-noise"
    release_kind: ClassVar[ReleaseKind] = ReleaseKind.TOKEN_EMBEDDINGS
    eta: float = 100.0

    def privatize(self, ids, space, rng):
        """phi(w) + N for every token w."""
        return dchi_token_vectors(ids, space.table, self.eta, rng)


@dataclass
class DchiNearestToken(TokenMechanism):
    """M_txt (Feyisetan et al. Alg. 1): the nearest vocabulary token to each d_chi-perturbed embedding."""

    name: ClassVar[str] = "dchi-nearest-token"
    has_channel: ClassVar[bool] = True
    eta: float = 100.0

    def privatize(self, ids, space, rng):
        """argmin_v ||phi(v) - (phi(w) + N)|| over the space's tokens, by exact search."""
        return dchi_token_text(ids, space.table, space.candidates, self.eta, rng)

    def bayes_channel(self, outputs, table, regular, corpus_counts, rng, trials, support):
        """The keep-or-scatter channel, simulated by running this mechanism (bench.privacy.posterior)."""
        return nearest_token_channel(self.eta, outputs, table, regular, corpus_counts, rng, trials, support)


@dataclass
class ExponentialMechanism(TokenMechanism):
    """SanText+ (Yue et al. §3.3; SanText when w = 1): Pr[y|x] ∝ exp(-eps·d(x, y)/2) over the sensitive set.

    The sensitive set V_S is the least frequent fraction ``w`` of the vocabulary by the counts of the
    text it is fitted on; a sensitive token is always replaced, another one with probability ``p``.
    """

    name: ClassVar[str] = "exponential"
    has_channel: ClassVar[bool] = True
    eps: float = 14.0
    p: float = 1.0
    w: float = 1.0
    sensitive: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    rows: Any = field(default=None, init=False, repr=False, compare=False)

    def fit(self, ids, space):
        """V_S from the counts of ``ids`` over V (the regular WordPieces, or the fitted text's words)."""
        counts = token_counts(ids, len(space.table))
        vocabulary = space.candidates if space.format == "wordpiece" else np.flatnonzero(counts)
        self.sensitive = least_frequent(counts, vocabulary, self.w)

    def facts(self):
        """Size of the fitted sensitive set V_S."""
        return {"sensitive_tokens": None if self.sensitive is None else len(self.sensitive)}

    def streaming(self):
        """Keep each token's distribution between calls (pretraining privatizes small Zipfian batches)."""
        self.rows = ExponentialRows()

    def privatize(self, ids, space, rng):
        """Sensitive tokens always, others with probability p, replaced by exponential-mechanism draws from V_S."""
        require(self.sensitive is not None, f"{self.name} mechanism: call fit before privatize.")
        return santext_tokens(ids, space.table, self.sensitive, self.eps, self.p, rng, self.rows)

    def bayes_channel(self, outputs, table, regular, corpus_counts, rng, trials, support):
        """The exact channel, with V_S recomputed from the corpus' counts (bench.privacy.posterior)."""
        return exponential_channel(self.eps, self.p, self.w, outputs, table, regular, corpus_counts)


@dataclass
class UniformTokens(TokenMechanism):
    """Every token replaced by one drawn uniformly from the space's tokens, whatever the input: the exponential
    mechanism's eps -> 0 limit (Yue et al. Table 1's "Random" row). The output carries no information on the input."""

    name: ClassVar[str] = "uniform"
    has_channel: ClassVar[bool] = True

    def privatize(self, ids, space, rng):
        """A uniform draw from ``space.candidates`` for every token."""
        return uniform_tokens(ids, space.candidates, rng)

    def bayes_channel(self, outputs, table, regular, corpus_counts, rng, trials, support):
        """Pr[y | x] = 1 / |V| for every pair: the posterior is the prior, so the guess is the corpus' mode (the
        only candidate input given: any other loses to it for every output; of tied modes the lowest id, as argmax
        over all candidates would pick)."""
        inputs = regular[corpus_counts[regular] > 0]
        if inputs.size:
            inputs = inputs[[int(np.argmax(corpus_counts[inputs]))]]
        return inputs, lambda rows: np.zeros((len(rows), len(outputs)))


# -- sentence-representation mechanisms ------------------------------------------------------------


@dataclass
class DchiSentenceNoise(RepresentationMechanism):
    """d_chi noise on the pooled sentence representation (Qu et al. §3.2, sequence representation)."""

    name: ClassVar[str] = "dchi-sentence-noise"
    eta: float = 100.0


@dataclass
class MixAndMask(RepresentationMechanism):
    """TextHide (Huang et al. Alg. 1-2): k-way mixing with secret weights and partners, then a secret sign
    mask from a pool of m (m = 0: no mask; "inf": a fresh mask per example)."""

    name: ClassVar[str] = "mix-and-mask"
    m: int | str = 256
    k: int = 4
    scheme: str = "intra"
    clients: int = 0

    @property
    def masked(self) -> bool:
        """Signs are flipped unless the pool is empty (mix-only)."""
        return self.m != 0


# -- output mechanisms (a prediction API's answers) ------------------------------------------------


@dataclass
class SelfUndermining(PublicMechanism):
    """The nasty teacher's training objective (Ma et al. 2021, Eq. 2): cross-entropy on the labels minus
    ``omega * tau**2 * KL(softmax(victim / tau) || softmax(adversary / tau))``, the adversary a normally trained
    network of the same architecture."""

    name: ClassVar[str] = "self-undermining"
    tau: float = 4.0
    omega: float = 0.004
