"""Linking a patient's name to conditions by probing a released masked LM (the "Probe" attack).

Paper: Eric Lehman, Sarthak Jain, Karl Pichotta, Yoav Goldberg, Byron C. Wallace. "Does BERT Pretrained on
Clinical Notes Reveal Sensitive Data?" NAACL 2021 (probing for name-condition links), the setting of Li et al.,
"Semantics-Preserved Distortion for Personal Privacy Protection in Information Management", §6.
Threat model: the adversary holds the released weights (release kind ``model``), knows a patient's name and the
public vocabulary of conditions with their frequencies (``bench.core.releases.ModelRelease``), and wants the
patient's conditions; never the notes.

For each probed patient and each condition of the vocabulary, the sentence ``template`` is filled with the name
and the condition, the condition's WordPieces all replaced by [MASK], and the condition is scored by the mean
log-probability the MLM gives its pieces at those positions (all rows of all patients batched). Conditions are
ranked per patient by that score; ``auc`` is the ROC AUC of the ranking against the patient's true conditions
(averaged over patients with at least one true and one false condition), ``p_at_10`` the share of true
conditions among the ten ranked first (averaged over patients). ``auc_chance`` and ``p_at_10_chance`` (version 2,
ours): the same scores of each patient's ranking against every *other* probed patient's true conditions, averaged
over all such pairs. A ranking that ignores the name (a model that learnt how common each condition is, and no
link) scores the same against any patient, so ``auc`` minus ``auc_chance`` is what the name adds.
``link`` (version 3) is that difference taken per patient (own AUC minus the mean AUC against the other probed
patients' conditions), averaged over patients, with the half-width of its 95% Student-t interval over patients
(``link_ci95``). ``link_centred`` and ``link_centred_ci95`` are the same after each condition's mean score over the
probed names is subtracted: what the model knows of how common a condition is cancels, and only what the name adds
to it remains. The adversary can do this (it needs only the weights and the names it probes), and a weak link under
a strong frequency prior shows only in this reading.

Reference (the record's ``random/`` figures): the condition-frequency baseline, not a random guess. It is the same
ranking for every patient (most frequent first; ties broken at random), scored the same way: what the adversary knows
without the model. The frequencies are the adversary's prior, counted over held-out patients (the task's evaluation
patients: neither pretrained on nor probed), each count plus ``PRIOR_SMOOTHING``. Version 3 counted every patient of
the corpus, the probed ones included.

Deviations: the vocabulary is every condition of the corpus' patients, the probed ones included, so a condition no
patient has is never ranked. The held-out patients are few (``n_eval / 10``), so the prior is coarse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import Attack, Metric, PublicKnowledge, Release, ReleaseKind, Truth, register_attack, require, within
from bench.core.components import require_pretraining
from bench.core.progress import track

PRIOR_SMOOTHING = 0.5  # added to each held-out condition count (a condition no held-out patient has still ranks)


@dataclass
class ConditionRanking:
    """Per probed patient (row), a score for each condition of the vocabulary (higher = more likely)."""

    scores: np.ndarray  # (patients, conditions)
    conditions: list[str]


@register_attack("condition-probe")
@dataclass
class ConditionProbe(Attack):
    """Rank the public conditions for each patient's name by the MLM's probability of filling them."""

    version: ClassVar[str] = "4"  # 2: auc_chance, p_at_10_chance; 3: link, link_centred and their intervals;
    # 4: the frequency baseline counts held-out patients, never the probed ones
    # 4 moved only the frequency baseline (the random reference): the probe's AUC-based figures are as before
    stable: ClassVar[dict[str, int]] = {f"privacy/{m}": 3 for m in ("auc", "auc_chance", "link", "link_ci95",
                                                                   "link_centred", "link_centred_ci95")}
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.MODEL,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("auc", True, "ROC AUC of each patient's condition ranking against the true conditions (mean)"),
        Metric("p_at_10", True, "share of true conditions among each patient's ten best-ranked conditions (mean)"),
        Metric("auc_chance", True, "auc of each patient's ranking against another probed patient's conditions (mean "
                                   "over all pairs): the ranking's score without the name-condition link"),
        Metric("p_at_10_chance", True, "p_at_10 of each patient's ranking against another probed patient's "
                                       "conditions (mean over all pairs)"),
        Metric("link", True, "per patient, auc against the own conditions minus the mean auc against the other "
                             "probed patients' (mean over patients): what the name adds to the ranking"),
        Metric("link_ci95", False, "half-width of the 95% Student-t interval of link over patients"),
        Metric("link_centred", True, "link after each condition's mean score over the probed names is subtracted "
                                     "(the model's frequency prior removed)"),
        Metric("link_centred_ci95", False, "half-width of the 95% Student-t interval of link_centred over patients"),
    )

    patients: int = within(100, "[1, 1e8]")  # patients probed (the first of the corpus; all when fewer)
    template: str = "{name} was diagnosed with {condition} ."  # the probe sentence: {name} and {condition}
    batch_size: int = within(256, "[1, 65536]")  # rows per forward pass

    def __post_init__(self) -> None:
        require(self.patients >= 1, f"condition-probe patients must be >= 1, got {self.patients}.")
        require(self.batch_size >= 1, f"condition-probe batch_size must be >= 1, got {self.batch_size}.")
        require("{name}" in self.template and "{condition}" in self.template,
                f"condition-probe template must hold {{name}} and {{condition}}, got '{self.template}'.")

    def check_task(self, task_cls: type) -> None:
        """Only a task that pretrains an MLM releases its weights."""
        require_pretraining(type(self).registry_name, task_cls)

    def attack(self, release: Release, public: PublicKnowledge) -> ConditionRanking:
        """The MLM's mean log-probability of each condition in the template, per patient."""
        from bench.models.mlm import load_mlm

        mlm = load_mlm(release.data.path)
        names = [f"{first} {last}" for first, last in release.data.known_names[: self.patients]]
        return ConditionRanking(fill_scores(mlm, self.template, names, release.data.conditions, self.batch_size),
                                list(release.data.conditions))

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> ConditionRanking:
        """The condition-frequency ranking (held-out patients' counts) for every patient (ties broken at random)."""
        counts = np.asarray(release.data.condition_counts, dtype=np.float64) + PRIOR_SMOOTHING
        rows = min(self.patients, len(release.data.known_names))
        scores = np.log(counts)[None, :] + 1e-6 * rng.random((rows, len(counts)))
        return ConditionRanking(scores, list(release.data.conditions))

    def score(self, guesses: ConditionRanking, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Mean ROC AUC and precision at 10 against each probed patient's true conditions, and against the other
        patients' (the chance level of the link)."""
        return ranking_scores(guesses, truth.records or [])


def fill_scores(mlm, template: str, names: list[str], conditions: list[str], batch_size: int) -> np.ndarray:
    """``(names, conditions)`` mean log-probabilities of each condition's pieces, all masked, in the template."""
    import torch

    from bench.models.offline_mlm import masked_logits

    tokenizer = mlm.tokenizer
    before, after = template.split("{condition}")
    pieces = [tokenizer(c, add_special_tokens=False)["input_ids"] for c in conditions]
    rows, spans = [], []
    for name in names:
        head = tokenizer(before.format(name=name), add_special_tokens=False)["input_ids"]
        tail = tokenizer(after.format(name=name), add_special_tokens=False)["input_ids"]
        for ids in pieces:
            start = 1 + len(head)
            rows.append([tokenizer.cls_token_id, *head, *[tokenizer.mask_token_id] * len(ids), *tail,
                         tokenizer.sep_token_id])
            spans.append((start, ids))
    scores = np.zeros(len(rows))
    with torch.inference_mode():
        for lo in track(range(0, len(rows), batch_size), f"condition-probe: scoring {len(rows):,} name-condition pairs",
                        unit="batches"):
            chunk = range(lo, min(len(rows), lo + batch_size))
            width = max(len(rows[i]) for i in chunk)
            ids = torch.full((len(chunk), width), tokenizer.pad_token_id, dtype=torch.long)
            attention = torch.zeros_like(ids)
            row_index, column, target = [], [], []
            for j, i in enumerate(chunk):
                ids[j, : len(rows[i])] = torch.as_tensor(rows[i])
                attention[j, : len(rows[i])] = 1
                start, wanted = spans[i]
                row_index += [j] * len(wanted)
                column += range(start, start + len(wanted))
                target += wanted
            logits = masked_logits(mlm.model, ids, torch.as_tensor(row_index), torch.as_tensor(column), attention)
            chosen = torch.log_softmax(logits.double(), dim=1)[torch.arange(len(target)), torch.as_tensor(target)]
            sums = np.bincount(np.asarray(row_index), weights=chosen.numpy(), minlength=len(chunk))
            sizes = np.bincount(np.asarray(row_index), minlength=len(chunk))
            scores[lo : lo + len(chunk)] = sums / np.maximum(sizes, 1)
    return scores.reshape(len(names), len(conditions))


def condition_truth(conditions: list[str], patients: list) -> np.ndarray:
    """``(patients, conditions)`` 0/1 matrix: which conditions each patient has."""
    return np.array([[c in p.conditions for c in conditions] for p in patients], dtype=np.float64)


def auc_matrix(scores: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """ROC AUC of ranking i (row i of ``scores``) against patient j's conditions (row j of ``truth``), every pair
    at once: the Mann-Whitney statistic from average ranks (ties count a half, as roc_auc_score); NaN where patient
    j has no condition or all of them."""
    from scipy.stats import rankdata

    positives = truth.sum(axis=1)
    ranks = rankdata(scores, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (ranks @ truth.T - positives * (positives + 1) / 2) / (positives * (truth.shape[1] - positives))


def name_link(scores: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """Mean over patients of (AUC of the patient's ranking against their own conditions) minus (its mean AUC against
    every other patient's), and the half-width of its 95% Student-t interval (1, uninformative, with fewer than two
    patients to average)."""
    return link_of(auc_matrix(scores, truth))


def link_of(auc: np.ndarray) -> tuple[float, float]:
    """``name_link`` from the ``auc_matrix`` of the rankings (row i: patient i's ranking against each patient)."""
    links = patient_links(auc)
    return mean_interval(links[np.isfinite(links)])


def patient_links(auc: np.ndarray) -> np.ndarray:
    """Per patient i, ``auc[i, i]`` minus the mean of ``auc[i, j]`` over the other patients j with a finite AUC;
    NaN where patient i has no own AUC or no other patient to compare with."""
    own = np.diag(auc)
    finite = np.isfinite(auc)
    np.fill_diagonal(finite, False)
    other = np.where(finite, auc, 0.0).sum(axis=1) / np.maximum(finite.sum(axis=1), 1)
    return np.where(np.isfinite(own) & finite.any(axis=1), own - other, np.nan)


def mean_interval(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% Student-t interval (0 and 1 for no values; 1, uninformative, for one)."""
    from bench.results.leaderboard import ci95_half_width

    if len(values) == 0:
        return 0.0, 1.0
    half = ci95_half_width([np.std(values, ddof=1) if len(values) > 1 else np.nan], [len(values)])[0]
    return float(values.mean()), float(half) if np.isfinite(half) else 1.0


def paired_link_difference(scores: np.ndarray, reference: np.ndarray, truth: np.ndarray) -> tuple[float, float, int]:
    """Centred link of ``scores`` minus that of ``reference`` (two models probed with the same names and
    conditions), paired per patient: mean difference, the half-width of its 95% interval and the patients paired.
    Pairing removes what the two models share per patient (how distinctive the patient's conditions are), the part
    of the spread that two independent intervals would count twice."""
    links = [patient_links(auc_matrix(s - s.mean(axis=0), truth)) for s in (scores, reference)]
    both = np.isfinite(links[0]) & np.isfinite(links[1])
    return (*mean_interval(links[0][both] - links[1][both]), int(both.sum()))


def ranking_scores(ranking: ConditionRanking, patients: list) -> dict[str, float]:
    """Mean ROC AUC (patients with both classes) and mean precision at 10, each against the ranked patient's own
    conditions and (``*_chance``) against every other ranked patient's; the name link, raw and with each
    condition's mean score over the ranked patients removed (``name_link``)."""
    rows = min(len(ranking.scores), len(patients))
    if rows == 0:
        return {"auc": 0.5, "p_at_10": 0.0, "auc_chance": 0.5, "p_at_10_chance": 0.0,
                "link": 0.0, "link_ci95": 1.0, "link_centred": 0.0, "link_centred_ci95": 1.0}
    scores = np.asarray(ranking.scores[:rows], dtype=np.float64)
    truth = condition_truth(ranking.conditions, patients[:rows])
    positives = truth.sum(axis=1)
    both = (positives > 0) & (positives < truth.shape[1])
    auc = auc_matrix(scores, truth)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    hits = np.zeros_like(scores)
    np.put_along_axis(hits, top, 1.0, axis=1)
    precision = hits @ truth.T / 10.0  # [i, j]: share of patient j's conditions among ranking i's top ten
    own, other = np.eye(rows, dtype=bool), ~np.eye(rows, dtype=bool)
    pairs = other & both[None, :]
    return {
        "auc": float(auc[own & both[None, :]].mean()) if both.any() else 0.5,
        "p_at_10": float(precision[own].mean()),
        "auc_chance": float(auc[pairs].mean()) if pairs.any() else 0.5,
        "p_at_10_chance": float(precision[other].mean()) if other.any() else 0.0,
        **dict(zip(("link", "link_ci95"), link_of(auc))),
        **dict(zip(("link_centred", "link_centred_ci95"), name_link(scores - scores.mean(axis=0), truth))),
    }
