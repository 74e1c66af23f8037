"""DP-SGD (Abadi et al. 2016, "Deep Learning with Differential Privacy"): the server's head trained privately.

Each step samples a lot by Poisson sampling (every training example joins with probability q = batch / n),
computes every example's gradient, clips each to L2 norm at most C, sums them, adds Gaussian noise of standard
deviation sigma * C and divides by the expected lot size. The optimizer (Adam, as the non-private server) then steps
on that noisy mean: what it does with it is post-processing. Opacus computes the per-example gradients
(``GradSampleModule``), clips and noises them (``DPOptimizer``) and draws the lots
(``UniformWithReplacementSampler``). The noise multiplier sigma is the smallest that keeps the whole run within the
target (epsilon, delta), found by the library's accountant (``get_noise_multiplier``); the same accountant, fed every
step taken, reports the epsilon spent. No accounting is written here.

The privacy unit is one training example: one released item the server trains on, or a tagged sentence whose
tokens' gradients are summed and clipped together. delta defaults to 1/n.
epsilon = inf is the non-private server itself: no clipping, no noise, the shuffled batches of
``bench.models.training.train_loop``, so its model is the plain server's, bit for bit.

Deviations: Adam on the noisy gradients (DP-Adam), as the non-private server trains, where the paper uses SGD; the
number of steps is the non-private server's (epochs times ceil(n / batch)), so a lot is expected to hold the batch
size, and the learning-rate schedule is unchanged. The accountant is PRV by default (Gopi et al. 2021, Opacus'
default): it computes epsilon to within 0.01 of the composed mechanism's, where RDP's conversion overstates it, so
the same target needs less noise; ``dp_accountant=rdp`` gives the bound most papers report.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from bench.core.errors import BenchError
from bench.models.generators import torch_generator

DP_NOTES = ("dp_epsilon", "dp_epsilon_spent", "dp_delta", "dp_accountant", "dp_clip", "dp_noise_multiplier",
            "dp_sample_rate", "dp_steps", "dp_sampling")  # what a run records (``DPSGD.facts``)
EPSILON_TOLERANCE = 0.01  # the binary search for sigma stops within this of the target epsilon


def noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str) -> float:
    """The noise multiplier sigma for which ``steps`` sampled Gaussian steps at rate q spend ``epsilon`` at
    ``delta`` (within ``EPSILON_TOLERANCE``, below it), per Opacus' accountant."""
    from opacus.accountants.utils import get_noise_multiplier

    try:
        return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=sample_rate,
                                          steps=steps, accountant=accountant, epsilon_tolerance=EPSILON_TOLERANCE))
    except ValueError as error:  # Opacus' "The privacy budget is too low." (sigma above 1e6)
        raise BenchError(f"no noise multiplier up to 1e6 keeps {steps} steps at sampling rate {sample_rate:.4g} "
                         f"within epsilon {epsilon:g}, delta {delta:g} ({error}); raise dp_epsilon or train fewer "
                         "steps.") from None


def spent_epsilon(sigma: float, sample_rate: float, steps: int, delta: float, accountant: str) -> float:
    """epsilon that ``steps`` sampled Gaussian steps of multiplier ``sigma`` at rate q spend at ``delta``, per
    Opacus' accountant ``accountant`` (rdp or prv)."""
    from opacus.accountants import create_accountant

    ledger = create_accountant(mechanism=accountant)
    ledger.history = [(sigma, sample_rate, steps)]
    return float(ledger.get_epsilon(delta=delta))


@dataclass
class DPSGD:
    """The server's DP-SGD settings for one run (checked as server options: ``bench.core.options.PrivateTraining``),
    and what the run spent (``facts``, for the record's notes)."""

    epsilon: float  # target epsilon for the whole training run; inf: the non-private server
    delta: float | None = None  # target delta; None: 1 / n
    clip: float = 1.0  # per-example L2 clipping norm C
    accountant: str = "prv"  # Opacus accountant: prv or rdp
    facts: dict[str, Any] = field(default_factory=dict, init=False)

    @property
    def private(self) -> bool:
        """Whether training clips and noises (a finite epsilon)."""
        return math.isfinite(self.epsilon)

    def delta_for(self, n: int) -> float:
        """delta for ``n`` training examples: the one given, else 1 / n."""
        return self.delta if self.delta is not None else 1.0 / n

    def record_plain(self, n: int, steps: int) -> None:
        """The notes of an epsilon = inf run: the non-private server, no clipping, no noise."""
        self.facts = {"dp_epsilon": math.inf, "dp_epsilon_spent": math.inf, "dp_delta": self.delta_for(n),
                      "dp_accountant": self.accountant, "dp_clip": None, "dp_noise_multiplier": 0.0,
                      "dp_sample_rate": 0.0, "dp_steps": steps,
                      "dp_sampling": "shuffled batches (epsilon = inf: the non-private server)"}

    def train(self, head, n: int, batch: Callable, config, seed: int, regression: bool, optimizer_cls,
              schedule_for=None, progress=iter):
        """Train ``head`` by DP-SGD on ``n`` examples; ``batch(idx) -> (x, y)`` gives a lot's released inputs, one row
        per example, or ``(x, y, owner)`` with several rows per example (a tagged sentence's tokens: row i belongs
        to the lot's example ``owner[i]``, whose loss is the mean over its rows, and whose gradient is clipped whole).

        ``schedule_for(optimizer, rounds)`` is the server's learning-rate schedule (None: a constant rate);
        ``progress(iterable)`` reports epochs. Returns the trained head, unwrapped (a plain module), and fills
        ``facts``."""
        from opacus import GradSampleModule
        from opacus.accountants import create_accountant
        from opacus.optimizers import DPOptimizer
        from opacus.utils.uniform_sampler import UniformWithReplacementSampler

        rounds = -(-n // config.batch_size)  # the non-private server's steps per epoch
        sample_rate = min(1.0, config.batch_size / n)
        steps = config.epochs * rounds
        delta = self.delta_for(n)
        sigma = noise_multiplier(self.epsilon, delta, sample_rate, steps, self.accountant)
        model = GradSampleModule(head, batch_first=True, loss_reduction="sum")  # per-row gradients, unscaled
        optimizer = DPOptimizer(optimizer_cls(model.parameters(), lr=config.lr), noise_multiplier=sigma,
                                max_grad_norm=self.clip, expected_batch_size=max(1, int(sample_rate * n)),
                                loss_reduction="mean", generator=torch_generator(seed, "dp-noise"))
        ledger = create_accountant(mechanism=self.accountant)
        optimizer.attach_step_hook(ledger.get_optimizer_hook_fn(sample_rate=sample_rate))
        schedule = schedule_for(optimizer, rounds) if schedule_for is not None else None
        lots = UniformWithReplacementSampler(num_samples=n, sample_rate=sample_rate, steps=rounds,
                                             generator=torch_generator(seed, "dp-lots"))
        model.train()
        with warnings.catch_warnings():
            # the head's first layer takes inputs that need no gradient; torch warns that its full backward hook
            # fires on the layer's outputs, which is all Opacus needs of it
            warnings.filterwarnings("ignore", "Full backward hook is firing", UserWarning)
            sizes = []
            for _ in progress(range(config.epochs)):
                for lot in lots:
                    sizes.append(_step(model, optimizer, lot, batch, regression))
                    if schedule is not None:
                        schedule.step()
        self.facts = {"dp_epsilon": self.epsilon, "dp_epsilon_spent": float(ledger.get_epsilon(delta=delta)),
                      "dp_delta": delta, "dp_accountant": self.accountant, "dp_clip": self.clip,
                      "dp_noise_multiplier": sigma, "dp_sample_rate": sample_rate, "dp_steps": len(sizes),
                      "dp_sampling": f"Poisson (mean lot {float(np.mean(sizes)):.1f} of expected "
                                     f"{sample_rate * n:.1f}; {sizes.count(0)} empty)"}
        return model.to_standard_module().eval()


def _step(model, optimizer, lot: list[int], batch: Callable, regression: bool) -> int:
    """One DP-SGD step on a Poisson lot (per-example gradients, clipped, summed, noised); returns the lot's size."""
    import torch

    optimizer.zero_grad()
    x, y, *owner = batch(torch.as_tensor(lot, dtype=torch.long)) if lot else (None, None)
    if x is not None and len(x):
        if not owner:  # one row per example: its loss is its row's
            _row_losses(model(x), y, regression).sum().backward()
        else:  # an example's loss is the mean of its rows'; its rows' gradients are summed into one, then clipped
            owner = torch.as_tensor(owner[0], dtype=torch.long)
            rows = torch.bincount(owner, minlength=len(lot)).clamp(min=1).to(x.dtype)
            (_row_losses(model(x), y, regression) / rows[owner]).sum().backward()
            for p in model.parameters():
                if p.requires_grad:
                    per_row = p.grad_sample
                    p.grad_sample = per_row.new_zeros((len(lot), *per_row.shape[1:])).index_add_(0, owner, per_row)
    else:  # an empty lot (or one of examples without rows): no gradient; the step still adds noise, and counts
        for p in model.parameters():
            p.grad_sample = p.new_zeros((0, *p.shape))
    optimizer.step()
    return len(lot)


def _row_losses(outputs, targets, regression: bool):
    """The per-row terms whose mean is ``bench.models.training.loss_fn``: squared error, or soft-label
    cross-entropy."""
    import torch.nn.functional as F

    if regression:
        return (outputs[:, 0] - targets[:, 0]) ** 2
    return -(targets * F.log_softmax(outputs, dim=-1)).sum(dim=1)
