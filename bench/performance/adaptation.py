"""``bench perf --adaptation``: privacy-adaptive pretraining throughput and the cost of privatizing on the fly.

For each token mechanism and MLM objective, it builds a pretraining run exactly as ``adapt_encoder`` does: the
public corpus, and the mechanism's defaults unless ``--defense-args``. It takes ``warmup`` untimed steps; more of
them let SanText's cache of per-token distributions fill as in a long run. Then it times ``steps`` optimizer steps.
It reports sequences per second and the share of the step spent in the mechanism. That share covers privatizing
the batch, and for ``dchi-token`` reading noisy vectors as their nearest tokens. The target is at most 20% of a
step, since Qu et al.'s pretraining privatizes on the fly.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from bench.core.params import require
from bench.data.public_corpus import public_corpus
from bench.engine.paths.tokens import public_token_mechanism
from bench.models.adaptation import OBJECTIVES, AdaptationConfig, Pretraining, adaptation_key
from bench.performance.mechanisms import build_mechanisms

PRIVATIZE_TARGET = 0.2  # the mechanism may take at most this share of a pretraining step
DEFAULT_DEFENSES = ("dchi-token", "dchi-text", "santext", "santext-plus")
CORPUS_SIZE = 2000  # public sentences the timed batches are drawn from


def time_adaptation(defense, objective: str, steps: int, batch_size: int, encoder: str = "minilm",
                    seed: int = 0, warmup: int = 1) -> dict[str, Any]:
    """Seconds, sequences/s and privatization share of ``steps`` pretraining steps after ``warmup`` steps."""
    config = AdaptationConfig(objective, steps=steps + warmup, batch_size=batch_size, corpus_size=CORPUS_SIZE,
                              seed=seed)
    sentences, _, corpus_hash = public_corpus(config.corpus, None, config.corpus_size, seed)
    mechanism = public_token_mechanism(defense)
    run = Pretraining(mechanism, encoder, config, sentences, adaptation_key(encoder, mechanism.identity(), config,
                                                                             corpus_hash))
    for _ in range(warmup):  # kernels, allocator, the mechanism's first searches and caches
        run.step()
    private_before = run.batches.privatize_seconds
    started = time.perf_counter()
    for _ in range(steps):
        run.step()
    seconds = time.perf_counter() - started
    private = run.batches.privatize_seconds - private_before
    return {"defense": defense.registry_name, "args": mechanism.describe(), "objective": objective,
            "steps": steps, "warmup": warmup, "batch_size": batch_size, "seconds": seconds,
            "sequences_per_s": steps * batch_size / seconds, "step_s": seconds / steps,
            "privatize_s_per_step": private / steps, "privatize_share": private / seconds}


def run_adaptation_perf(names: Sequence[str] | None, objectives: Sequence[str] | None, defense_args: str,
                        steps: int, batch_size: int, encoder: str, seed: int, warmup: int = 1,
                        progress: Callable[[str], None] = lambda message: None) -> list[dict[str, Any]]:
    """Time every (mechanism, objective) pair; bad names and values are one-sentence errors."""
    require(steps >= 1, f"--steps must be >= 1, got {steps}.")
    require(warmup >= 1, f"--warmup must be >= 1, got {warmup}.")
    require(batch_size >= 1, f"--batch-size must be >= 1, got {batch_size}.")
    chosen = list(objectives or OBJECTIVES)
    unknown = [o for o in chosen if o not in OBJECTIVES]
    require(not unknown, f"unknown objective {', '.join(unknown)}; choose from {', '.join(OBJECTIVES)}.")
    rows = []
    for name, defense in build_mechanisms(list(names or DEFAULT_DEFENSES), defense_args):
        require(hasattr(defense, "token_mechanism"), f"{name} is not a token mechanism: privacy-adaptive pretraining "
                                               "needs one (dchi-token, dchi-text, santext, santext-plus).")
        for objective in chosen:
            progress(f"timing {objective} MLM pretraining under {name}")
            rows.append(time_adaptation(defense, objective, steps, batch_size, encoder, seed, warmup))
    return rows


def adaptation_table(rows: list[dict[str, Any]]):
    """The rich table of ``run_adaptation_perf``'s rows."""
    from rich.table import Table

    table = Table(title=f"Privacy-adaptive pretraining: throughput, and the mechanism's share of a step "
                        f"(target <= {PRIVATIZE_TARGET:.0%})")
    for column in ("mechanism", "objective", "sequences/s", "s/step", "mechanism s/step", "share", "target"):
        table.add_column(column, justify="left" if column in ("mechanism", "objective") else "right")
    for row in rows:
        args = ",".join(f"{k}={v}" for k, v in row["args"].items() if k != "mechanism")
        table.add_row(f"{row['defense']}({args})", row["objective"], f"{row['sequences_per_s']:.1f}",
                      f"{row['step_s']:.2f}", f"{row['privatize_s_per_step']:.3f}", f"{row['privatize_share']:.1%}",
                      "met" if row["privatize_share"] <= PRIVATIZE_TARGET else "missed")
    return table
