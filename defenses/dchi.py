"""d_chi-privacy: calibrated multivariate noise on text representations (metric local DP).

Paper: Oluwaseyi Feyisetan, Borja Balle, Thomas Drake, Tom Diethe. "Privacy- and Utility-Preserving
Textual Analysis via Calibrated Multivariate Perturbations." WSDM 2020; and Chen Qu, Weize Kong,
Liu Yang, Mingyang Zhang, Michael Bendersky, Marc Najork. "Natural Language Understanding with
Privacy-Preserving BERT." CIKM 2021, §3.2 (the sequence, token and text-to-text mechanisms).
Threat model: the server and any eavesdropper see the noisy release; they know the public encoder,
the mechanism and eta, never the sampled noise. The client's encoder is frozen.

Noise N = r·u, u uniform on the unit sphere of R^n, r ~ Gamma(n, 1/eta): density ∝ exp(-eta·||N||),
mean radius n/eta (bench.mechanisms.dchi_noise). This module holds the sequence mechanism; the token
and text-to-text mechanisms are to follow in the same module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench import RepresentationDefense, register_defense, require
from bench.mechanisms import dchi_noise


@register_defense("dchi-sequence")
@dataclass
class DchiSequence(RepresentationDefense):
    """Adds d_chi noise to the pooled sentence representation, at training and at inference."""

    eta: float = 100.0  # privacy parameter (larger = less noise); mean noise radius is n/eta

    def __post_init__(self) -> None:
        require(self.eta > 0, f"dchi-sequence eta must be > 0, got {self.eta}.")

    def hide(self, reps, generator):
        """reps + N with N drawn independently for every representation."""
        import torch

        seed = int(torch.randint(0, 2**62, (1,), generator=generator))  # the client's secret stream
        noise = dchi_noise(len(reps), reps.shape[1], self.eta, np.random.default_rng(seed))
        return reps + torch.from_numpy(noise)
