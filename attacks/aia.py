"""Attribute inference through an extracted model: imitate the prediction API, then read attributes off it.

The private attributes are read off the imitation's hidden representation.

Paper: He et al. "Extracted BERT Model Leaks More Information than You Think!", EMNLP 2022 (the attack of Li et
al. §5.1.2 and Table 4).
Threat model: the adversary has black-box query access to the victim's API (probability vectors after the output
defense), its own query texts (1x: as many as the victim's training set), its own attribute-labelled auxiliary
texts, and the public encoder. It never sees the victim's weights, training data or the defense's noise.

Steps: (1) model extraction: query the API with the query pool and train an imitation model with soft-label
cross-entropy on the answers; the imitation is the victim's family (the same frozen public encoder) with a
trainable hidden layer and a linear output. (2) One MLP per attribute (scikit-learn ``MLPClassifier``) on the
imitation's hidden representation of the auxiliary texts, then predictions for the target texts. The agreement
of imitation and API argmax on held-out inputs (the victim's evaluation inputs, queried apart from the budget)
is recorded in the notes (``extraction_agreement``).

Deviation: the paper fine-tunes all of BERT-base as the imitation and attacks its pooled output; offline the
encoder is frozen, so the representation the attack reads is the imitation's own hidden layer (ReLU, ``hidden``
wide), which depends on what extraction learnt from the API's answers.

Metrics (per attribute: ``<attribute>_accuracy``, ``_macro_f1`` and ``_majority``, the majority-class rate of the
attacked set; their means ``accuracy``, ``macro_f1``, ``majority``; ``micro_f1``: F1 of the positive class pooled
over binary attributes, micro-averaged). ``table4`` is the figure Li et al.'s Table 4 reports ("AIA, higher =
better defense"), He et al.'s empirical privacy 100 * (1 - X): X = the mean attacker accuracy over attributes
(Trustpilot, Blog), or the micro F1 over the person attributes (AG News, whose attributes are sparse). The
random reference predicts each attribute's majority class of the auxiliary set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bench import Attack, BenchError, Metric, PublicKnowledge, Release, ReleaseKind, register_attack, require, within
from bench.core.progress import track
from bench.core.seeding import derive_seed

ATTRIBUTE_NAMES = ("gender", "age", "person1", "person2", "person3", "person4", "person5")  # of the shipped tasks


def _metrics() -> tuple[Metric, ...]:
    overall = (  # the headline first: Li et al.'s figure, which uses micro F1 where accuracy says nothing (AG News)
        Metric("table4", False, "Li et al. Table 4's AIA figure, 100 * (1 - X), X = mean accuracy or, where the "
                                "task says so (AG News), micro F1; higher = less recovered", 0.0, 100.0),
        Metric("accuracy", True, "attacker accuracy, mean over the attributes"),
        Metric("macro_f1", True, "attacker macro F1, mean over the attributes"),
        Metric("micro_f1", True, "F1 of the positive class pooled over the binary attributes (micro average)"),
        Metric("majority", True, "majority-class rate of the attacked set, mean over the attributes (a reference "
                                 "that does not depend on the guesses)"),
    )
    per = tuple(Metric(f"{name}_{what}", True, f"{text} of attribute {name}")
                for name in ATTRIBUTE_NAMES
                for what, text in (("accuracy", "attacker accuracy"), ("macro_f1", "attacker macro F1"),
                                   ("majority", "majority-class rate of the attacked set")))
    return overall + per


@register_attack("aia")
@dataclass
class AttributeInference(Attack):
    """Model extraction from the API's answers, then per-attribute MLPs on the imitation's hidden layer."""

    version: ClassVar[str] = "1"
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.PREDICTIONS,)
    metrics: ClassVar[tuple[Metric, ...]] = _metrics()

    attributes: str = "all"  # attributes to attack, joined by "+" (e.g. gender+age); all = every one the task has
    budget: float = within(1.0, "(0, 1]")  # share of the query pool asked (1 = "1x": the victim's training set size)
    hidden: int = within(384, "[1, 65536]")  # width of the imitation's trainable hidden layer (what is attacked)
    epochs: int = within(60, "[1, 1e5]")  # passes of extraction training over the answered queries
    lr: float = within(2e-3, "(0, 10]")  # Adam learning rate of extraction
    batch_size: int = within(32, "[2, 65536]")  # answered queries per extraction step
    mlp_hidden: int = within(128, "[1, 65536]")  # hidden units of each attribute MLP (scikit-learn MLPClassifier)
    mlp_iter: int = within(300, "[1, 1e6]")  # maximum training iterations of each attribute MLP
    seed: int = within(0, "[0, 4294967295]")  # seeds the imitation's initialisation, batch order and the attribute MLPs
    run_notes: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    measure: str = field(default="accuracy", init=False, repr=False, compare=False)  # the release's Table 4 measure
    # each attribute's values in the auxiliary set (set with the release): with the targets' they say if it is binary
    classes: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        require(0 < self.budget <= 1, f"aia budget must lie in (0, 1] (a share of the 1x query pool), got "
                                      f"{self.budget}; a budget of 0 queries extracts nothing.")
        require(self.hidden >= 1, f"aia hidden must be >= 1, got {self.hidden}.")
        require(self.epochs >= 1, f"aia epochs must be >= 1, got {self.epochs}.")
        require(self.lr > 0, f"aia lr must be > 0, got {self.lr}.")
        require(self.batch_size >= 2, f"aia batch_size must be >= 2, got {self.batch_size}.")
        require(self.mlp_hidden >= 1, f"aia mlp_hidden must be >= 1, got {self.mlp_hidden}.")
        require(self.mlp_iter >= 1, f"aia mlp_iter must be >= 1, got {self.mlp_iter}.")
        require(self.seed >= 0, f"aia seed must be >= 0, got {self.seed}.")
        require(bool(self.chosen()) or self.attributes in ("", "all"), "aia attributes must name at least one "
                                                                       "attribute, or be all.")

    def chosen(self) -> tuple[str, ...]:
        """The attributes named (empty = all of the task's)."""
        if self.attributes in ("", "all"):
            return ()
        return tuple(a.strip() for a in str(self.attributes).split("+") if a.strip())

    def check_task(self, task_cls: type) -> None:
        """Every named attribute must be one the task declares."""
        declared = tuple(getattr(task_cls, "attributes", ()))
        for name in self.chosen():
            if name not in declared:
                raise BenchError(f"task '{task_cls.registry_name}' has no attribute '{name}'; it has "
                                 f"{', '.join(declared) or 'none'}.")

    def _names(self, access) -> list[str]:
        names = list(self.chosen() or access.auxiliary_attributes)
        missing = [n for n in names if n not in access.auxiliary_attributes]
        if missing:
            raise BenchError(f"the release has no attribute '{missing[0]}'; it has "
                             f"{', '.join(access.auxiliary_attributes)}.")
        return names

    def attack(self, release: Release, public: PublicKnowledge) -> dict[str, np.ndarray]:
        """Extract an imitation from the API's answers and predict each attribute of the target texts."""
        from bench.models.api import one_thread

        access = release.data
        names = self._names(access)
        self.measure = access.measure
        self._note_classes(access, names)
        with one_thread():
            return self._attack(access, names, public.encoder)

    def _attack(self, access, names: list[str], encoder) -> dict[str, np.ndarray]:
        count = max(1, int(round(self.budget * len(access.query_pool))))
        queries = list(access.query_pool[:count])
        answers = access.query(queries)
        imitation = self.extract(encoder.encode(queries), answers)
        heldout = access.query(list(access.heldout), purpose="agreement")
        mine = imitation(encoder.encode(list(access.heldout)))[1].argmax(axis=1)
        aux = imitation(encoder.encode(list(access.auxiliary)))[0]
        targets = imitation(encoder.encode(list(access.targets)))[0]
        self.run_notes = {"extraction_queries": count, "extraction_agreement": round(float(np.mean(
            mine == heldout.argmax(axis=1))), 4), "agreement_queries": len(access.heldout),
            "attacker_representation": f"imitation hidden layer ({self.hidden}, ReLU) on frozen {encoder.name}"}
        return {name: self.infer(aux, access.auxiliary_attributes[name], targets) for name in names}

    def extract(self, features: np.ndarray, answers: np.ndarray):
        """Train the imitation with soft-label cross-entropy on the answers; returns ``features -> (hidden,
        logits)``."""
        import torch
        from torch import nn

        from bench.models.generators import torch_generator

        x = torch.as_tensor(features, dtype=torch.float32)
        y = torch.as_tensor(answers, dtype=torch.float32)
        with torch.random.fork_rng():
            torch.manual_seed(derive_seed(self.seed, "aia-imitation"))
            body = nn.Sequential(nn.Linear(x.shape[1], self.hidden), nn.ReLU())
            out = nn.Linear(self.hidden, y.shape[1])
        optimizer = torch.optim.Adam([*body.parameters(), *out.parameters()], lr=self.lr, foreach=True)
        order_generator = torch_generator(self.seed, "aia-batches")
        for _ in track(range(self.epochs), f"aia: training the imitation model on {len(x):,} answers", unit="epochs"):
            order = torch.randperm(len(x), generator=order_generator)
            for start in range(0, len(x), self.batch_size):
                idx = order[start : start + self.batch_size]
                loss = -(y[idx] * nn.functional.log_softmax(out(body(x[idx])), dim=1)).sum(dim=1).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        def represent(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            with torch.inference_mode():
                h = body(torch.as_tensor(rows, dtype=torch.float32))
                return h.numpy(), out(h).numpy()

        return represent

    def infer(self, aux: np.ndarray, values: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """One MLP trained on the auxiliary representations and their attribute values predicts the targets."""
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.neural_network import MLPClassifier
        from sklearn.preprocessing import StandardScaler

        if len(np.unique(values)) < 2:
            return np.full(len(targets), values[0])
        scaler = StandardScaler().fit(aux)
        model = MLPClassifier(hidden_layer_sizes=(self.mlp_hidden,), max_iter=self.mlp_iter, random_state=self.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(scaler.transform(aux), values)
        return model.predict(scaler.transform(targets))

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator):
        """Each attribute's majority class in the auxiliary set, for every target."""
        access = release.data
        self.measure = access.measure
        self._note_classes(access, self._names(access))
        out = {}
        for name in self._names(access):
            classes, counts = np.unique(access.auxiliary_attributes[name], return_counts=True)
            out[name] = np.full(len(access.targets), classes[counts.argmax()])
        return out

    def _note_classes(self, access, names: list[str]) -> None:
        """The values each attribute takes in the auxiliary set: with the targets' and the guesses', they say whether
        it is binary (a three-class attribute whose targets happen to hold two classes is not)."""
        self.classes = {name: set(np.unique(access.auxiliary_attributes[name]).tolist()) for name in names}

    def score(self, guesses: dict[str, np.ndarray], truth, public: PublicKnowledge) -> dict[str, float]:
        """Per-attribute accuracy, macro F1 and majority rate; their means; micro F1; Table 4's figure."""
        from sklearn.metrics import f1_score

        if truth.attributes is None:
            raise BenchError("aia is scored on private attributes, and this cell's truth holds none.")
        scores: dict[str, float] = {}
        binary_true, binary_guess = [], []
        for name, guess in guesses.items():
            true = np.asarray(truth.attributes[name])
            guess = np.asarray(guess)
            scores[f"{name}_accuracy"] = float(np.mean(guess == true))
            scores[f"{name}_macro_f1"] = float(f1_score(true, guess, average="macro", zero_division=0))
            scores[f"{name}_majority"] = float(np.unique(true, return_counts=True)[1].max() / len(true))
            if set(np.unique(true).tolist()) | set(np.unique(guess).tolist()) | \
                    self.classes.get(name, set()) <= {0, 1}:
                binary_true.append(true)
                binary_guess.append(guess)
        for what in ("accuracy", "macro_f1", "majority"):
            scores[what] = float(np.mean([scores[f"{name}_{what}"] for name in guesses]))
        if binary_true:  # pooled by hand: sklearn reads a single binary column as two classes (micro F1 = accuracy)
            true, guess = np.concatenate(binary_true) == 1, np.concatenate(binary_guess) == 1
            found, wrong = int(np.sum(true & guess)), int(np.sum(true != guess))
            scores["micro_f1"] = 2 * found / (2 * found + wrong) if found or wrong else 0.0
        x = scores["micro_f1"] if self.measure == "micro_f1" and "micro_f1" in scores else scores["accuracy"]
        scores["table4"] = 100.0 * (1.0 - x)
        return scores
