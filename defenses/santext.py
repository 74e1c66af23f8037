"""SanText and SanText+: natural text sanitization by the exponential mechanism over a vocabulary.

Paper: Xiang Yue, Minxin Du, Tianhao Wang, Yaliang Li, Huan Sun, Sherman S. M. Chow. "Differential
Privacy for Text Analytics via Natural Text Sanitization." Findings of ACL 2021, §3.
Threat model: the server and any eavesdropper see the sanitized token sequence; they know the
public embedding table, the mechanism and its parameters (eps, p, w), never the sampled tokens'
randomness. The client sanitizes locally; nothing else leaves it.

SanText (§3.2): every token x is replaced by y drawn from the vocabulary V with
Pr[y|x] ∝ exp(-eps·d(x, y)/2), d the Euclidean distance of the embeddings (eps-metric LDP).
SanText+ (§3.3): the sensitive set V_S is the least frequent fraction w of the client's vocabulary
(its own token counts over its train and evaluation text); a sensitive token is always replaced, a
non-sensitive one with probability p, in both cases by a token of V_S drawn with the same
exponential mechanism restricted to V_S. SanText is SanText+ with w = 1.

Vocabulary: the encoder's regular WordPiece tokens and input embedding table, as the authors'
BERT-embedding setting; ``vectors=<GloVe text file>`` gives their default word-level setting, with
V the client's words found in the file (words the file lacks become uniformly drawn words first).
Defaults: eps = 14, the authors' BERT-embedding example; p = 0.3 and w = 0.9, their SanText+
example. Deviation in the offline default: all-MiniLM-L6-v2's 384-dimensional table instead of
bert-base-uncased's, whose distances differ, so equal eps values are not equally private across
encoders: read eps against the inversion attack's unchanged-token rate in the same record.
Sampling is per distinct token and batched (bench.privacy.mechanisms.exponential_sample): no |V|×|V| matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench import InputDefense, ReleaseKind, added_later, register_defense, require
from bench.privacy.mechanisms import (
    ExponentialRows,
    least_frequent,
    santext_tokens,
    token_counts,
)


class ExponentialSanitizer(InputDefense):
    """What SanText and SanText+ share: eps, the sensitive set chosen in ``fit``, the sampling."""

    release_kind = ReleaseKind.TEXT
    sensitive_fraction: float  # w
    replace_rate: float  # p

    def __post_init__(self) -> None:
        require(self.eps > 0, f"{self.registry_name} eps must be > 0, got {self.eps}.")
        self.sensitive: np.ndarray | None = None
        self.rows: ExponentialRows | None = None
        super().__post_init__()

    def streaming(self):
        """Keep each token's distribution between calls: pretraining privatizes small batches of Zipfian text."""
        self.rows = ExponentialRows()

    def fit(self, ids, space):
        """V_S: the least frequent fraction w of the vocabulary V by the client's own token counts.

        V is the whole regular WordPiece vocabulary, or, with a word-vector file, the client's own
        words that the file has (as the reference code builds it in each setting).
        """
        counts = token_counts(ids, len(space.table))
        vocabulary = space.candidates if space.format == "wordpiece" else np.flatnonzero(counts)
        self.sensitive = least_frequent(counts, vocabulary, self.sensitive_fraction)

    def privatize(self, ids, space, rng):
        """Replace sensitive tokens always, others with probability p, by exponential-mechanism draws from V_S."""
        require(self.sensitive is not None, f"{self.registry_name}: call fit before privatize.")
        return santext_tokens(ids, space.table, self.sensitive, self.eps, self.replace_rate, rng, self.rows)

    def public_mechanism(self):
        """The exponential mechanism with its eps, p and w (V_S itself depends on private counts)."""
        return {"name": "exponential", "eps": self.eps, "p": self.replace_rate, "w": self.sensitive_fraction}

    def describe(self, dim):
        """Size of the sensitive set V_S."""
        return {"sensitive_tokens": None if self.sensitive is None else len(self.sensitive)}


@register_defense("santext")
@dataclass
class SanText(ExponentialSanitizer):
    """SanText: every token sanitized over the whole vocabulary."""

    eps: float = 14.0  # privacy parameter of the exponential mechanism (larger = less noise)
    vectors: str = added_later("")  # GloVe-format word-vector file (work in words); empty = the WordPiece table

    sensitive_fraction = 1.0
    replace_rate = 1.0  # no token is non-sensitive, so the rate never applies


@register_defense("santext-plus")
@dataclass
class SanTextPlus(ExponentialSanitizer):
    """SanText+: rare (sensitive) tokens always sanitized, others with probability p, into V_S."""

    eps: float = 14.0  # privacy parameter of the exponential mechanism (larger = less noise)
    p: float = 0.3  # probability that a non-sensitive token is sanitized
    w: float = 0.9  # fraction of the client's vocabulary, least frequent first, treated as sensitive
    vectors: str = added_later("")  # GloVe-format word-vector file (work in words); empty = the WordPiece table

    def __post_init__(self) -> None:
        require(0 <= self.p <= 1, f"santext-plus p must be in [0, 1], got {self.p}.")
        require(0 < self.w <= 1, f"santext-plus w must be in (0, 1], got {self.w}.")
        self.sensitive_fraction, self.replace_rate = self.w, self.p
        super().__post_init__()
