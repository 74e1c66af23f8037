"""No defense: the undefended baseline; raw sentence representations and raw text are released.

Paper: none (the reference point of every table).
Threat model: the adversary observes exactly what the client has: the plain representation from the
public encoder, or the text's tokens themselves; a prediction API's victim trains on the raw text and answers
its plain softmax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench import ReleaseKind, RepresentationDefense, TokenDefense, register_defense
from bench.privacy.public import IdentityRepresentation, IdentityTokens


@register_defense()
@dataclass
class NoDefense(RepresentationDefense, TokenDefense):
    """Releases the sentence representation unchanged, or every token as it is."""

    releases: ClassVar[tuple[ReleaseKind, ...]] = (
        ReleaseKind.SENTENCE_EMBEDDINGS, ReleaseKind.TEXT, ReleaseKind.GRADIENTS, ReleaseKind.PREDICTIONS,
    )
    # nothing is hidden, so sending the plain representation every epoch releases nothing new: the baseline may
    # fine-tune the encoder and federate like any re-hiding defense (frozen, it is the same release each epoch)
    rehides_each_epoch: ClassVar[bool] = True

    def representation_mechanism(self):
        """The identity on representations."""
        return IdentityRepresentation()

    def token_mechanism(self):
        """The identity on tokens."""
        return IdentityTokens()
