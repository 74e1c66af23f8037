"""TextHide: mix k sentence representations, then flip signs with a secret mask (intra and inter).

Paper: Yangsibo Huang, Zhao Song, Danqi Chen, Kai Li, Sanjeev Arora. "TextHide: Tackling Data
Privacy in Language Understanding Tasks." Findings of EMNLP 2020. §3: Algorithm 1 (TextHide-intra
and -inter) and Algorithm 2 (federated training).
Threat model: the server and any eavesdropper see hidden representations and mixed labels (and, in
federated training, the clients' gradients); they know the encoder weights, k, m, the scheme and the
public corpus, but not the clients' mask pools, the mixing coefficients or the mixing partners. The
server never sees raw text.

Deviations in the offline default: the encoder is frozen all-MiniLM-L6-v2 (mean-pooled, d = 384)
instead of fine-tuned bert-base-cased with its [CLS] pooler; ``--mode finetune`` trains the encoder
through the mixing as the paper does. Inter-TextHide mixes the private label only over the private
members and divides by their total weight, as the paper's formula gives (§3.3; the authors' code also mixes
in private labels at the public members' positions). Each example is hidden afresh every epoch, with a new
mask and new partners (§3.4: the mask of an input changes each epoch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from bench import BenchError, RepresentationDefense, added_later, register_defense, require, within
from bench.core.registry import TASKS
from bench.privacy.public import MixAndMask

SCHEMES = ("intra", "inter")
# Caps checked before anything runs, sized for a 24 GiB machine with room to spare at the widest encoder we expect
# (d = 1024, bert-large) and the documented batch size (64, TrainingConfig.batch_size):
# - hide_batch holds about three (k, batch, d) float32 tensors (the members, their stack, the weighted stack),
#   k x 64 x 1024 x 4 B x 3 = k x 768 KiB, so k = 1024 needs 768 MiB (k = 100000 needed 73 GiB);
# - setup draws the pool as int64 bits, then float32 masks: m x 1024 x (8 + 4 + 4) B = m x 16 KiB at its peak,
#   so m = 2**18 needs 4 GiB (m = 10**9 needed 15 TiB). The paper's pools are a few hundred masks; "inf" draws
#   fresh masks per example without a pool.
MAX_K = 1024
MAX_M = 2**18


@register_defense()
@dataclass
class TextHide(RepresentationDefense):
    """TextHide: k-way mixing and one mask per example from a pool of m; intra or inter, central or federated."""

    rehides_each_epoch: ClassVar[bool] = True  # §3.4: a new mask for every input each epoch

    m: int | str = within(256, "[0, 262144]")  # masks in {-1,+1}^d in the pool; 0 = none; inf = fresh per example
    k: int = within(4, "[1, 1024]")  # representations mixed into each hidden one; 1 = no mixing
    scheme: str = added_later("intra")  # intra: partners from the private batch; inter: half from a public corpus
    public: str = added_later("")  # task whose texts inter mixes in (labels unused); empty = sst2, or cola for sst2
    clients: int = within(0, "[0, 262144]", later=True)  # 0 = centralised; C >= 1 = Algorithm 2 (m/C masks per client)
    mask_pool: object = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.m, str):
            require(self.m.lower() in ("inf", "infinity", "∞"),
                    f"texthide m must be a non-negative integer or inf, got '{self.m}'.")
            self.m = "inf"
        require(self.m == "inf" or self.m >= 0, f"texthide m (mask pool size) must be >= 0, got {self.m}.")
        require(self.m == "inf" or self.m <= MAX_M, f"texthide m (mask pool size) must be at most {MAX_M} "
                f"(a pool of {MAX_M} masks of width 1024 takes 4 GiB to draw), got {self.m}; use m=inf for "
                "fresh masks.")
        require(self.k >= 1, f"texthide k (representations mixed) must be >= 1, got {self.k}.")
        require(self.k <= MAX_K, f"texthide k (representations mixed) must be at most {MAX_K} (memory grows "
                f"with k x batch x width), got {self.k}.")
        require(self.scheme in SCHEMES, f"texthide scheme must be intra or inter, got '{self.scheme}'.")
        require(self.clients >= 0, f"texthide clients must be >= 0, got {self.clients}.")
        require(self.m in (0, "inf") or self.clients <= self.m,
                f"texthide needs at least one mask per client: m={self.m} is fewer than clients={self.clients}.")
        self.pools: list = []
        self.public_members = None  # (count, generator) -> public representations to mix in

    @classmethod
    def version_for(cls, args, task_cls=None):
        """2 for inter (its labels divided by the private members' weight since then); intra is unchanged."""
        return "2" if args.get("scheme", "intra") == "inter" else cls.version

    def check(self) -> None:
        """The public task of the inter scheme must be registered."""
        if self.public:
            try:
                TASKS.get(self.public)
            except BenchError as exc:
                raise BenchError(f"texthide public='{self.public}' names no task: {exc}") from None

    def representation_mechanism(self):
        """Mixing and masking with their public parameters (never the pool, weights or partners)."""
        return MixAndMask(self.m, self.k, self.scheme, self.clients)

    def client_count(self):
        """Algorithm 2's C clients, or one for centralised training."""
        return max(1, self.clients)

    def setup(self, dim, generator):
        """Draw the pool of m sign masks once (Algorithm 1, line 1) and split it among the clients."""
        import torch

        self.dim, self.mask_pool = dim, None
        if self.m not in (0, "inf"):
            bits = torch.randint(0, 2, (self.m, dim), generator=generator)
            self.mask_pool = bits.float() * 2 - 1
        clients = max(1, self.clients)
        self.pools = [None] * clients if self.mask_pool is None else list(
            torch.tensor_split(self.mask_pool, clients))  # pool sizes sum to m

    def prepare(self, client):
        """Inter: the public corpus, encoded by the client's encoder as the private texts are."""
        if self.scheme != "inter":
            return
        name = self.public or ("cola" if client.task == "sst2" else "sst2")
        texts = client.public_texts(name)
        self.public_members = client.sampler(texts)
        self.public_size, self.public_name = len(texts), name

    def apply_mask(self, reps, generator, pool=None):
        """Multiply each representation by a mask drawn afresh from the pool (or a fresh random one)."""
        import torch

        pool = self.mask_pool if pool is None else pool
        if self.m == 0:
            return reps
        if self.m == "inf":
            return reps * (torch.randint(0, 2, reps.shape, generator=generator).float() * 2 - 1)
        if pool is None:
            raise RuntimeError("texthide: setup() must draw the mask pool before anything is hidden")
        choice = torch.randint(0, len(pool), (len(reps),), generator=generator)
        return reps * pool[choice]

    def hide_batch(self, reps, targets, generator, pool=None):
        """Algorithm 1 for one batch: mix k members with |N(0, I_k)| weights, then mask.

        Intra: member 0 is the example, members 1..k-1 its batch under k-1 random permutations.
        Inter: members at even positions are private (ceil(k/2)), at odd positions public (floor(k/2)),
        and the label is the private members' labels mixed by their weights over the sum of those weights.
        """
        import torch

        n, dim = reps.shape
        weights = torch.randn(n, self.k, generator=generator).abs()
        weights = weights / weights.sum(dim=1, keepdim=True)  # lambda_i sums to 1 per example
        # representations and targets side by side, so that one gather and one weighted sum mix both
        rows = torch.cat([reps, targets.to(reps.dtype)], dim=1)
        members = []
        for j in range(self.k):
            if self.scheme == "inter" and j % 2 == 1:
                public = self.public_members(n, generator).to(reps.dtype)
                members.append(torch.cat([public, torch.zeros_like(targets, dtype=reps.dtype)], dim=1))  # no labels
                continue
            members.append(torch.arange(n) if j == 0 else torch.randperm(n, generator=generator))
        if self.scheme == "intra":
            stacked = rows[torch.stack(members)]  # (k, n, dim + outputs)
        else:
            stacked = torch.stack([m if m.dim() == 2 else rows[m] for m in members])
        mixed = (weights.T.unsqueeze(-1) * stacked).sum(dim=0)  # labels mixed with the same weights
        labels = mixed[:, dim:]
        if self.scheme == "inter":  # public members carry no label: renormalise over the private weights
            labels = labels / weights[:, 0::2].sum(dim=1, keepdim=True)
        return self.apply_mask(mixed[:, :dim], generator, pool), labels.to(targets.dtype)

    def client_transform(self, client):
        """Client ``client`` hides with its own share of the mask pool (Algorithm 2)."""
        pool = self.pools[client] if self.pools else None
        return lambda reps, targets, generator: self.hide_batch(reps, targets, generator, pool)

    def hide_inference(self, reps, generator):
        """At inference the client masks without mixing (as the authors' code does)."""
        return self.apply_mask(reps, generator)

    def describe(self, dim):
        """The public corpus inter mixes in, and the federated split."""
        facts = {}
        if self.scheme == "inter":
            facts.update(public_corpus=self.public_name, public_corpus_size=self.public_size)
        if self.clients:
            facts["masks_per_client"] = [0 if p is None else len(p) for p in self.pools] if self.m != "inf" else "inf"
        return facts
