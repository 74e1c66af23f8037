"""Membership inference on a trained server: the LOSS attack and the likelihood-ratio attack (LiRA).

Paper: Nicholas Carlini, Steve Chien, Milad Nasr, Shuang Song, Andreas Terzis, Florian Tramèr. "Membership
Inference Attacks From First Principles." IEEE S&P 2022 (LiRA, online and offline); Samuel Yeom, Irene Giacomelli,
Matt Fredrikson, Somesh Jha. "Privacy Risk in Machine Learning: Analyzing the Connection to Overfitting." CSF 2018
(LOSS); the empirical ε of Matthew Jagielski, Jonathan Ullman, Alina Oprea, "Auditing Differentially Private Machine
Learning: How Private is Private SGD?" NeurIPS 2020, and Nasr et al., "Adversary Instantiation", S&P 2021.
Threat model: the adversary holds candidate examples (text and label), half of them the server's training examples
and half held-out examples of the same distribution, and asks which were trained on. It queries the deployed
service (the client's part, then the server's model; ``bench.engine.membership``) and sees the logits. It knows the
training algorithm and the defense's public parameters, and holds labelled public examples of the task's
distribution that no private split holds, on which it trains shadow models with its own randomness and secrets.

Each query's score is the logit-scaled confidence in the true label, φ = log p_y − log(1 − p_y) (§IV-B), averaged
over ``queries`` fresh queries (a token mechanism's or TextHide's randomness plays the part of the paper's
augmentations). ``method``:

- ``loss``: Yeom et al.'s test, the negated cross-entropy loss of the candidate (a member has a lower loss).
- ``lira-offline``: ``shadows`` models each trained on a random sample of the public pool as large as the server's
  training set, so no shadow holds a candidate; the one-sided test Pr[Z < φ], Z ~ N(μ_out, σ²_out) (§VI-C).
- ``lira-online``: the pool is the candidates and public examples, twice the server's training set; each shadow
  trains on a random half, and each candidate lies in exactly half of the shadows (as the authors' code draws them);
  the likelihood ratio N(φ; μ_in, σ²_in) / N(φ; μ_out, σ²_out) (Algorithm 1).

With fewer than 64 shadows the paper fits one global variance (``fixed_variance``), the default here.

Metrics (the paper's §III): AUC, the TPR at 0.1% and 1% FPR on the ROC (read at the largest FPR not above the
target; with n non-members the smallest FPR measured is 1/n), the membership advantage max(TPR − FPR) (Yeom et
al.), and the empirical ε lower bound: at each threshold, Clopper-Pearson intervals (level ``confidence``) for the
TPR and FPR give ε ≥ log((TPR_lo − δ) / FPR_hi), and with the roles of the errors swapped
ε ≥ log((TNR_lo − δ) / FNR_hi) (Nasr et al.); the largest over thresholds and both forms, at least 0.
The random reference scores candidates with random numbers: its ROC is the diagonal TPR = FPR.

One-run audit (Thomas Steinke, Milad Nasr, Matthew Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS
2023), beside every method: the adversary picks ``canaries`` public examples with random labels (mislabelled
examples, which a model fits only by memorising them); the engine trains the cell's algorithm once more on the
server's training split plus each canary independently with probability 1/2, and keeps which were included. The
adversary scores each canary by its loss under that model (black-box), guesses "in" for the ``audit_in`` lowest
losses and "out" for the ``audit_out`` highest, and ``epsilon_one_run`` is the largest ε that v correct of r
guesses certify: under ε-DP, v is dominated by Binomial(r, e^ε / (1 + e^ε)) (their Theorem 3.1 at δ = 0), so the
one-sided Clopper-Pearson lower bound p on the success rate at level ``confidence`` gives ε ≥ log(p / (1 − p)).

Deviations: the paper trains 256 shadows of the whole network with augmentations; here ``shadows`` (16) reruns of
the cell's client part and server training (with frozen features, a head each), and the query's randomness averages
instead of fitting a Gaussian per augmentation. A tagger's φ is the mean over the released tokens of a sentence. The
ε bound's threshold is chosen on the same candidates it is measured on (Jagielski et al. choose it on a separate
set), so it is optimistic by the multiplicity of thresholds; and n members and n non-members certify at most about
log(n / ln(2/α)) however perfect the attack (3.3 at n = 100, α = 0.05).

Deviation of the one-run audit: the bound is their theorem's at δ = 0 (its δ term is not applied), so it bounds ε of
a pure-DP claim; and the guess counts are fixed in advance rather than the best of several. An unseen mislabelled
canary may still be fit by chance (its random label is the model's answer half the time), so "in" guesses by loss
are the weaker half.

Limit of this setting: the adversary queries as a client of the service does, its text privatized or hidden by the
client's part with fresh randomness; an adversary holding the weights could also query the raw text, which is not
run. The server trained on the client's own draw of each member, which no query reproduces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import (
    Attack,
    BenchError,
    Metric,
    PublicKnowledge,
    Release,
    ReleaseKind,
    Task,
    Truth,
    register_attack,
    require,
    within,
)
from bench.core.progress import track
from bench.core.releases import ServerModel
from bench.core.seeding import derive_seed, numpy_generator

METHODS = ("loss", "lira-offline", "lira-online")
LOW_FPRS = {"tpr_at_fpr_0_1pct": 0.001, "tpr_at_fpr_1pct": 0.01}  # the log-scale ROC's headline points


@register_attack("membership")
@dataclass
class Membership(Attack):
    """LOSS and LiRA (offline, online) on the trained server's model; ROC figures and an empirical ε lower bound."""

    version: ClassVar[str] = "1"
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.MODEL,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("tpr_at_fpr_1pct", True, "true-positive rate at 1% false-positive rate (the headline)"),
        Metric("auc", True, "area under the ROC of member vs non-member scores (0.5: chance)"),
        Metric("tpr_at_fpr_0_1pct", True, "true-positive rate at 0.1% false-positive rate (Carlini et al.'s headline)"),
        Metric("advantage", True, "membership advantage: the largest TPR - FPR over thresholds (Yeom et al.)"),
        Metric("epsilon_lower", True, "empirical ε lower bound from Clopper-Pearson TPR/FPR at the best threshold",
               0.0, float("inf")),
        Metric("epsilon_one_run", True, "ε lower bound of a one-run audit with canaries (Steinke et al. 2023)",
               0.0, float("inf")),
    )
    check_args: ClassVar[dict] = {"shadows": 4}  # --check: a few shadows (each a rerun of the cell's training)

    method: str = "lira-online"  # loss, lira-offline or lira-online
    shadows: int = within(16, "[2, 4096]")  # shadow models (LiRA); the paper's figures use 256
    queries: int = within(1, "[1, 1024]")  # fresh queries per candidate, their φ averaged
    fixed_variance: bool = True  # one global variance (the paper's choice below 64 shadows), else per example
    delta: float | None = within(None, "[0, 1)")  # δ of the ε bound; None: 1/n, n the server's training examples
    confidence: float = within(0.95, "(0, 1)")  # level of each Clopper-Pearson interval
    canaries: int = within(100, "[0, 1e6]")  # canaries of the one-run audit (0: no audit, its ε reads 0)
    audit_in: int = within(10, "[0, 1e6]")  # the audit's "in" guesses: the canaries of lowest loss
    audit_out: int = within(10, "[0, 1e6]")  # the audit's "out" guesses: the canaries of highest loss

    def __post_init__(self) -> None:
        require(self.method in METHODS, f"membership method must be one of {', '.join(METHODS)}, got '{self.method}'.")
        require(self.shadows >= 2, f"membership shadows must be >= 2, got {self.shadows}.")
        require(self.queries >= 1, f"membership queries must be >= 1, got {self.queries}.")
        require(self.delta is None or 0 <= self.delta < 1, f"membership delta must lie in [0, 1), got {self.delta}.")
        require(0 < self.confidence < 1, f"membership confidence must lie in (0, 1), got {self.confidence}.")
        require(self.canaries >= 0, f"membership canaries must be >= 0, got {self.canaries}.")
        require(self.audit_in >= 0 and self.audit_out >= 0 and self.audit_in + self.audit_out >= 1,
                f"membership audit_in and audit_out must be >= 0 and guess at least once, got {self.audit_in} and "
                f"{self.audit_out}.")
        self.run_notes: dict = {}
        self._delta = self.delta

    def check_task(self, task_cls: type) -> None:
        """The task declares non-members, and its server answers class probabilities."""
        if getattr(task_cls, "membership_pools", Task.membership_pools) is Task.membership_pools:
            raise BenchError(f"task '{task_cls.registry_name}' declares no held-out non-members, so membership "
                             "inference has nothing to test against (the GLUE tasks declare them).")
        if task_cls.num_labels < 2:
            raise BenchError(f"membership inference scores the confidence in a class, and task "
                             f"'{task_cls.registry_name}' is a regression.")

    def attack(self, release: Release, public: PublicKnowledge) -> "Guesses":
        """A membership score per candidate (higher: more likely a member), and per canary of the one-run audit."""
        scores = self.candidate_scores(release)
        return Guesses(scores, self.audit(release.data, numpy_generator(0, "membership-canaries")))

    def audit(self, data: ServerModel, rng: np.random.Generator) -> np.ndarray:
        """Steinke et al.'s black-box audit: the canaries' negated losses under the one extra training run."""
        pool_texts, pool_labels = data.public
        count = min(self.canaries, len(pool_texts))
        if data.audit is None or count < 2:
            return np.zeros(0)
        picked = rng.permutation(len(pool_texts))[:count]
        labels = np.asarray(pool_labels)[picked]
        if labels.ndim == 1 and labels.dtype.kind in "iu":  # class ids: a random label, which only memorising fits
            labels = rng.integers(0, data.num_labels, count)
        texts = [pool_texts[i] for i in picked]
        query = data.audit(texts, labels)
        self.run_notes["membership_canaries"] = count
        return self._per_candidate(query, texts, labels, rng, log_likelihood)

    def candidate_scores(self, release: Release) -> np.ndarray:
        """One membership score per candidate (higher: more likely a member)."""
        data = release.data
        if not isinstance(data, ServerModel):
            raise BenchError("membership attacks a trained server's model; this model release is an MLM's weights.")
        if self._delta is None:
            self._delta = 1.0 / data.train_size
        rng = numpy_generator(0, "membership-queries")
        target = self.confidence_of(data.query, data, rng)
        setting = [self.method, f"queries per candidate: {self.queries}"]
        if self.method != "loss":
            setting.append(f"{self.shadows} shadows (paper: 256), "
                           f"{'one global' if self.fixed_variance else 'per-example'} variance")
        setting.append("the ε bound's threshold chosen on the scored candidates")
        self.run_notes = {"membership_query": data.query_form, "membership_candidates": len(data.candidates),
                          "membership_delta": self._delta, "membership_setting": "; ".join(setting)}
        if self.method == "loss":
            return self.loss_scores(data.query, data, rng)
        pool_texts, pool_labels = data.public
        if self.method == "lira-offline":
            require(len(pool_texts) >= data.train_size, f"lira-offline trains shadows on {data.train_size} public "
                    f"examples each and the public pool holds {len(pool_texts)}; give a smaller --n-train.")
            chosen = [rng.permutation(len(pool_texts))[: data.train_size] for _ in range(self.shadows)]
            keep = np.zeros((self.shadows, len(data.candidates)), bool)  # no shadow holds a candidate
            texts, labels = list(pool_texts), np.asarray(pool_labels)
        else:
            extra = max(0, 2 * data.train_size - len(data.candidates))
            require(len(pool_texts) >= extra, f"lira-online pads the candidates with {extra} public examples and the "
                    f"public pool holds {len(pool_texts)}; give a smaller --n-train.")
            picked = rng.permutation(len(pool_texts))[:extra]
            texts = list(data.candidates) + [pool_texts[i] for i in picked]
            labels = np.concatenate([data.labels, np.asarray(pool_labels)[picked]])
            # each pool example in exactly half of the shadows (the authors' draw): rank random numbers per column
            inside = rng.uniform(size=(self.shadows, len(texts))).argsort(axis=0) < self.shadows // 2
            chosen = [np.flatnonzero(row) for row in inside]
            keep = inside[:, : len(data.candidates)]
        scores = np.empty((self.shadows, len(data.candidates)))
        for s in track(range(self.shadows), f"training {self.shadows} shadow models", self.shadows, unit="shadows"):
            idx = chosen[s]
            query = data.shadow([texts[i] for i in idx], labels[idx], derive_seed(0, f"membership-shadow-{s}"))
            scores[s] = self.confidence_of(query, data, rng)
        self.run_notes["membership_shadows"] = self.shadows
        return lira(target, scores, keep, self.method == "lira-online", self.fixed_variance)

    def confidence_of(self, query, data: ServerModel, rng: np.random.Generator) -> np.ndarray:
        """φ of each candidate under ``query``, averaged over its units (a tagger's tokens) and ``queries`` queries."""
        return self._per_candidate(query, list(data.candidates), data.labels, rng, logit_confidence)

    def loss_scores(self, query, data: ServerModel, rng: np.random.Generator) -> np.ndarray:
        """Yeom et al.: the negated cross-entropy loss, averaged over units and ``queries`` fresh queries."""
        return self._per_candidate(query, list(data.candidates), data.labels, rng, log_likelihood)

    def _per_candidate(self, query, texts: list, labels, rng: np.random.Generator, statistic) -> np.ndarray:
        total = np.zeros(len(texts))
        for _ in range(self.queries):
            logits, units, owners = query(texts, labels, rng)
            counts = np.bincount(owners, minlength=len(texts))
            total += np.bincount(owners, statistic(logits, units), minlength=len(texts)) / np.maximum(counts, 1)
        return total / self.queries

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> "Guesses":
        """Scores drawn at random, for the candidates and the canaries: the ROC's diagonal, TPR = FPR."""
        if self._delta is None:
            self._delta = 1.0 / release.data.train_size
        return Guesses(rng.random(len(release.owners)), rng.random(self.run_notes.get("membership_canaries", 0)))

    def score(self, guesses: "Guesses", truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """AUC, TPR at low FPR, the advantage and the empirical ε lower bound from the ROC; the one-run audit's ε."""
        figures = roc_figures(np.asarray(truth.members, bool), np.asarray(guesses.scores, float), self._delta or 0.0,
                              self.confidence)
        audited = truth.canaries is not None and len(guesses.canaries) == len(truth.canaries) > 0
        figures["epsilon_one_run"] = one_run_epsilon(np.asarray(truth.canaries, bool), guesses.canaries,
                                                     self.audit_in, self.audit_out, self.confidence) if audited else 0.0
        return figures


@dataclass
class Guesses:
    """The attack's scores: one per candidate, and one per canary of the one-run audit (empty without one)."""

    scores: np.ndarray
    canaries: np.ndarray


def log_likelihood(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """log p_y: the negated cross-entropy loss of each row's true label."""
    from scipy.special import log_softmax

    return log_softmax(np.asarray(logits, np.float64), axis=1)[np.arange(len(labels)), np.asarray(labels, int)]


def logit_confidence(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """φ = log(p_y / (1 − p_y)), computed stably as z_y − logsumexp of the other logits (Carlini et al. §IV-B)."""
    from scipy.special import logsumexp

    z = np.asarray(logits, np.float64)
    rows, y = np.arange(len(z)), np.asarray(labels, int)
    others = z.copy()
    others[rows, y] = -np.inf
    return z[rows, y] - logsumexp(others, axis=1)


def lira(target: np.ndarray, shadow: np.ndarray, keep: np.ndarray, online: bool, fixed_variance: bool) -> np.ndarray:
    """LiRA's score per candidate from the target's φ and the shadows' (``keep``: which shadow trained on which).

    Online: log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²); offline: log Pr[Z < φ], Z ~ N(μ_out, σ_out²)."""
    from scipy.stats import norm

    def fit(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts = mask.sum(axis=0)
        if (counts == 0).any():
            raise BenchError("a candidate has no shadow on one side of the test: give more shadows.")
        mean = np.where(mask, shadow, 0).sum(axis=0) / counts
        if fixed_variance:
            std = np.full(len(mean), np.std(shadow[mask] - np.broadcast_to(mean, shadow.shape)[mask]))
        else:
            std = np.sqrt(np.where(mask, (shadow - mean) ** 2, 0).sum(axis=0) / counts)
        return mean, np.maximum(std, 1e-30)

    mean_out, std_out = fit(~keep)
    if not online:
        return norm.logcdf(target, mean_out, std_out)
    mean_in, std_in = fit(keep)
    return norm.logpdf(target, mean_in, std_in) - norm.logpdf(target, mean_out, std_out)


def roc_figures(members: np.ndarray, scores: np.ndarray, delta: float, confidence: float) -> dict[str, float]:
    """The metrics of ``Membership`` from member flags and scores (higher score: guessed member)."""
    from sklearn.metrics import roc_auc_score, roc_curve

    require(members.any() and not members.all(), "membership scoring needs members and non-members.")
    fpr, tpr, _ = roc_curve(members, scores, drop_intermediate=False)
    figures = {"auc": float(roc_auc_score(members, scores))}
    for name, target in LOW_FPRS.items():
        figures[name] = float(tpr[fpr <= target].max())
    figures["advantage"] = float(max(0.0, np.max(tpr - fpr)))
    figures["epsilon_lower"] = epsilon_lower_bound(tpr, fpr, int(members.sum()), int((~members).sum()), delta,
                                                   confidence)
    return figures


def one_run_epsilon(included: np.ndarray, scores: np.ndarray, guess_in: int, guess_out: int,
                    confidence: float) -> float:
    """Steinke et al.'s bound: guess "in" for the ``guess_in`` highest-scored canaries and "out" for the
    ``guess_out`` lowest; with v of r guesses correct, ε ≥ log(p / (1 − p)) for p the one-sided Clopper-Pearson lower
    bound of the success rate (at δ = 0, v is dominated by Binomial(r, e^ε / (1 + e^ε))). 0 when p ≤ 1/2."""
    from scipy.stats import beta

    guess_in, guess_out = min(guess_in, len(scores)), min(guess_out, max(0, len(scores) - guess_in))
    order = np.argsort(scores, kind="stable")
    correct = int(included[order[len(order) - guess_in:]].sum() + (~included[order[:guess_out]]).sum())
    guesses = guess_in + guess_out
    if guesses == 0 or correct == 0:
        return 0.0
    p = float(beta.ppf(1 - confidence, correct, guesses - correct + 1))
    return float(np.log(p / (1 - p))) if p > 0.5 else 0.0


def epsilon_lower_bound(tpr: np.ndarray, fpr: np.ndarray, positives: int, negatives: int, delta: float,
                        confidence: float) -> float:
    """The largest ε that the ROC's thresholds certify: for (ε, δ)-DP, TPR ≤ e^ε FPR + δ and TNR ≤ e^ε FNR + δ.

    The rates are bounded with Clopper-Pearson intervals at level ``confidence``: TPR and TNR from below, FPR and FNR
    from above (Jagielski et al. 2020, Nasr et al. 2021). 0 when no threshold certifies more."""
    from scipy.stats import beta

    alpha = 1 - confidence
    tp, fp = np.rint(tpr * positives), np.rint(fpr * negatives)
    fn, tn = positives - tp, negatives - fp

    def lower(k, n):  # Clopper-Pearson lower end of the interval for k successes in n
        return np.where(k > 0, beta.ppf(alpha / 2, np.maximum(k, 1), n - k + 1), 0.0)

    def upper(k, n):
        return np.where(k < n, beta.ppf(1 - alpha / 2, k + 1, np.maximum(n - k, 1)), 1.0)

    best = 0.0
    for hit, false in ((lower(tp, positives), upper(fp, negatives)), (lower(tn, negatives), upper(fn, positives))):
        ok = hit - delta > 0
        if ok.any():
            best = max(best, float(np.max(np.log((hit[ok] - delta) / false[ok]))))
    return best
