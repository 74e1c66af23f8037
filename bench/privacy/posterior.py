"""Bayesian inversion of token-level text mechanisms: the most probable input given the output.

For a released token y the guess is argmax_x prior(x) · Pr[y | x], with the prior from a public
corpus' token frequencies and Pr[y | x] from the public mechanism (Qu et al. 2021 §5.4 name the
unchanged-token guess; this is the stronger Bayes-optimal variant under the given prior):

- ``exponential`` (SanText, SanText+): exact. Pr[y|x] = [x ∉ V_S]·(1-p)·[y = x]
  + ([x ∈ V_S] + [x ∉ V_S]·p)·[y ∈ V_S]·softmax_{V_S}(-eps·d(x, ·)/2)[y], with V_S recomputed by
  the adversary from the corpus' token counts (the mechanism's rule, on public data).
- ``dchi-text``: the nearest-token channel has no closed form. It is estimated by running the public
  mechanism ``trials`` times for each candidate input (the ``support`` most frequent corpus tokens
  and every released token) under a keep-or-scatter model: x stays x with its simulated keep rate,
  else lands on y with the pooled landing frequency of y. Per-pair counts from a few trials were
  tried first and lost to the unchanged guess: single chance hits from frequent tokens dominated.
  The model ignores that changed tokens land near x, which matters only when little changes.

Both are computed per distinct released token, in chunks: never a |V|×|V| matrix.
"""

from __future__ import annotations

import numpy as np

from bench.core.errors import BenchError
from bench.privacy.mechanisms import dchi_token_text, exponential_log_probs, least_frequent


def exponential_log_channel(
    inputs: np.ndarray, outputs: np.ndarray, table: np.ndarray, sensitive: np.ndarray, eps: float, p: float,
    targets=None,
) -> np.ndarray:
    """log Pr[y | x] of SanText+ (SanText when ``sensitive`` is everything), ``(len(inputs), len(outputs))``.

    ``targets``: ``(table[sensitive], its squared row norms)`` as torch tensors, for callers that ask chunk by chunk.
    """
    import torch

    in_set = np.isin(outputs, sensitive)
    if targets is None:
        targets = sensitive_targets(table, sensitive)
    log_probs = exponential_log_probs(torch.from_numpy(table[inputs]), *targets, scale=eps / 2).numpy()
    inputs_sensitive = np.isin(inputs, sensitive)
    result = np.full((len(inputs), len(outputs)), -np.inf)
    with np.errstate(divide="ignore"):
        replaced = np.where(inputs_sensitive, 0.0, np.log(p))[:, None]
        result[:, in_set] = replaced + log_probs[:, np.searchsorted(sensitive, outputs[in_set])]
        kept_row, kept_col = np.nonzero((inputs[:, None] == outputs[None, :]) & ~inputs_sensitive[:, None])
        result[kept_row, kept_col] = np.logaddexp(result[kept_row, kept_col], np.log1p(-p))
    return result


def sensitive_targets(table: np.ndarray, sensitive: np.ndarray):
    """The sensitive tokens' embeddings and their squared norms, torch float32 (the exponential channel's targets)."""
    import torch

    targets = torch.from_numpy(np.ascontiguousarray(table[sensitive])).float()
    return targets, targets.square().sum(dim=1)


def keep_or_scatter_log_channel(
    inputs: np.ndarray, outputs: np.ndarray, keep: np.ndarray, scatter: np.ndarray
) -> np.ndarray:
    """log Pr[y | x] = log([y = x]·keep(x) + (1 - keep(x))·scatter(y)), ``(len(inputs), len(outputs))``."""
    same = inputs[:, None] == outputs[None, :]
    with np.errstate(divide="ignore"):
        return np.log(same * keep[:, None] + (1 - keep[:, None]) * scatter[None, :])


def estimate_keep_and_scatter(
    inputs: np.ndarray, perturb, trials: int, vocab_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """By simulation: each input's probability of being kept, and where changed tokens land
    (pooled over all inputs, add-one smoothed over the vocabulary, indexed by token id)."""
    produced = perturb([np.repeat(inputs, trials)], rng)[0]
    kept = produced == np.repeat(inputs, trials)
    keep = kept.reshape(len(inputs), trials).mean(axis=1)
    landed = np.bincount(produced[~kept], minlength=vocab_size) + 1.0
    return keep, landed / landed.sum()


def bayes_guesses(
    released: list[np.ndarray],
    mechanism,
    table: np.ndarray,
    regular: np.ndarray,
    corpus_counts: np.ndarray,
    rng: np.random.Generator,
    trials: int = 20,
    support: int = 2000,
    chunk: int = 256,
) -> list[np.ndarray]:
    """The maximum-a-posteriori input token for every released token, per sentence."""
    lengths = [len(x) for x in released]
    flat = np.concatenate(released) if released else np.zeros(0, dtype=np.int64)
    outputs, inverse = np.unique(flat, return_inverse=True)
    found = mechanism.bayes_channel(outputs, table, regular, corpus_counts, rng, trials, support)
    if found is None:
        raise BenchError(f"no Bayesian channel for the public mechanism '{mechanism.name}'.")
    inputs, channel = found
    best_score = np.full(len(outputs), -np.inf)
    best = outputs.copy()  # an output no candidate explains is guessed as itself
    for start in range(0, len(inputs), chunk):
        rows = inputs[start : start + chunk]
        scores = np.log(corpus_counts[rows].astype(float))[:, None] + channel(rows)
        top = np.argmax(scores, axis=0)
        top_score = scores[top, np.arange(len(outputs))]
        better = top_score > best_score
        best_score[better], best[better] = top_score[better], rows[top[better]]
    guessed = best[inverse]
    return np.split(guessed, np.cumsum(lengths)[:-1]) if lengths else []


def exponential_channel(eps, p, w, outputs, table, regular, corpus_counts):
    """SanText+'s exact channel: candidate inputs (the corpus' regular tokens) and ``rows -> log Pr``."""
    inputs = regular[corpus_counts[regular] > 0]
    sensitive = least_frequent(corpus_counts, regular, w)
    targets = sensitive_targets(table, sensitive)  # once, not once per chunk of inputs

    def exponential(rows):
        return exponential_log_channel(rows, outputs, table, sensitive, eps, p, targets)

    return inputs, exponential


def nearest_token_channel(eta, outputs, table, regular, corpus_counts, rng, trials, support):
    """d_chi text-to-text's keep-or-scatter channel, simulated: candidate inputs and ``rows -> log Pr``."""
    inputs = regular[corpus_counts[regular] > 0]
    frequent = inputs[np.argsort(-corpus_counts[inputs], kind="stable")[:support]]
    inputs = np.union1d(frequent, outputs[corpus_counts[outputs] > 0])  # each output may be its own input

    def perturb(ids, generator):
        return dchi_token_text(ids, table, regular, eta, generator)

    keep, scatter = estimate_keep_and_scatter(inputs, perturb, trials, len(table), rng)
    keep_of = dict(zip(inputs.tolist(), keep))

    def keep_or_scatter(rows):
        return keep_or_scatter_log_channel(rows, outputs, np.array([keep_of[int(x)] for x in rows]),
                                           scatter[outputs])

    return inputs, keep_or_scatter
