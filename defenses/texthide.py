"""TextHide (intra-dataset): mix k sentence representations, then flip signs with a secret mask.

Paper: Yangsibo Huang, Zhao Song, Danqi Chen, Kai Li, Sanjeev Arora. "TextHide: Tackling Data
Privacy in Language Understanding Tasks." Findings of EMNLP 2020. Algorithm 1 (intra-dataset).
Threat model: the server and any eavesdropper see hidden representations and mixed labels; they
know the encoder weights, k, m and the mechanism, but not the client's mask pool, the mixing
coefficients or the mixing partners. The server never sees raw text.

Deviations in the offline default: the encoder is frozen all-MiniLM-L6-v2 (mean-pooled, d = 384)
instead of fine-tuned bert-base-cased with its [CLS] pooler; ``--mode finetune`` trains the encoder
through the mixing as the paper does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench import RepresentationDefense, register_defense, require


@register_defense()
@dataclass
class TextHide(RepresentationDefense):
    """TextHide-intra: k-way mixing within a batch and one mask from a pool of m per example."""

    m: int = 256  # masks in the client's pool, each in {-1,+1}^d; 0 = no mask (mix-only)
    k: int = 4  # representations mixed into each hidden one; 1 = no mixing
    mask_pool: object = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        require(self.m >= 0, f"texthide m (mask pool size) must be >= 0, got {self.m}.")
        require(self.k >= 1, f"texthide k (representations mixed) must be >= 1, got {self.k}.")

    def setup(self, dim, generator):
        """Draw the client's pool of m sign masks once (Algorithm 1, line 1)."""
        import torch

        self.mask_pool = None
        if self.m > 0:
            bits = torch.randint(0, 2, (self.m, dim), generator=generator)
            self.mask_pool = bits.float() * 2 - 1

    def apply_mask(self, reps, generator):
        """Multiply each representation by a mask drawn afresh from the pool."""
        import torch

        if self.m == 0:
            return reps
        if self.mask_pool is None:
            raise RuntimeError("texthide: setup() must draw the mask pool before anything is hidden")
        choice = torch.randint(0, self.m, (len(reps),), generator=generator)
        return reps * self.mask_pool[choice]

    def hide_batch(self, reps, targets, generator):
        """Algorithm 1 for one batch: mix k members with |N(0, I_k)| weights, then mask."""
        import torch

        n = len(reps)
        weights = torch.randn(n, self.k, generator=generator).abs()
        weights = weights / weights.sum(dim=1, keepdim=True)  # lambda_i sums to 1 per example
        # member 0 is the example itself; members 1..k-1 come from k-1 random permutations
        partners = [torch.arange(n)] + [torch.randperm(n, generator=generator) for _ in range(self.k - 1)]
        partners = torch.stack(partners)  # (k, n)
        lam = weights.T.unsqueeze(-1)  # (k, n, 1)
        mixed = (lam * reps[partners]).sum(dim=0)
        mixed_targets = (lam * targets[partners]).sum(dim=0)  # labels mixed with the same weights
        return self.apply_mask(mixed, generator), mixed_targets

    def hide_inference(self, reps, generator):
        """At inference the client masks without mixing (as the authors' code does)."""
        return self.apply_mask(reps, generator)
