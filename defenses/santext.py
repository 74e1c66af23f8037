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
Deviation in the WordPiece setting: V is every regular WordPiece of the table, including the pieces the client
never used, rather than the client's own pieces; those unused pieces have the lowest counts, so they fill V_S
first (on SST-2's 8,000 + 872 sentences at w = 0.9, 20,107 of V_S's 26,571 pieces are unused), and more of the
client's tokens are non-sensitive than under a vocabulary of its own pieces (88% of its token occurrences against
73%), which raises both utility and the unchanged-token rate of the records (``python scripts/known_limits.py
santext-vocabulary``).
Defaults: eps = 14, the authors' BERT-embedding example; p = 0.3 and w = 0.9, their SanText+
example. Deviation in the offline default: all-MiniLM-L6-v2's 384-dimensional table instead of
bert-base-uncased's, whose distances differ, so equal eps values are not equally private across
encoders: read eps against the inversion attack's unchanged-token rate in the same record.
Sampling is per distinct token and batched (bench.privacy.mechanisms.exponential_sample): no |V|×|V| matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench import TokenDefense, added_later, register_defense, require, within
from bench.privacy.public import ExponentialMechanism, SpaceRef


@register_defense("santext")
@dataclass
class SanText(TokenDefense):
    """SanText: every token sanitized over the whole vocabulary (SanText+ with w = 1)."""

    eps: float = within(14.0, "(0, 1e30]")  # privacy parameter of the exponential mechanism (larger = less noise)
    vectors: str = added_later("")  # GloVe-format word-vector file (work in words); empty = the WordPiece table

    def __post_init__(self) -> None:
        require(self.eps > 0, f"santext eps must be > 0, got {self.eps}.")

    def token_mechanism(self):
        """The exponential mechanism over all of V (every token sensitive, so p never applies)."""
        return ExponentialMechanism(self.eps, p=1.0, w=1.0)

    def token_space(self):
        """The words of ``vectors``, or the encoder's WordPieces."""
        return SpaceRef.of(self.vectors)


@register_defense("santext-plus")
@dataclass
class SanTextPlus(TokenDefense):
    """SanText+: rare (sensitive) tokens always sanitized, others with probability p, into V_S."""

    eps: float = within(14.0, "(0, 1e30]")  # privacy parameter of the exponential mechanism (larger = less noise)
    p: float = within(0.3, "[0, 1]")  # probability that a non-sensitive token is sanitized
    w: float = within(0.9, "(0, 1]")  # fraction of the client's vocabulary, least frequent first, treated as sensitive
    vectors: str = added_later("")  # GloVe-format word-vector file (work in words); empty = the WordPiece table

    def __post_init__(self) -> None:
        require(self.eps > 0, f"santext-plus eps must be > 0, got {self.eps}.")
        require(0 <= self.p <= 1, f"santext-plus p must be in [0, 1], got {self.p}.")
        require(0 < self.w <= 1, f"santext-plus w must be in (0, 1], got {self.w}.")

    def token_mechanism(self):
        """The exponential mechanism with its eps, p and w; V_S is fitted on the client's own counts."""
        return ExponentialMechanism(self.eps, p=self.p, w=self.w)

    def token_space(self):
        """The words of ``vectors``, or the encoder's WordPieces."""
        return SpaceRef.of(self.vectors)
