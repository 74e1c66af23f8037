"""Random token replacement: the reference row of Yue et al.'s Table 1 ("Random").

Paper: Xiang Yue et al. "Differential Privacy for Text Analytics via Natural Text Sanitization." Findings of ACL
2021, Table 1 (read from the lecture slides in ``../shared/papers``), where "Random" is the utility of text whose
every token was replaced at random: the floor that SanText, SanText+ and Feyisetan et al. are compared with at
eps 1-3. Its value does not depend on eps (0.4986 on SST-2 at every eps).
Threat model: as SanText's. The release is independent of the input, so no attack can beat the prior.

Mechanism: each token is replaced by a token drawn uniformly from the token space (the encoder's regular
WordPieces, or with ``vectors=<GloVe file>`` that file's words), independently of the token: SanText's exponential
mechanism in the limit eps -> 0 (every distance weighted exp(0) = 1). The slides do not say which vocabulary the
paper's Random drew from; the harness draws from the same space as its SanText cells, so the rows compare.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench import TokenDefense, register_defense
from bench.privacy.public import SpaceRef, UniformTokens


@register_defense("random")
@dataclass
class RandomTokens(TokenDefense):
    """Every token replaced by a uniformly drawn token of the space (Yue et al. Table 1's Random row)."""

    vectors: str = ""  # GloVe-format word-vector file (work in words); empty = the WordPiece table

    def token_mechanism(self):
        """The uniform mechanism: the output is independent of the input."""
        return UniformTokens()

    def token_space(self):
        """The words of ``vectors``, or the encoder's WordPieces."""
        return SpaceRef.of(self.vectors)
