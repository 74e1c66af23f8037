"""Empirical privacy audit of the local token mechanisms, as implemented.

A metric-DP mechanism M claims, for any two inputs x, x' and any output event E,
Pr[M(x) ∈ E] <= exp(eps·d(x, x')) · Pr[M(x') ∈ E]. The audit runs M many times on each of a pair of
tokens at a known distance d in the mechanism's own embedding space and bounds the privacy loss
ln(Pr[M(x) ∈ E] / Pr[M(x') ∈ E]) from below with Clopper-Pearson intervals (scipy.stats.beta).
A lower bound above the claim is a bug: the mechanism leaks more than it says.

The claims (``claimed_loss``):
- d_chi token noise (Qu et al. §3.2.3): density ∝ exp(-eta·||N||), so eta·d for any output region;
- d_chi nearest token (Qu et al. §3.2.4, Feyisetan et al.): post-processing of the above, eta·d;
- SanText (Yue et al. §3.2): Pr[y|x] ∝ exp(-eps·d(x, y)/2) over V; both the exponent and the
  normaliser change by at most eps·d/2, so eps·d;
- SanText+ (Yue et al. §3.3, Definition 3, UMLDP): on protected outputs y ∈ V_P = V_S the ratio is at
  most exp(eps·d + eps_0), with eps_0 = ln(1/p) when exactly one of x, x' is sensitive (a
  non-sensitive token reaches V_S with probability p only) and 0 otherwise. An unprotected output
  y ∉ V_P may come from one input only, y itself: the audit counts any other as a violation.

Events are built from the releases, in two halves. Every release is reduced to the likelihood-ratio
statistic T(z) = ||z - phi(x')|| - ||z - phi(x)|| of its vector (a token release: of its embedding),
binned at quantiles of the first half; a token release is also taken as itself. On the first half,
bins and tokens are ranked by their empirical ratio; the candidate events are the top 1, 2, 4, ...
of them, in each direction. On the second half, each event gets a lower bound
ln(lower_x) - ln(upper_x'): two one-sided Clopper-Pearson bounds share the event's error budget. The
budget alpha is split evenly (Bonferroni) over the pairs and their events, so every pair's audited
bound holds at once with probability at least 1 - alpha.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from bench.core.params import require
from bench.privacy.public import DchiNearestToken, DchiTokenNoise, ExponentialMechanism, TokenMechanism

VECTOR_BINS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97, 0.99, 0.997, 0.999)
UNPROTECTED = -1  # the label of an output outside V_P (SanText+'s own-token releases): never in an event


@dataclass
class PairAudit:
    """One pair's audit: the claim against the audited lower bound of its privacy loss."""

    x: int
    x_prime: int
    distance: float  # Euclidean distance of the pair's embeddings in the mechanism's space
    kind: str  # "" or, for SanText+, which of the pair is sensitive ("S/S", "S/N", "N/N")
    claim: float  # the loss the mechanism claims for this pair (eps·d, plus eps_0 for SanText+)
    lower: float  # audited lower bound of the loss (0 when no event bounds it above 0: a loss is never negative)
    estimate: float  # the empirical loss of the event that gave ``lower``, on the evaluation half
    event_size: int  # outputs (or bins) in that event
    events: int  # candidate events the budget was split over
    ceiling: float  # the largest bound these trials and this budget can give (all of x's releases, none of x')
    trials: int  # releases of each input (half select, half evaluate)
    violations: int = 0  # SanText+: unprotected outputs released from another input than themselves
    exact: float | None = None  # the exact loss of the implemented distribution, where it has a closed form

    @property
    def exceeds(self) -> bool:
        """The audited bound lies above the claim, or an unprotected output leaked from another input."""
        return self.lower > self.claim + 1e-9 or self.violations > 0

    def as_dict(self) -> dict[str, Any]:
        """The fields and the verdict (bench.core.jsontext.strict_json writes an infinity as null)."""
        return asdict(self) | {"exceeds": self.exceeds}


class LeakyMechanism(TokenMechanism):
    """A planted bug: the wrapped mechanism, except that with probability ``rate`` a token is released as it is
    (its id, or its exact embedding for a vector release). The audit must find it."""

    name = "leaky"

    def __init__(self, inner: TokenMechanism, rate: float) -> None:
        require(0 <= rate < 1, f"the leak rate must be in [0, 1), got {rate}.")
        self.inner, self.rate = inner, rate
        self.release_kind = inner.release_kind

    def describe(self):
        """The leak's rate and the wrapped mechanism's description."""
        return {"mechanism": self.name, "rate": self.rate, "inner": self.inner.describe()}

    def fit(self, ids, space):
        """The wrapped mechanism's fit."""
        self.inner.fit(ids, space)

    def privatize(self, ids, space, rng):
        """The wrapped release, with each token leaked as it is with probability ``rate``."""
        released = self.inner.privatize(ids, space, rng)
        result = []
        for sentence, out in zip(ids, released):
            leak = rng.random(len(sentence)) < self.rate
            out = np.array(out, copy=True)
            out[leak] = space.table[sentence[leak]] if out.ndim == 2 else sentence[leak]
            result.append(out)
        return result

    def __getattr__(self, name):
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def base_mechanism(mechanism: TokenMechanism) -> TokenMechanism:
    """The mechanism whose claim applies (a planted leak claims what the mechanism it wraps claims)."""
    return mechanism.inner if isinstance(mechanism, LeakyMechanism) else mechanism


def auditable(mechanism: TokenMechanism) -> bool:
    """Whether the audit knows the mechanism's claim."""
    return isinstance(base_mechanism(mechanism), (DchiTokenNoise, DchiNearestToken, ExponentialMechanism))


def sensitive_set(mechanism: TokenMechanism) -> np.ndarray | None:
    """SanText+'s fitted V_S (= V_P), or None for a mechanism whose outputs are all protected."""
    base = base_mechanism(mechanism)
    return base.sensitive if isinstance(base, ExponentialMechanism) else None


def claimed_loss(mechanism: TokenMechanism, x: int, x_prime: int, distance: float) -> tuple[float, str]:
    """The privacy loss the mechanism claims for the pair, and the pair's kind (SanText+: "S/N" and so on)."""
    base = base_mechanism(mechanism)
    if isinstance(base, (DchiTokenNoise, DchiNearestToken)):
        return base.eta * distance, ""
    require(isinstance(base, ExponentialMechanism), f"the audit knows no claim of mechanism '{base.name}'.")
    sensitive = base.sensitive
    if sensitive is None or len(sensitive) == 0 or base.w >= 1:
        return base.eps * distance, ""
    inside = [bool(np.isin(t, sensitive)) for t in (x, x_prime)]
    kind = "/".join("S" if s else "N" for s in inside)
    if inside[0] == inside[1]:
        return base.eps * distance, kind
    return base.eps * distance + (np.log(1 / base.p) if base.p > 0 else np.inf), kind


def exact_loss(mechanism: TokenMechanism, space, x: int, x_prime: int) -> float | None:
    """The exponential mechanism's exact loss max_y |ln Pr[y|x] - ln Pr[y|x']| over V_P, in float64 from its
    formula (None for another mechanism, or for a planted leak, whose distribution the formula does not give)."""
    if not isinstance(mechanism, ExponentialMechanism) or mechanism.sensitive is None:
        return None
    targets = space.table[mechanism.sensitive].astype(np.float64)
    rows = []
    for token in (x, x_prime):
        scores = -mechanism.eps / 2 * np.linalg.norm(targets - space.table[token].astype(np.float64), axis=1)
        log_probs = scores - np.logaddexp.reduce(scores)
        if mechanism.w < 1 and not np.isin(token, mechanism.sensitive):
            log_probs = log_probs + (np.log(mechanism.p) if mechanism.p > 0 else -np.inf)
        rows.append(log_probs)
    with np.errstate(invalid="ignore"):
        gap = np.abs(rows[0] - rows[1])
    return float(np.nanmax(gap)) if np.isfinite(rows[0]).any() or np.isfinite(rows[1]).any() else None


def neighbour_pairs(space, anchors: int, ranks: tuple[int, ...], rng: np.random.Generator,
                    sensitive: np.ndarray | None = None) -> list[tuple[int, int, float]]:
    """``anchors`` random tokens of the space, each paired with its ``ranks``-th nearest token (1 = the nearest):
    (x, x', d(x, x')). With a sensitive set, anchors alternate between V_S and the rest, so that every kind of
    SanText+ pair is audited."""
    require(anchors >= 1, f"anchors must be at least 1, got {anchors}.")
    candidates = np.asarray(space.candidates)
    require(all(1 <= r < len(candidates) for r in ranks),
            f"ranks must lie in [1, {len(candidates) - 1}] (the space has {len(candidates)} tokens), got {ranks}.")
    pools = [candidates]
    if sensitive is not None and 0 < len(sensitive) < len(candidates):
        pools = [np.asarray(sensitive), np.setdiff1d(candidates, sensitive)]
    table = space.table[candidates].astype(np.float64)
    pairs = []
    for number in range(anchors):
        pool = pools[number % len(pools)]
        x = int(pool[rng.integers(len(pool))])
        distances = np.linalg.norm(table - space.table[x].astype(np.float64), axis=1)
        order = np.argsort(distances, kind="stable")
        order = order[candidates[order] != x]
        for rank in ranks:
            other = order[rank - 1]
            pairs.append((x, int(candidates[other]), float(distances[other])))
    return pairs


def releases(mechanism: TokenMechanism, space, x: int, x_prime: int, trials: int,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``trials`` releases of each token of the pair, in one batched call (two sentences of repeated tokens)."""
    out = mechanism.privatize([np.full(trials, x, dtype=np.int64), np.full(trials, x_prime, dtype=np.int64)],
                              space, rng)
    return np.asarray(out[0]), np.asarray(out[1])


def likelihood_statistic(vectors: np.ndarray, origin: np.ndarray, other: np.ndarray) -> np.ndarray:
    """T(z) = ||z - other|| - ||z - origin||: d_chi noise's log density ratio of origin over other is eta·T."""
    z = vectors.astype(np.float64)
    return np.linalg.norm(z - other.astype(np.float64), axis=1) - np.linalg.norm(z - origin.astype(np.float64), axis=1)


def candidate_events(first: np.ndarray, second: np.ndarray) -> list[tuple[np.ndarray, bool]]:
    """Events (sets of labels) chosen on a selection half, each with its direction (True: ``first`` over
    ``second``): the top 1, 2, 4, ... labels by smoothed empirical ratio, one way and then the other."""
    labels = np.union1d(first, second)
    labels = labels[labels != UNPROTECTED]
    if not len(labels):
        return []
    a = np.searchsorted(labels, first[first != UNPROTECTED])
    b = np.searchsorted(labels, second[second != UNPROTECTED])
    count_a = np.bincount(a, minlength=len(labels)) + 0.5
    count_b = np.bincount(b, minlength=len(labels)) + 0.5
    ratio = np.log(count_a / len(first)) - np.log(count_b / len(second))
    events = []
    for score, mass, forward in ((ratio, count_a, True), (-ratio, count_b, False)):
        order = np.lexsort((-mass, -score))
        size = 1
        while True:
            events.append((labels[order[: min(size, len(labels))]], forward))
            if size >= len(labels):
                break
            size *= 2
    return events


def event_bound(first: np.ndarray, second: np.ndarray, event: np.ndarray, alpha: float) -> tuple[float, float]:
    """Lower confidence bound and point estimate of ln(Pr[first ∈ E] / Pr[second ∈ E]); ``alpha`` is the
    event's error budget, split between two one-sided Clopper-Pearson bounds."""
    from scipy.stats import beta

    k_a, k_b = int(np.isin(first, event).sum()), int(np.isin(second, event).sum())
    n_a, n_b = len(first), len(second)
    low = beta.ppf(alpha / 2, k_a, n_a - k_a + 1) if k_a > 0 else 0.0
    high = beta.ppf(1 - alpha / 2, k_b + 1, n_b - k_b) if k_b < n_b else 1.0
    with np.errstate(divide="ignore"):
        lower = float(np.log(low) - np.log(high))
        estimate = float(np.log(k_a / n_a) - np.log(k_b / n_b)) if k_a else -np.inf
    return lower, estimate


def views(mechanism: TokenMechanism, space, x: int, x_prime: int, out_x: np.ndarray, out_y: np.ndarray, half: int):
    """The releases as discrete labels, each view split into (selection x, selection x', evaluation x, evaluation x').

    Vectors: bins of T(z). Tokens: their ids, and bins of T(phi(y)), which ranks outputs by how much nearer x
    than x' they lie (the exponential mechanism's log ratio is eps/2 · T(phi(y)) plus a constant). Outputs
    outside V_P (SanText+'s own-token releases) get the label ``UNPROTECTED``, which no event holds."""
    found = []
    if out_x.ndim == 2:
        found.append(_binned(likelihood_statistic(out_x, space.table[x], space.table[x_prime]),
                             likelihood_statistic(out_y, space.table[x], space.table[x_prime]), half))
        return found
    protected = sensitive_set(mechanism)
    masks = [np.ones(len(out), dtype=bool) if protected is None else np.isin(out, protected) for out in (out_x, out_y)]
    ids = [np.where(mask, out, UNPROTECTED).astype(np.int64) for out, mask in zip((out_x, out_y), masks)]
    found.append((ids[0][:half], ids[1][:half], ids[0][half:], ids[1][half:]))
    stats = [likelihood_statistic(space.table[out], space.table[x], space.table[x_prime]) for out in (out_x, out_y)]
    binned = _binned(stats[0], stats[1], half, masks)
    found.append(binned)
    return found


def _binned(stat_x: np.ndarray, stat_y: np.ndarray, half: int, masks=None):
    """Bins of a statistic at quantiles (``VECTOR_BINS``) of the selection half, pooled over both inputs."""
    masks = masks or [np.ones(len(stat_x), dtype=bool), np.ones(len(stat_y), dtype=bool)]
    pooled = np.concatenate([stat_x[:half][masks[0][:half]], stat_y[:half][masks[1][:half]]])
    edges = np.unique(np.quantile(pooled, VECTOR_BINS)) if len(pooled) else np.zeros(0)
    labels = [np.where(mask, np.searchsorted(edges, stat, side="right"), UNPROTECTED)
              for stat, mask in ((stat_x, masks[0]), (stat_y, masks[1]))]
    return labels[0][:half], labels[1][:half], labels[0][half:], labels[1][half:]


def unprotected_violations(mechanism: TokenMechanism, x: int, x_prime: int, out_x, out_y) -> int:
    """SanText+: releases outside V_P that are not the input itself (Definition 3 ii allows only those)."""
    protected = sensitive_set(mechanism)
    if protected is None or out_x.ndim == 2:
        return 0
    pairs = ((x, out_x), (x_prime, out_y))
    return int(sum(((~np.isin(out, protected)) & (out != token)).sum() for token, out in pairs))


def audit_pair(mechanism: TokenMechanism, space, x: int, x_prime: int, distance: float, trials: int, alpha: float,
               rng: np.random.Generator) -> PairAudit:
    """Audit one pair with ``trials`` releases of each token: half to choose events, half to bound them."""
    require(trials >= 2, f"trials must be at least 2, got {trials}.")
    require(0 < alpha < 1, f"alpha must be in (0, 1), got {alpha}.")
    claim, kind = claimed_loss(mechanism, x, x_prime, distance)
    out_x, out_y = releases(mechanism, space, x, x_prime, trials, rng)
    events = [(event, forward, ev_x, ev_y)
              for sel_x, sel_y, ev_x, ev_y in views(mechanism, space, x, x_prime, out_x, out_y, trials // 2)
              for event, forward in candidate_events(sel_x, sel_y)]
    best, budget = (-np.inf, -np.inf, 0), alpha / max(len(events), 1)
    for event, forward, ev_x, ev_y in events:
        pair = (ev_x, ev_y) if forward else (ev_y, ev_x)
        lower, estimate = event_bound(*pair, event, budget)
        if lower > best[0]:
            best = (lower, estimate, len(event))
    evaluated = trials - trials // 2
    ceiling, _ = event_bound(np.zeros(evaluated), np.ones(evaluated), np.zeros(1), budget)
    return PairAudit(x, x_prime, distance, kind, claim, max(best[0], 0.0), best[1], best[2], len(events),
                     ceiling, trials,
                     unprotected_violations(mechanism, x, x_prime, out_x, out_y),
                     exact_loss(mechanism, space, x, x_prime))


def audit(mechanism: TokenMechanism, space, pairs: list[tuple[int, int, float]], trials: int, alpha: float,
          rng: np.random.Generator) -> list[PairAudit]:
    """Audit every pair; alpha is split over the pairs, so all their bounds hold at once with probability 1 - alpha."""
    require(auditable(mechanism), f"the audit knows no claim of mechanism '{base_mechanism(mechanism).name}'.")
    require(len(pairs) >= 1, "the audit needs at least one pair.")
    return [audit_pair(mechanism, space, x, y, d, trials, alpha / len(pairs), rng) for x, y, d in pairs]
