"""d_chi-privacy: calibrated multivariate noise on text representations (metric local DP).

Paper: Oluwaseyi Feyisetan, Borja Balle, Thomas Drake, Tom Diethe. "Privacy- and Utility-Preserving
Textual Analysis via Calibrated Multivariate Perturbations." WSDM 2020; and Chen Qu, Weize Kong,
Liu Yang, Mingyang Zhang, Michael Bendersky, Marc Najork. "Natural Language Understanding with
Privacy-Preserving BERT." CIKM 2021, §3.2 (the sequence, token and text-to-text mechanisms).
Threat model: the server and any eavesdropper see the noisy release; they know the public encoder,
the mechanism and eta, never the sampled noise. The client's encoder is frozen.

Noise N = r·u, u uniform on the unit sphere of R^n, r ~ Gamma(n, 1/eta): density ∝ exp(-eta·||N||),
mean radius n/eta (bench.privacy.mechanisms.dchi_noise). Three mechanisms, one parameter eta:
- ``dchi-sequence``: noise on the pooled sentence representation (``sentence_embeddings``), drawn once per
  training example (the client releases its training split once; more draws would compose the guarantee), so with
  frozen features only: Qu et al.'s user-side encoder is frozen too (their §3.3);
- ``dchi-token`` (M_rep): noise on each regular token's input embedding (``token_embeddings``); the
  server adds [CLS]/[SEP] and position embeddings itself and keeps the embedding layer frozen;
- ``dchi-text`` (M_txt): each noisy vector mapped to its nearest regular vocabulary token by exact
  search, and the token sequence released (``text``, as WordPiece ids); with ``vectors=<GloVe file>``
  it works in that file's words, as Feyisetan et al. do, and releases text.
Deviation in the offline default: the vocabulary table is all-MiniLM-L6-v2's (384 dimensions, the
bert-base-uncased WordPiece vocabulary) instead of bert-base-uncased's 768-dimensional one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import ReleaseKind, RepresentationDefense, TokenDefense, added_later, register_defense, require, within
from bench.privacy.mechanisms import dchi_noise
from bench.privacy.public import DchiNearestToken, DchiSentenceNoise, DchiTokenNoise, SpaceRef


class EtaParameter:
    """The privacy parameter shared by the three mechanisms: validation and the mean noise radius."""

    def __post_init__(self) -> None:
        require(self.eta > 0, f"{self.registry_name} eta must be > 0, got {self.eta}.")

    def describe(self, dim):
        """The mean noise radius n/eta, to read eta against the representation's scale."""
        return {"mean_noise_radius": dim / self.eta}


@register_defense("dchi-sequence")
@dataclass
class DchiSequence(EtaParameter, RepresentationDefense):
    """Adds d_chi noise to the pooled sentence representation, at training and at inference."""

    # 2: the training split is released once (one noise draw per example) instead of afresh every epoch
    version: ClassVar[str] = "2"

    eta: float = within(100.0, "[1e-4, 1e30]")  # privacy parameter (larger = less noise); mean noise radius is n/eta

    def representation_mechanism(self):
        """d_chi noise on sentence representations, with its eta."""
        return DchiSentenceNoise(self.eta)

    def hide(self, reps, generator):
        """reps + N with N drawn independently for every representation."""
        import torch

        seed = int(torch.randint(0, 2**62, (1,), generator=generator))  # the client's secret stream
        noise = dchi_noise(len(reps), reps.shape[1], self.eta, np.random.default_rng(seed))
        return reps + torch.from_numpy(noise)


@register_defense("dchi-token")
@dataclass
class DchiToken(EtaParameter, TokenDefense):
    """M_rep: releases every regular token's embedding plus d_chi noise (Qu et al. §3.2)."""

    releases: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.TOKEN_EMBEDDINGS,)

    eta: float = within(100.0, "[1e-4, 1e30]")  # privacy parameter (larger = less noise); mean noise radius is n/eta

    def token_mechanism(self):
        """phi(w) + N for every token w."""
        return DchiTokenNoise(self.eta)


@register_defense("dchi-text")
@dataclass
class DchiText(EtaParameter, TokenDefense):
    """M_txt: releases the nearest vocabulary token to each noisy token embedding (Feyisetan et al. Alg. 1)."""

    eta: float = within(100.0, "[1e-4, 1e30]")  # privacy parameter (larger = less noise); mean noise radius is n/eta
    vectors: str = added_later("")  # GloVe-format word-vector file (work in words); empty = the WordPiece table

    def token_mechanism(self):
        """argmin_v ||phi(v) - (phi(w) + N)|| over the space's tokens v."""
        return DchiNearestToken(self.eta)

    def token_space(self):
        """The words of ``vectors``, or the encoder's WordPieces."""
        return SpaceRef.of(self.vectors)
