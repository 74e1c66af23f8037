"""Gradient matching (DLG, Zhu et al. 2019): recover a representation from one client update.

Public attack math, shared by the ``gradient-matching`` attack and its tests. The update is the gradient of the
loss of ``head(hide(client(e)))``: a client layer before the hiding, whose gradients the update carries (TextHide
Appendix C.1's mimic, Algorithm 2's encoder gradients), then the server's head; with ``client=None`` it is the
head's gradient alone, taken on ``hide(e)``. The attacker knows both models and the update's target; it starts
from a random dummy representation (and, against masked releases, a random dummy mask applied elementwise after
the client layer) and minimises the squared L2 distance between the gradients its dummy input produces and the
observed ones with L-BFGS (TextHide Appendix C: lr 1, history 100, 20 inner iterations per step, 1,200 steps).
A run stops early once the distance is below ``tolerance`` or L-BFGS makes no more progress: both only skip steps
that cannot change the result. Each attack is its own L-BFGS run (one joint run over a sum of independent losses
would share the line search and curvature history, a different optimiser); attacks run in parallel processes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from bench.core.progress import track
from bench.models.training import loss_fn


@dataclass(frozen=True)
class MatchingSettings:
    """L-BFGS settings of one attack."""

    steps: int = 1200  # outer L-BFGS steps
    inner: int = 20  # inner iterations per step (max_iter)
    history: int = 100  # curvature pairs kept (history_size)
    tolerance: float = 1e-12  # stop once the gradient distance is below this
    line_search: str = "strong_wolfe"  # or "none" (DLG's original lr-1 steps, which can diverge)


def match_gradients(model, observed: list[np.ndarray], target: np.ndarray, regression: bool, masked: bool,
                    settings: MatchingSettings, seed: int, client=None) -> tuple[np.ndarray, float]:
    """The dummy representation after matching, and the final gradient distance.

    ``observed`` holds the gradients of ``client``'s parameters, then of ``model``'s. Without a client layer the
    masked product is all the head's gradient sees: the dummy's magnitudes come from the matched product, its signs
    from the dummy itself.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    first = client if client is not None else model
    dim = next(m for m in first.modules() if isinstance(m, torch.nn.Linear)).in_features
    dummy = torch.randn(1, dim, generator=generator).requires_grad_(True)
    dummy_mask = torch.randn(1, dim, generator=generator).requires_grad_(True)
    variables = [dummy, dummy_mask] if masked else [dummy]
    parameters = (list(client.parameters()) if client is not None else []) + list(model.parameters())
    observed_t = [torch.as_tensor(g) for g in observed]
    target_t = torch.as_tensor(target, dtype=torch.float32)
    optimizer = torch.optim.LBFGS(variables, lr=1, history_size=settings.history, max_iter=settings.inner,
                                  line_search_fn=None if settings.line_search == "none" else settings.line_search)

    def closure():
        optimizer.zero_grad()
        hidden = client(dummy) if client is not None else dummy
        hidden = hidden * dummy_mask if masked else hidden
        grads = torch.autograd.grad(loss_fn(model(hidden), target_t, regression), parameters, create_graph=True)
        distance = sum(((g - o) ** 2).sum() for g, o in zip(grads, observed_t))
        distance.backward(inputs=variables)
        return distance

    distance = float("inf")
    for _ in range(settings.steps):
        previous = distance
        distance = float(optimizer.step(closure).detach())
        if not np.isfinite(distance) or distance < settings.tolerance or distance == previous:
            break
    if masked and client is None:  # masks are sign vectors: the matched product's magnitudes, the dummy's signs
        matched = (dummy * dummy_mask).detach()
        return (torch.sign(dummy.detach()) * matched.abs()).numpy()[0], distance
    return dummy.detach().numpy()[0], distance


def _attack_one(args) -> tuple[np.ndarray, float]:
    return match_gradients(*args)


def _worker_start() -> None:
    import torch

    torch.set_num_threads(1)  # each worker process runs one attack at a time on one thread


def run_attacks(model, updates: list[list[np.ndarray]], targets: np.ndarray, regression: bool, masked: bool,
                settings: MatchingSettings, workers: int = 1, seed: int = 0,
                client=None) -> tuple[np.ndarray, np.ndarray, float]:
    """Every update attacked independently: (recovered ``(n, d)``, final distances ``(n,)``, attacks per minute)."""
    jobs = [(model, update, targets[i], regression, masked, settings, seed * 100_003 + i, client)
            for i, update in enumerate(updates)]
    started = time.perf_counter()
    description = f"gradient matching: {len(jobs):,} client updates"
    if workers <= 1 or len(jobs) <= 1:
        results = [_attack_one(job) for job in track(jobs, description, unit="updates")]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_worker_start) as pool:
            results = list(track(pool.map(_attack_one, jobs), description, len(jobs), unit="updates"))
    minutes = (time.perf_counter() - started) / 60
    recovered = np.stack([r[0] for r in results]) if results else np.zeros((0, 0), dtype=np.float32)
    distances = np.array([r[1] for r in results])
    return recovered, distances, len(jobs) / minutes if minutes > 0 else float("inf")


def success(recovered: np.ndarray, true: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Per attack: MSE between recovered and true representation, and whether it is <= threshold."""
    mse = ((np.asarray(recovered, dtype=np.float64) - np.asarray(true, dtype=np.float64)) ** 2).mean(axis=1)
    return mse, mse <= threshold


def magnitude_success(recovered: np.ndarray, true: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """``success`` on absolute values: how well |e| is recovered, whatever the signs (which a mask may hide)."""
    return success(np.abs(np.asarray(recovered, dtype=np.float64)), np.abs(np.asarray(true, dtype=np.float64)),
                   threshold)
