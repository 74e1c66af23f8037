"""No defense: the undefended baseline; raw sentence representations and raw text are released.

Paper: none (the reference point of every table).
Threat model: the adversary observes exactly what the client has: the plain representation from the
public encoder and, for text attacks, the original sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bench import Release, ReleaseKind, RepresentationDefense, register_defense


@register_defense()
@dataclass
class NoDefense(RepresentationDefense):
    """Releases the sentence representation unchanged (and the text itself)."""

    releases: ClassVar[tuple[ReleaseKind, ...]] = (
        ReleaseKind.SENTENCE_EMBEDDINGS, ReleaseKind.TEXT, ReleaseKind.GRADIENTS,
    )

    def run(self, cell):
        """The representation pipeline with an identity transform, plus the raw text release."""
        output = super().run(cell)
        sentences = output.releases[ReleaseKind.SENTENCE_EMBEDDINGS]
        output.releases[ReleaseKind.TEXT] = Release(
            ReleaseKind.TEXT, list(cell.data.eval.texts), sentences.owners, {"defense": "none"}
        )
        return output
