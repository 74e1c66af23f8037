"""Where the main job's head training spends a step, against its arithmetic floor.

The main job (``bench run --defense texthide --attack rss``) trains the frozen-mode head for 120 epochs of 125
batches of 64: 15,000 Adam steps. This script times ``bench.models.training.train_head`` on random features of the
encoder's width (384). It times the same at width 8, where the step is almost all fixed cost: Python, autograd,
optimizer and scheduler calls. It times the step's matrix products alone. Last, it compares Adam's ``fused=True``
path with the ``foreach`` path the head uses; fused is faster, but its rounding differs, so the weights do too.

    python scripts/head_step_cost.py [--epochs 12]
"""

import argparse
import time

import numpy as np
import torch

from bench.models.training import TrainingConfig, make_head, train_head

BATCH, STEPS_PER_EPOCH = 64, 125


def head_step_ms(width: int, epochs: int, steps_per_epoch: int = STEPS_PER_EPOCH) -> float:
    """Milliseconds per training step of ``train_head`` on random features of ``width`` (no defense transform)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH * steps_per_epoch, width)).astype(np.float32)
    y = np.eye(2, dtype=np.float32)[rng.integers(0, 2, len(x))]
    started = time.perf_counter()
    train_head(x, y, lambda xb, yb, _: (xb, yb), TrainingConfig(epochs=epochs), 0)
    return (time.perf_counter() - started) / (epochs * steps_per_epoch) * 1e3


def products_ms(width: int = 384, repeats: int = 2000) -> float:
    """Milliseconds for one step's large matrix products: two forward, three backward (width x width layers)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, width, generator=generator)
    w1, w2 = torch.randn(width, width, generator=generator), torch.randn(width, width, generator=generator)
    started = time.perf_counter()
    for _ in range(repeats):
        a = x @ w1.T
        b = a @ w2.T
        b.T @ a, b @ w2, b.T @ x
    return (time.perf_counter() - started) / repeats * 1e3


def adam_paths(steps: int = 3000, width: int = 384) -> tuple[float, float, bool]:
    """Seconds for ``steps`` steps of the head's shape with Adam foreach and fused, and whether the weights agree."""

    def run(**options):
        torch.manual_seed(0)
        head = make_head(width, 2, TrainingConfig())  # the server's head: two hidden layers of the width
        optimizer = torch.optim.Adam(head.parameters(), lr=2e-3, **options)
        generator = torch.Generator().manual_seed(1)
        x = torch.randn(BATCH * 50, width, generator=generator)
        y = torch.randint(0, 2, (BATCH * 50,), generator=generator)
        started = time.perf_counter()
        for step in range(steps):
            rows = slice(step % 50 * BATCH, (step % 50 + 1) * BATCH)
            loss = torch.nn.functional.cross_entropy(head(x[rows]), y[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return time.perf_counter() - started, [p.detach() for p in head.parameters()]

    foreach_s, foreach_w = run(foreach=True)
    fused_s, fused_w = run(fused=True)
    return foreach_s, fused_s, all(torch.equal(a, b) for a, b in zip(foreach_w, fused_w))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    args = parser.parse_args()
    started = time.perf_counter()
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # the first optimizer imports torch._dynamo
    print(f"first optimizer built in {time.perf_counter() - started:.2f} s (torch._dynamo's import)")
    full, fixed, products = head_step_ms(384, args.epochs), head_step_ms(8, args.epochs), products_ms()
    print(f"head step, width 384: {full:.3f} ms; width 8 (fixed cost): {fixed:.3f} ms; "
          f"the width-384 products alone: {products:.3f} ms")
    print(f"15,000 steps: {full * 15:.1f} s now, {(fixed + products) * 15:.1f} s by fixed cost + products")
    foreach_s, fused_s, same = adam_paths()
    print(f"3,000 steps with Adam foreach {foreach_s:.2f} s, fused {fused_s:.2f} s; same weights: {same}")


if __name__ == "__main__":
    main()
