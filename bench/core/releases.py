"""Release kinds: what a defense lets out of the client and so what an adversary observes.

A ``Release`` holds the payload of its kind (``PAYLOADS``): text, token vectors, an array of sentence
representations, or one of the dataclasses below (client updates, query access to an API, released weights).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Generic, TypeVar

import numpy as np

from bench.core.errors import BenchError
from bench.core.params import require

P = TypeVar("P")  # the payload of a release (``PAYLOADS`` gives it per kind)


class ReleaseKind(str, Enum):
    """The kinds of release a defense can produce and an attack can consume."""

    TEXT = "text"
    REWRITTEN_TEXT = "rewritten_text"  # text whose sensitive spans were rewritten: not aligned with its input
    TOKEN_EMBEDDINGS = "token_embeddings"
    SENTENCE_EMBEDDINGS = "sentence_embeddings"
    GRADIENTS = "gradients"
    PREDICTIONS = "predictions"
    MODEL = "model"

    def __str__(self) -> str:
        return self.value


@dataclass
class Release(Generic[P]):
    """What the adversary observes for the attacked examples of one cell.

    Attributes:
        kind: the release kind.
        data: the observation itself, the payload of its kind (``PAYLOADS``): an ``(n, d)`` float array for
            sentence embeddings, a list of strings for text, ...
        owners: for each row of ``data``, the index of the example it was produced for, in the split
            ``split`` names; the runner scores guesses against that example.
        mechanism: the public mechanism (``bench.privacy.public``): how the release was made, as the
            adversary knows it; an unfitted copy, never the client's state.
        space: the public token space of a token-level release (``bench.privacy.public.SpaceRef``).
        known_pairs: releases of examples whose plaintext the adversary also holds (learning attacks
            such as RepRecon train on them): ``(released rows, indices into PublicKnowledge.index)``.
            None when the threat model grants no such pairs.
        split: the split ``owners`` index: ``eval`` (the default), or ``train`` when the evaluation data is
            released unprotected (a task with ``evaluate_on = "original"``) and the training release is attacked.
        slots: for a token-level release of a task that declares sensitive spans, where each row's sensitive
            spans lie in it: ``(segment, first piece, end piece, kind)`` per span (for a span defense, the
            rewritten slots). Public: the adversary is told where the spans are, not what they were.
        span_prior: the public frequency of sensitive spans by kind (``{kind: [(piece ids, count), ...]}``, most
            frequent first), counted on data released unprotected; the frequency guess attacks report beside.
        span_public: that unprotected data's rows and where their spans lie (``{"rows", "slots", "words"}``, see
            ``bench.engine.spans.public_span_rows``): public spans in context, on which an attack may calibrate.
    """

    kind: ReleaseKind
    data: P
    owners: np.ndarray
    mechanism: Any = None
    space: Any = None
    known_pairs: tuple[np.ndarray, np.ndarray] | None = None
    split: str = "eval"
    slots: list[list[tuple[int, int, int, str]]] | None = None
    span_prior: dict[str, list[tuple[tuple[int, ...], int]]] | None = None
    span_public: dict[str, list] | None = None


@dataclass
class GradientRelease:
    """The ``data`` of a ``gradients`` release: client updates and the model they were taken on.

    Attributes:
        model: the server's model (a ``torch.nn.Module`` taking hidden representations) at the
            moment the updates were computed; the server broadcasts it, so it is public.
        gradients: one entry per observed update, each a list of arrays in the order of
            ``client.parameters()`` then ``model.parameters()``: d loss / d parameter, averaged over the
            update's batch.
        targets: ``(updates, batch, outputs)`` float targets of each update's batch (mixed one-hot
            targets under TextHide); the attacker of the paper's easier setting knows them.
        regression: True when the loss is MSE on one output, else soft-label cross-entropy.
        batch_size: examples behind each update.
    """

    model: Any
    gradients: list[list[np.ndarray]]
    targets: np.ndarray
    regression: bool
    batch_size: int = 1
    client: Any = None  # the client's trained layers before the hiding (broadcast too); None: head gradients only


@dataclass
class PredictionAccess:
    """The ``data`` of a ``predictions`` release: query access to the victim's API, and the adversary's own texts.

    Attributes:
        query_pool: the adversary's query texts (as many as the victim's training set: "1x queries"), disjoint
            from the victim's training data.
        auxiliary: the adversary's attribute-labelled texts, with ``auxiliary_attributes`` (name -> values).
        targets: the texts whose private attributes are attacked (row i belongs to release owner i).
        heldout: held-out inputs (the victim's utility evaluation inputs) on which imitation and victim agreement
            is measured; answers to them are counted apart from the extraction queries.
        num_labels: the classes the API answers over.
        measure: what the task's reported AIA figure is computed from ("accuracy" or "micro_f1", He et al.).
        answer: texts -> the API's probability vectors ``(n, num_labels)`` after the output defense.
    """

    query_pool: tuple
    auxiliary: tuple
    auxiliary_attributes: dict[str, np.ndarray]
    targets: tuple
    heldout: tuple
    num_labels: int
    measure: str
    answer: Callable[[list], np.ndarray]
    answered: dict[str, int] = field(default_factory=dict)  # queries answered, by purpose

    def query(self, texts: list, purpose: str = "extraction") -> np.ndarray:
        """The API's answers for ``texts`` (counted under ``purpose``)."""
        if not texts:
            raise BenchError("a query to the prediction API needs at least one text.")
        self.answered[purpose] = self.answered.get(purpose, 0) + len(texts)
        return self.answer(list(texts))


def softmax(logits: np.ndarray, tau: float = 1.0) -> np.ndarray:
    """``softmax(logits / tau)`` per row (stable), the probability vectors a prediction API answers; ``tau`` > 0."""
    require(tau > 0, f"the softmax temperature must be > 0, got {tau}.")
    z = np.asarray(logits, dtype=np.float64) / tau
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)
@dataclass
class ModelRelease:
    """The ``data`` of a ``model`` release: the released MLM and the public knowledge that comes with the setting.

    Attributes:
        path: the directory of the released MLM (``load_mlm``-loadable), or the ``load_mlm`` name of an MLM
            released as it is.
        first_names, last_names: the public name lists names are drawn from (``bench.data.clinical.name_lists``).
        conditions: the vocabulary of conditions, most frequent first, and ``condition_counts``, their frequencies
            among held-out patients, never the ones behind the data (a published prevalence: an adversary's prior).
        known_names: ``(first, last)`` of each patient behind the data, row ``i`` = ``Release.owners[i]``: whom a
            probing adversary asks about (Lehman et al.'s probe assumes the name known, the conditions not).
        base: the public MLM the release was pretrained from (``load_mlm``-loadable; the release itself for an MLM
            released as it is), which a generating adversary compares names against.
    """

    path: str
    first_names: list[str]
    last_names: list[str]
    conditions: list[str]
    condition_counts: np.ndarray
    known_names: list[tuple[str, str]] = field(default_factory=list)
    base: str = ""


@dataclass
class ServerModel:
    """The ``data`` of a ``model`` release of a trained sentence server: query access to it, and what a membership
    adversary holds besides (Carlini et al. 2022's game).

    Attributes:
        candidates: the candidate examples' texts, row ``i`` = ``Release.owners[i]``: members (training examples of
            the server) and non-members (held-out examples of the same distribution) in a seeded random order; which
            is which only the engine knows.
        labels: the candidates' labels (the adversary holds each candidate example whole).
        num_labels: the classes the server's model answers over.
        public: labelled examples of the task's distribution that no private split holds, ``(texts, labels)``: the
            adversary's shadow training data.
        train_size: the examples the server trained on (shadows train on as many).
        query: ``(texts, labels, rng) -> (logits (u, num_labels), unit labels (u,), owners (u,))``: the deployed
            pipeline on plaintext ``texts``, the client's part first (the query as a client sends it, its randomness
            from ``rng``), then the server. A unit is what the server predicts: a sentence of a classifier (``owners``
            = 0..n-1), a released token of a tagger (its tag aligned by the task; ``owners``: the text it is from).
        shadow: ``(texts, labels, seed) -> query``: the server's training algorithm, the client's part included,
            rerun on the given examples with the adversary's own randomness and secrets; returns that shadow's
            deployed pipeline in the form of ``query``.
        weights: the server's trained head (a ``torch.nn.Module``): the released weights.
        query_form: what a query sends, in words (a record note).
        audit: ``(texts, labels) -> query``: the training run once more, by the engine, on the server's training data
            and each of the given canaries with probability 1/2 (Steinke et al. 2023's one-run audit); which canaries
            were included only the engine knows. None where no audit is offered.
    """

    candidates: tuple
    labels: np.ndarray
    num_labels: int
    public: tuple[tuple, np.ndarray]
    train_size: int
    query: Callable[[list, np.ndarray, np.random.Generator], tuple[np.ndarray, np.ndarray, np.ndarray]]
    shadow: Callable[[list, np.ndarray, int], Callable]
    weights: Any = None
    query_form: str = ""
    audit: Callable[[list, np.ndarray], Callable] | None = None


# The payload of each kind: ``Release.data`` (a tuple: any of its types). Text and token embeddings: a list with one
# entry per row (a tuple of two for a pair): WordPiece ids, words joined by spaces, or token vectors; sentence
# embeddings: one ``(n, d)`` array.
PAYLOADS: dict[ReleaseKind, type | tuple[type, ...]] = {
    ReleaseKind.TEXT: list,
    ReleaseKind.REWRITTEN_TEXT: list,
    ReleaseKind.TOKEN_EMBEDDINGS: list,
    ReleaseKind.SENTENCE_EMBEDDINGS: np.ndarray,
    ReleaseKind.GRADIENTS: GradientRelease,
    ReleaseKind.PREDICTIONS: PredictionAccess,
    ReleaseKind.MODEL: (ModelRelease, ServerModel),  # an MLM's weights (pretraining), or a trained server
}

TextRelease = Release[list]  # text or rewritten text
TokenVectorRelease = Release[list]  # token embeddings
SentenceRelease = Release[np.ndarray]  # sentence embeddings
GradientsRelease = Release[GradientRelease]
PredictionsRelease = Release[PredictionAccess]
WeightsRelease = Release[ModelRelease]
ServerRelease = Release[ServerModel]
