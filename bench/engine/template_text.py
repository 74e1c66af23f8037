'''The text of ``bench new``'s templates (``bench.engine.templates`` chooses and fills them).

Placeholders: __NAME__ (registry name), __CLS__ (class name), __TITLE__ (title), __STEM__ (file stem) and, in a
reference test, __COMPONENT__ (the component's path from the test's folder). Each template is a working example
of its family that reads like a paper component; a contributor replaces its mechanism and its docstring.
'''

# -- defenses, one per family of bench.core.components ----------------------------------------------------------

REPRESENTATION_DEFENSE = '''\
"""__TITLE__: Gaussian noise on sentence representations (replace with what the defense does).

Paper: none yet; cite the paper this defense follows (authors, title, venue, year, section).
Threat model: the adversary sees the noisy representation and knows sigma, not the sampled noise.
Deviations: none yet; list every way this implementation differs from the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench import RepresentationDefense, register_defense, require


@register_defense("__NAME__")
@dataclass
class __CLS__(RepresentationDefense):
    """Adds N(0, sigma^2) noise to every coordinate of each sentence representation."""

    sigma: float = 0.5  # standard deviation of the noise added to each coordinate

    def __post_init__(self) -> None:
        require(0 <= self.sigma < float("inf"), f"__NAME__ sigma must be finite and >= 0, got {self.sigma}.")

    def hide(self, reps, generator):
        """Add the noise, at training and at inference (the training split is hidden once; a defense whose paper
        re-hides each example every epoch sets the class attribute ``rehides_each_epoch = True``)."""
        return reps + self.sigma * torch.randn(reps.shape, generator=generator, dtype=reps.dtype)
'''

REPRESENTATION_REFERENCE = '''\
"""Reference test of __NAME__: hide() against its equation, reps + sigma * z with z ~ N(0, I).

Replace the reference with your paper's equation when you replace the mechanism; keep a test that can fail.
"""

import sys
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from bench.core.registry import load_plugin

COMPONENT = sys.modules[load_plugin(Path(__file__).resolve().parent / "__COMPONENT__")]


def test_noise_is_added_and_does_not_depend_on_the_input():
    defense = COMPONENT.__CLS__(sigma=0.7)
    reps = torch.linspace(-3, 3, 40, dtype=torch.float64).reshape(5, 8)
    shifted = defense.hide(reps, torch.Generator().manual_seed(3)) - reps
    zeros = defense.hide(torch.zeros_like(reps), torch.Generator().manual_seed(3))
    assert torch.allclose(shifted, zeros)


def test_noise_follows_the_normal_law_coordinate_by_coordinate():
    sigma = 0.7
    noise = COMPONENT.__CLS__(sigma=sigma).hide(torch.zeros(4000, 6, dtype=torch.float64),
                                                 torch.Generator().manual_seed(0)).numpy()
    for column in noise.T:  # each coordinate N(0, sigma^2): a wrong scale or a shift fails the test
        assert stats.kstest(column / sigma, "norm").pvalue > 1e-4
    assert abs(np.corrcoef(noise.T)[np.triu_indices(6, 1)]).max() < 0.1  # coordinates independent
'''

TOKEN_DEFENSE = '''\
"""__TITLE__: k-ary randomized response on every token (replace with what the defense does).

Paper: none yet; cite the paper this defense follows (authors, title, venue, year, section).
Threat model: the adversary sees the released tokens and knows eps and the token space, not the coin flips.
Deviations: none yet; list every way this implementation differs from the paper.

Mechanism: a token x of the space V is released as itself with probability e^eps / (e^eps + |V| - 1), and as
each other token of V with probability 1 / (e^eps + |V| - 1): eps-local differential privacy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import TokenDefense, register_defense, require
from bench.privacy.public import TokenMechanism


@dataclass
class __CLS__Mechanism(TokenMechanism):
    """The public mechanism: a release carries it, and attacks may sample it again."""

    name: ClassVar[str] = "__NAME__"
    eps: float = 10.0

    def keep_probability(self, size: int) -> float:
        """Pr[y = x] over a space of ``size`` tokens."""
        return math.exp(self.eps) / (math.exp(self.eps) + size - 1)

    def privatize(self, ids, space, rng):
        """Each token kept, or replaced by another token of ``space.candidates`` drawn uniformly."""
        candidates = np.sort(space.candidates)
        flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
        keep = rng.random(len(flat)) < self.keep_probability(len(candidates))
        drawn = rng.integers(len(candidates) - 1, size=len(flat))  # a position among the |V| - 1 others
        drawn += drawn >= np.searchsorted(candidates, flat)  # skip the input's own position
        out = np.where(keep, flat, candidates[drawn])
        return np.split(out, np.cumsum([len(x) for x in ids])[:-1]) if ids else []


@register_defense("__NAME__")
@dataclass
class __CLS__(TokenDefense):
    """Releases every token through k-ary randomized response over the encoder's WordPieces."""

    eps: float = 10.0  # privacy parameter (larger = more tokens kept)

    def __post_init__(self) -> None:
        require(0 < self.eps < float("inf"), f"__NAME__ eps must be finite and > 0, got {self.eps}.")

    def token_mechanism(self):
        """The public mechanism with this defense's eps."""
        return __CLS__Mechanism(self.eps)
'''

TOKEN_REFERENCE = '''\
"""Reference test of __NAME__: the released tokens' law against the mechanism's equation.

Pr[y | x] is computed one candidate at a time from the equation, then compared with the frequencies of many
releases. Replace the reference with your paper's equation when you replace the mechanism.
"""

import math
import sys
from pathlib import Path

import numpy as np

from bench.core.registry import load_plugin
from bench.engine.contracts import FakeSpace

COMPONENT = sys.modules[load_plugin(Path(__file__).resolve().parent / "__COMPONENT__")]


def reference_probabilities(x: int, candidates, eps: float) -> np.ndarray:
    """Pr[y | x] for each candidate y, from the equation, one at a time."""
    total = math.exp(eps) + len(candidates) - 1
    return np.array([(math.exp(eps) if y == x else 1.0) / total for y in candidates])


def test_released_tokens_follow_the_equation():
    space = FakeSpace(candidates=np.arange(5, 11))  # six tokens: every probability is large enough to test
    mechanism = COMPONENT.__CLS__(eps=1.0).token_mechanism()
    draws = 60000
    for x in (5, 8, 10):
        released = mechanism.privatize([np.full(draws, x)], space, np.random.default_rng(x))[0]
        observed = np.array([(released == y).mean() for y in space.candidates])
        expected = reference_probabilities(x, space.candidates, 1.0)
        bound = 5 * np.sqrt(expected * (1 - expected) / draws)  # five standard errors
        assert (np.abs(observed - expected) < bound).all(), (x, observed, expected)


def test_sentences_keep_their_lengths_and_stay_in_the_space():
    space = FakeSpace()
    ids = [np.array([5, 6, 7]), np.array([], dtype=np.int64), np.array([49])]
    out = COMPONENT.__CLS__().token_mechanism().privatize(ids, space, np.random.default_rng(0))
    assert [len(x) for x in out] == [3, 0, 1] and np.isin(np.concatenate(out), space.candidates).all()
'''

SPAN_DEFENSE = '''\
"""__TITLE__: each sensitive span replaced by its kind's placeholder (replace with what the defense does).

Paper: none yet; cite the paper this defense follows (authors, title, venue, year, section).
Threat model: the client rewrites its own text before release; the adversary sees every other word, where the
spans were, their kinds and their lengths.
Deviations: none yet; list every way this implementation differs from the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench import Edit, SpanDefense, register_defense, require, within


@register_defense("__NAME__")
@dataclass
class __CLS__(SpanDefense):
    """Replace every word of each chosen span by the span's kind in lower case (PER -> per per)."""

    kinds: str = "all"  # span kinds to rewrite, joined by "+" (e.g. PER+ORG); all = every kind the task declares
    fraction: float = within(1.0, "(0, 1]")  # share of the chosen spans rewritten, drawn at random over the split

    def __post_init__(self) -> None:
        require(0.0 < self.fraction <= 1.0, f"__NAME__ fraction must lie in (0, 1], got {self.fraction}.")

    def rewrite(self, batch, rng):
        """One placeholder per word of every chosen span (the engine chose the spans; rng is unused here)."""
        return [[Edit(span, (span.kind.lower(),) * (span.end - span.start)) for span in spans]
                for spans in batch.chosen]
'''

SPAN_REFERENCE = '''\
"""Reference test of __NAME__: the rewritten text against a word-by-word rewrite written out by hand.

Replace the reference with your paper's rule when you replace the mechanism.
"""

import sys
from pathlib import Path

import numpy as np

from bench.core.registry import load_plugin
from bench.core.spans import Span, apply_edits
from bench.engine.spans import SpanBatch

COMPONENT = sys.modules[load_plugin(Path(__file__).resolve().parent / "__COMPONENT__")]


def reference_rewrite(text: str, spans: list) -> str:
    """Walk the words: a word inside a span becomes that span's kind in lower case."""
    words = text.split(" ")
    out = []
    for position, word in enumerate(words):
        inside = [s for s in spans if s.start <= position < s.end]
        out.append(inside[0].kind.lower() if inside else word)
    return " ".join(out)


def test_rewrite_equals_the_word_by_word_reference():
    texts = ["alice met bob in paris", "the bank of new york", "nothing here"]
    chosen = [[Span(0, 1, "PER"), Span(2, 3, "PER"), Span(4, 5, "LOC")], [Span(1, 5, "ORG")], []]
    batch = SpanBatch(texts, [None] * 3, chosen)
    edits = COMPONENT.__CLS__().rewrite(batch, np.random.default_rng(0))
    for text, spans, found in zip(texts, chosen, edits):
        assert apply_edits(text, found)[0] == reference_rewrite(text, spans)
'''

OUTPUT_DEFENSE = '''\
"""__TITLE__: the API answers only its top k classes (replace with what the defense does).

Paper: none yet; cite the paper this defense follows (authors, title, venue, year, section).
Threat model: the adversary queries the victim's API with its own texts and sees only the answers; it knows the
defense and k, not the victim's weights or training data.
Deviations: none yet; list every way this implementation differs from the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench import OutputDefense, register_defense, require
from bench.privacy.outputs import softmax


@register_defense("__NAME__")
@dataclass
class __CLS__(OutputDefense):
    """Answer the softmax restricted to the k most likely classes, renormalised (ties: the lower class first)."""

    k: int = 1  # classes whose probability the API reveals; the others are answered 0

    def __post_init__(self) -> None:
        require(self.k >= 1, f"__NAME__ k must be >= 1, got {self.k}.")

    def answer(self, logits, rng):
        """The top-k probabilities of each row, summing to 1 (no randomness)."""
        p = softmax(logits)
        top = np.argsort(-p, axis=1, kind="stable")[:, : self.k]
        kept = np.zeros_like(p)
        np.put_along_axis(kept, top, np.take_along_axis(p, top, axis=1), axis=1)
        return kept / kept.sum(axis=1, keepdims=True)
'''

OUTPUT_REFERENCE = '''\
"""Reference test of __NAME__: the API's answers against a row-by-row computation from the definition.

Replace the reference with your paper's equation when you replace the mechanism.
"""

import math
import sys
from pathlib import Path

import numpy as np

from bench.core.registry import load_plugin

COMPONENT = sys.modules[load_plugin(Path(__file__).resolve().parent / "__COMPONENT__")]


def reference_answer(row, k: int) -> list:
    """One row: softmax, keep the k largest (the lower class first on ties), divide by their sum."""
    exps = [math.exp(v - max(row)) for v in row]
    probs = [e / sum(exps) for e in exps]
    order = sorted(range(len(probs)), key=lambda c: (-probs[c], c))[:k]
    total = sum(probs[c] for c in order)
    return [probs[c] / total if c in order else 0.0 for c in range(len(probs))]


def test_answers_equal_the_row_by_row_reference():
    logits = np.random.default_rng(0).standard_normal((50, 5))
    logits[0] = [1.0, 1.0, 0.0, -1.0, 2.0]  # a tie
    for k in (1, 2, 5):
        answers = COMPONENT.__CLS__(k=k).answer(logits, np.random.default_rng(0))
        assert np.allclose(answers, [reference_answer(row, k) for row in logits.tolist()], atol=1e-12)
'''

# -- attacks, one per release kind -------------------------------------------------------------------------------

_ATTACK_HEAD = '''from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import Attack, Metric, PublicKnowledge, Release, ReleaseKind, Truth, register_attack, require
'''

SENTENCE_ATTACK = '''\
"""__TITLE__: return the corpus text nearest to each released representation (replace with the attack).

Paper: none yet; cite the paper this attack follows (authors, title, venue, year, section).
Threat model: the adversary holds the public encoder, the task corpus and the released sentence
representations; it does not know which corpus texts were released.
Deviations: none yet; list every way this implementation differs from the paper.
"""

''' + _ATTACK_HEAD + '''from bench.privacy.neighbours import cosine_search


@register_attack("__NAME__")
@dataclass
class __CLS__(Attack):
    """Guesses the top_k corpus texts of highest cosine similarity to each released row."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.SENTENCE_EMBEDDINGS,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("identity", True, "fraction of released rows whose true text is among the guesses"),
    )
    # what the adversary knows besides the release, with the paper's reason (bench.KNOWLEDGE names the corpora)
    knowledge: ClassVar[dict[str, str]] = {"index": "re-identification: the adversary's index holds the candidates"}
    top_k: int = 1  # corpus texts guessed per released row; a row counts as recovered when any is right

    def __post_init__(self) -> None:
        require(self.top_k >= 1, f"__NAME__ top_k must be >= 1, got {self.top_k}.")

    def attack(self, release: Release, public: PublicKnowledge) -> np.ndarray:
        """Indices of the top_k nearest corpus texts of each released row, ``(rows, top_k)``."""
        corpus_reps = public.encoder.encode(public.index)
        _, nearest = cosine_search(corpus_reps, np.asarray(release.data), k=min(self.top_k, len(public.index)))
        return nearest

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> np.ndarray:
        """Uniformly drawn corpus indices of the same shape."""
        return rng.integers(0, len(public.index), size=(len(release.owners), self.top_k))

    def score(self, guesses: np.ndarray, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """The fraction of rows whose true text is guessed."""
        position = {text: i for i, text in enumerate(public.index)}
        true_rows = np.array([position[t] for t in truth.texts])
        return {"identity": float(np.mean((np.asarray(guesses) == true_rows[:, None]).any(axis=1)))}
'''

_TOKEN_SCORE = '''
    def score(self, guesses, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """The fraction of the true tokens guessed at their position."""
        found, space = guesses
        true_ids = space.client_ids(flatten_segments(truth.texts)[0])  # a word missing from the space never matches
        total = sum(len(t) for t in true_ids)
        hits = sum(int(np.sum(g[: len(t)] == t[: len(g)])) for g, t in zip(found, true_ids))
        return {"token_accuracy": hits / total if total else 0.0}
'''

TEXT_ATTACK = '''\
"""__TITLE__: guess that every released token is its input token (replace with the attack).

Paper: none yet; cite the paper this attack follows (authors, title, venue, year, section).
Threat model: the adversary holds the released token sequence and the public token space it is in; it knows
the public mechanism (``release.mechanism``) and its parameters, not its random draws.
Deviations: none yet; list every way this implementation differs from the paper.
"""

''' + _ATTACK_HEAD + '''from bench.core.examples import flatten_segments
from bench.privacy.token_space import space_of


@register_attack("__NAME__")
@dataclass
class __CLS__(Attack):
    """Copies each released token as the guess of the input token at its position."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.TEXT,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("token_accuracy", True, "fraction of the evaluation tokens recovered at their position"),
    )
    shift: int = 0  # positions the guesses are moved right by (0 = aligned); an example parameter, replace it

    def __post_init__(self) -> None:
        require(self.shift >= 0, f"__NAME__ shift must be >= 0, got {self.shift}.")

    def attack(self, release: Release, public: PublicKnowledge):
        """The released ids of each sentence (a pair's sentences in turn), and the space they are in."""
        space = space_of(release.space, public.encoder)
        items, _ = flatten_segments(list(release.data))
        released = space.released_ids(items) if items and isinstance(items[0], str) else items
        return [np.concatenate([np.full(self.shift, -1), x])[: len(x)] for x in released], space

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator):
        """A uniformly drawn token of the space at every released position."""
        found, space = self.attack(release, public)
        return [rng.choice(space.candidates, size=len(x)) for x in found], space
''' + _TOKEN_SCORE

TOKEN_VECTOR_ATTACK = '''\
"""__TITLE__: guess the vocabulary token nearest to each released token vector (replace with the attack).

Paper: none yet; cite the paper this attack follows (authors, title, venue, year, section).
Threat model: the adversary holds the released token vectors and the public embedding table of their space; it
knows the public mechanism (``release.mechanism``) and its parameters, not its random draws.
Deviations: none yet; list every way this implementation differs from the paper.
"""

''' + _ATTACK_HEAD + '''from bench.core.examples import flatten_segments
from bench.privacy.mechanisms import nearest_tokens
from bench.privacy.token_space import space_of


@register_attack("__NAME__")
@dataclass
class __CLS__(Attack):
    """Exact nearest-neighbour search of each released vector in the public embedding table."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.TOKEN_EMBEDDINGS,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("token_accuracy", True, "fraction of the evaluation tokens recovered at their position"),
    )
    scale: float = 1.0  # released vectors are multiplied by this before the search (1 = as released); replace it

    def __post_init__(self) -> None:
        require(0 < self.scale < float("inf"), f"__NAME__ scale must be finite and > 0, got {self.scale}.")

    def attack(self, release: Release, public: PublicKnowledge):
        """The nearest token of each released vector, per sentence, and the space they are in."""
        space = space_of(release.space, public.encoder)
        vectors, _ = flatten_segments(list(release.data))
        return nearest_tokens([v * self.scale for v in vectors], space.table, space.candidates), space

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator):
        """A uniformly drawn token of the space at every released position."""
        space = space_of(release.space, public.encoder)
        vectors, _ = flatten_segments(list(release.data))
        return [rng.choice(space.candidates, size=len(v)) for v in vectors], space
''' + _TOKEN_SCORE

SPAN_ATTACK = '''\
"""__TITLE__: guess the most frequent public span of each slot's kind (replace with the attack).

Paper: none yet; cite the paper this attack follows (authors, title, venue, year, section).
Threat model: the adversary holds the rewritten release, where its sensitive spans lie and their kinds
(``release.slots``), and how often each span occurs in data released unprotected (``release.span_prior``).
Deviations: none yet; list every way this implementation differs from the paper.
"""

''' + _ATTACK_HEAD + '''

@register_attack("__NAME__")
@dataclass
class __CLS__(Attack):
    """For every slot, the top spans of its kind by public frequency."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.REWRITTEN_TEXT, ReleaseKind.TEXT)
    needs_spans: ClassVar[bool] = True  # scored on the sensitive spans a task declares
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("span_accuracy", True, "fraction of sensitive spans whose exact pieces are among the guesses"),
    )
    top_k: int = 1  # spans guessed per slot; a slot counts as recovered when any is right

    def __post_init__(self) -> None:
        require(self.top_k >= 1, f"__NAME__ top_k must be >= 1, got {self.top_k}.")

    def attack(self, release: Release, public: PublicKnowledge) -> list:
        """Per row, per slot: the top_k most frequent public spans of the slot's kind (piece-id tuples)."""
        prior = release.span_prior or {}
        return [[[tuple(ids) for ids, _ in prior.get(kind, [])[: self.top_k]] for *_, kind in slots]
                for slots in release.slots or []]

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> list:
        """Per slot, top_k public spans of its kind drawn uniformly (frequency ignored)."""
        prior = release.span_prior or {}
        out = []
        for slots in release.slots or []:
            row = []
            for *_, kind in slots:
                spans = prior.get(kind, [])
                picks = rng.choice(len(spans), size=min(self.top_k, len(spans)), replace=False) if spans else []
                row.append([tuple(spans[i][0]) for i in picks])
            out.append(row)
        return out

    def score(self, guesses: list, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """The fraction of slots whose true pieces are guessed."""
        pairs = [(tuple(true), found) for row_true, row_found in zip(truth.spans or [], guesses)
                 for true, found in zip(row_true, row_found)]
        return {"span_accuracy": float(np.mean([t in f for t, f in pairs])) if pairs else 0.0}
'''

PREDICTION_ATTACK = '''\
"""__TITLE__: infer each target's attributes from its nearest auxiliary text in answer space (replace it).

Paper: none yet; cite the paper this attack follows (authors, title, venue, year, section).
Threat model: the adversary queries the victim's prediction API with its own attribute-labelled texts and the
target texts, and sees only the API's answers; it knows neither the victim's weights nor its training data.
Deviations: none yet; list every way this implementation differs from the paper.
"""

''' + _ATTACK_HEAD + '''

@register_attack("__NAME__")
@dataclass
class __CLS__(Attack):
    """k-nearest auxiliary texts by the Euclidean distance of the API's answers; majority attribute value."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.PREDICTIONS,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("attribute_accuracy", True, "fraction of target attributes guessed right, over every attribute"),
    )
    neighbours: int = 5  # auxiliary texts whose attributes vote for each target

    def __post_init__(self) -> None:
        require(self.neighbours >= 1, f"__NAME__ neighbours must be >= 1, got {self.neighbours}.")

    def attack(self, release: Release, public: PublicKnowledge) -> dict:
        """Attribute name -> the guessed value of each target."""
        access = release.data  # bench.core.releases.PredictionAccess
        auxiliary = access.query(list(access.auxiliary), "auxiliary")
        targets = access.query(list(access.targets), "targets")
        distances = ((targets[:, None, :] - auxiliary[None, :, :]) ** 2).sum(axis=2)
        nearest = np.argsort(distances, axis=1, kind="stable")[:, : self.neighbours]
        guesses = {}
        for name, values in access.auxiliary_attributes.items():
            votes = np.asarray(values)[nearest]
            guesses[name] = np.array([np.bincount(row).argmax() for row in votes])
        return guesses

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> dict:
        """A value of each attribute drawn from the auxiliary texts' values, for every target."""
        access = release.data
        return {name: rng.choice(np.asarray(values), size=len(access.targets))
                for name, values in access.auxiliary_attributes.items()}

    def score(self, guesses: dict, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Accuracy over every (target, attribute) pair."""
        hits = [np.asarray(guesses[name]) == np.asarray(values) for name, values in (truth.attributes or {}).items()]
        return {"attribute_accuracy": float(np.mean(np.concatenate(hits))) if hits else 0.0}
'''

GRADIENT_ATTACK = '''\
"""__TITLE__: read each representation off the first layer's gradient (replace with the attack).

Paper: none yet; cite the paper this attack follows (authors, title, venue, year, section).
Threat model: the adversary sees each client update (the gradient of the loss on one batch) and the public server
model it was taken on; it does not see the client's representations.
Deviations: none yet; list every way this implementation differs from the paper.

For a first layer y = W x + b, dL/dW = (dL/db) x^T, so x = (dL/dW)[i] / (dL/db)[i] for any unit i whose bias
gradient is not zero: exact for an update of one example, a weighted mix of the batch for a larger one.
"""

''' + _ATTACK_HEAD + '''

def first_layer(update: list) -> tuple[np.ndarray, np.ndarray]:
    \"\"\"The weight and bias gradients of the model's first linear layer (parameters in model order).\"\"\"
    for weight, bias in zip(update, update[1:]):
        if np.ndim(weight) == 2 and np.ndim(bias) == 1 and len(bias) == len(weight):
            return np.asarray(weight, dtype=np.float64), np.asarray(bias, dtype=np.float64)
    raise ValueError("the update has no linear layer with a bias")


@register_attack("__NAME__")
@dataclass
class __CLS__(Attack):
    \"\"\"Divides the first layer's weight gradient by its bias gradient, at the unit of largest bias gradient.\"\"\"

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.GRADIENTS,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("success_rate", True, "fraction of updates whose recovered representation has MSE <= the threshold"),
        Metric("mse", False, "mean squared error of the recovered representation (lower = closer)", 0.0,
               float("inf")),
    )
    attacks: int = 50  # updates attacked: the first N of the release
    threshold: float = 0.001  # success: MSE(recovered, true representation) <= this

    def __post_init__(self) -> None:
        require(self.attacks >= 1, f"__NAME__ attacks must be >= 1, got {self.attacks}.")
        require(0 < self.threshold < float("inf"), f"__NAME__ threshold must be finite and > 0, got {self.threshold}.")

    def attack(self, release: Release, public: PublicKnowledge) -> np.ndarray:
        \"\"\"The recovered representation behind each of the first N updates, ``(N, dim)``.\"\"\"
        recovered = []
        for update in release.data.gradients[: self.attacks]:  # bench.core.releases.GradientRelease
            weight, bias = first_layer(update)
            unit = int(np.argmax(np.abs(bias)))
            recovered.append(weight[unit] / bias[unit] if bias[unit] else np.zeros(weight.shape[1]))
        return np.array(recovered)

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> np.ndarray:
        \"\"\"Standard normal representations of the same shape.\"\"\"
        updates = release.data.gradients[: self.attacks]
        return rng.standard_normal((len(updates), first_layer(updates[0])[0].shape[1]))

    def score(self, guesses: np.ndarray, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        \"\"\"Success rate and mean MSE against the owners' true representations.\"\"\"
        true = public.encoder.encode(truth.texts[: len(guesses)])
        mse = ((np.asarray(guesses, dtype=np.float64) - np.asarray(true, dtype=np.float64)) ** 2).mean(axis=1)
        return {"success_rate": float((mse <= self.threshold).mean()), "mse": float(mse.mean())}
'''

# -- tasks, one per server family ---------------------------------------------------------------------------------

CLASSIFICATION_TASK = '''\
"""__TITLE__: binary sentiment of short sentences (replace with the task and where its data comes from).

Paper: none yet; cite the dataset's paper (authors, title, venue, year).
Threat model: the client's sentences and labels are private; the server trains on releases only.
Deviations: none yet; the template's inline examples stand in for the task's files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import Examples, Metric, TaskData, TokenTask, register_task, require
from bench.core.scores import accuracy
from bench.core.seeding import numpy_generator
from bench.core.examples import sample_indices

# replace with the task's data (read files under bench.core.examples.data_dir())
EXAMPLES = [
    (int(good), f"the {noun} is {word}")
    for noun in ("film", "story", "cast", "plot", "ending", "score")
    for good, word in ((1, "warm"), (1, "funny"), (1, "sharp"), (0, "dull"), (0, "flat"), (0, "stale"))
]


@register_task("__NAME__")
@dataclass
class __CLS__(TokenTask):
    """Classify a sentence as positive (1) or negative (0); scored by accuracy."""

    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("accuracy", True, "fraction of evaluation examples classified correctly"),
    )
    protocols: ClassVar[tuple[str, ...]] = ("representations", "tokens")
    num_labels: ClassVar[int] = 2
    default_n_train: ClassVar[int] = 24
    default_n_eval: ClassVar[int] = 12
    eval_fraction: float = 0.33  # share of the examples held out for evaluation (a fixed split, not the run's seed)

    def __post_init__(self) -> None:
        require(0 < self.eval_fraction < 1, f"__NAME__ eval_fraction must be in (0, 1), got {self.eval_fraction}.")

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """A fixed train/evaluation split, then seeded samples of the requested sizes."""
        texts = tuple(text for _, text in EXAMPLES)
        examples = Examples(texts, np.array([label for label, _ in EXAMPLES]))
        order = np.random.default_rng(12345).permutation(len(texts))
        cut = int(round(len(texts) * (1 - self.eval_fraction)))
        train, evaluation = examples.subset(order[:cut]), examples.subset(order[cut:])
        rng = numpy_generator(seed, "data", self.registry_name)
        train = train.subset(sample_indices(len(train), n_train, rng))
        evaluation = evaluation.subset(sample_indices(len(evaluation), n_eval, rng))
        return TaskData(train, evaluation, "inline")

    def score(self, predictions, labels) -> dict[str, float]:
        """Accuracy, the headline metric."""
        return {"accuracy": accuracy(predictions, labels)}

    def server(self, spec, training):
        """A sentence classifier: the server's encoder and an MLP head."""
        from bench.models.servers import SentenceServer

        return SentenceServer(self.num_labels, training, spec.seed)
'''

TAGGING_TASK = '''\
"""__TITLE__: tag person and place names in short sentences (replace with the task and its data).

Paper: none yet; cite the dataset's paper (authors, title, venue, year).
Threat model: the client's sentences and tags are private, and its names are the sensitive spans; the server
trains a tagger on the released tokens and is scored on the original evaluation text.
Deviations: none yet; the template's inline examples stand in for the task's files.

Labels are one tag id per word (IOB2: ``TAGS``); a released WordPiece carries its word's tag (a B- word's later
pieces carry I-), and a word is scored by its first released piece (O when it has none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import BenchError, Edit, Examples, Metric, Span, SpanTask, TaskData, TokenTask, register_task, require
from bench.core.seeding import numpy_generator
from bench.data.alignment import word_of_pieces
from bench.core.examples import sample_indices

TAGS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
KINDS = ("PER", "LOC")
TAG = {tag: i for i, tag in enumerate(TAGS)}

# replace with the task's data (read files under bench.core.examples.data_dir()); words and tags, "" = O
NAMES = (("alice", "PER"), ("bob", "PER"), ("carol", "PER"), ("paris", "LOC"), ("new york", "LOC"),
         ("lima", "LOC"), ("dan", "PER"), ("oslo", "LOC"))
FRAMES = ("{} went home", "we met {} today", "{} is far away", "they saw {} again")


def _examples() -> tuple[list[str], list[list[int]]]:
    texts, labels = [], []
    for frame in FRAMES:
        for name, kind in NAMES:
            before, after = frame.split("{}")
            words = before.split() + name.split() + after.split()
            tags = [TAG["O"]] * len(before.split()) + [TAG[f"B-{kind}"]] + [TAG[f"I-{kind}"]] * (len(name.split()) - 1)
            texts.append(" ".join(words))
            labels.append(tags + [TAG["O"]] * len(after.split()))
    return texts, labels


def entities(tags) -> list[tuple[int, int, str]]:
    """The IOB2 entities of one sentence: (first word, end word, kind)."""
    found, start = [], None
    for i, tag in enumerate(list(tags) + [TAG["O"]]):
        name = TAGS[int(tag)]
        if start is not None and not name.startswith("I-"):
            found.append((start, i, TAGS[int(tags[start])][2:]))
            start = None
        if name.startswith("B-"):
            start = i
    return found


@register_task("__NAME__")
@dataclass
class __CLS__(TokenTask, SpanTask):
    """Tag each word O, PER or LOC (IOB2); scored by exact-match entity F1."""

    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("f1", True, "entity F1: an entity counts when its boundaries and kind match"),
    )
    protocols: ClassVar[tuple[str, ...]] = ("tokens",)  # a tag needs its token
    evaluate_on: ClassVar[str] = "original"  # trained on released text, scored on the original evaluation text
    num_labels: ClassVar[int] = len(TAGS)
    span_kinds: ClassVar[tuple[str, ...]] = KINDS  # the names of each kind are sensitive
    training_defaults: ClassVar[dict] = {"epochs": 10, "batch_size": 64}  # batches of WordPieces, not sentences
    default_n_train: ClassVar[int] = 24
    default_n_eval: ClassVar[int] = 8
    eval_fraction: float = 0.25  # share of the examples held out for evaluation (a fixed split, not the run's seed)

    def __post_init__(self) -> None:
        require(0 < self.eval_fraction < 1, f"__NAME__ eval_fraction must be in (0, 1), got {self.eval_fraction}.")

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """A fixed train/evaluation split, then seeded samples of the requested sizes."""
        texts, tags = _examples()
        labels = np.empty(len(tags), dtype=object)
        labels[:] = tags
        examples = Examples(tuple(texts), labels)
        order = np.random.default_rng(12345).permutation(len(texts))
        cut = int(round(len(texts) * (1 - self.eval_fraction)))
        train, evaluation = examples.subset(order[:cut]), examples.subset(order[cut:])
        rng = numpy_generator(seed, "data", self.registry_name)
        train = train.subset(sample_indices(len(train), n_train, rng))
        evaluation = evaluation.subset(sample_indices(len(evaluation), n_eval, rng))
        return TaskData(train, evaluation, "inline")

    def server(self, spec, training):
        """A token tagger: the server's frozen encoder and an MLP head over each released piece."""
        from bench.models.servers import TaggingServer

        return TaggingServer(self.num_labels, training, spec.seed)

    def token_labels(self, texts, labels, encoder):
        """Word tags aligned to the released WordPieces (the client's side): one tag array per sentence."""
        out = np.empty(len(texts), dtype=object)
        for i, (word_of, tags) in enumerate(zip(word_of_pieces(texts, encoder.tokenizer, encoder.max_length),
                                                labels)):
            pieces = np.asarray(tags, dtype=np.int64)[word_of]
            later = np.r_[False, word_of[1:] == word_of[:-1]] if len(word_of) else np.zeros(0, bool)
            begins = later & np.isin(pieces, [TAG[f"B-{kind}"] for kind in KINDS])
            pieces[begins] += 1  # B-X and I-X are adjacent ids
            out[i] = pieces
        return out

    def task_predictions(self, predictions, texts, encoder):
        """Piece tags back to word tags: each word's first released piece; O for a word with none."""
        words = []
        for word_of, text, tags in zip(word_of_pieces(texts, encoder.tokenizer, encoder.max_length), texts,
                                       predictions):
            out = np.full(len(text.split(" ")), TAG["O"], dtype=np.int64)
            first = np.r_[True, word_of[1:] != word_of[:-1]] if len(word_of) else np.zeros(0, bool)
            out[word_of[first]] = np.asarray(tags, dtype=np.int64)[first]
            words.append(out)
        return words

    def score(self, predictions, labels) -> dict[str, float]:
        """Entity F1 of predicted word tags against the gold word tags."""
        predicted = {(i, e) for i, tags in enumerate(predictions) for e in entities(tags)}
        gold = {(i, e) for i, tags in enumerate(labels) for e in entities(tags)}
        hits = len(predicted & gold)
        return {"f1": 2 * hits / (len(predicted) + len(gold)) if predicted or gold else 0.0}

    def sensitive_spans(self, data: TaskData, split: str, index: int) -> list[Span]:
        """The gold entities of example ``index`` of ``split``; kind = entity kind."""
        if split not in ("train", "eval"):
            raise BenchError(f"split must be train or eval, got '{split}'.")
        return [Span(start, end, kind) for start, end, kind in entities(getattr(data, split).labels[index])]

    def span_fragment(self, label, text, span: Span) -> list[int]:
        """The entity's own tags: what a substituted entity carries."""
        return list(label[span.start:span.end])

    def rewrite_label(self, label, text, edits: list[Edit]) -> list[int]:
        """Tags of the rewritten sentence: a rewritten entity keeps its kind, B-X I-X ..., whatever its words."""
        out, cursor = [], 0
        for edit in sorted(edits, key=lambda e: e.span.start):
            out.extend(label[cursor:edit.span.start])
            out.extend([TAG[f"B-{edit.span.kind}"]] + [TAG[f"I-{edit.span.kind}"]] * (len(edit.words) - 1))
            cursor = edit.span.end
        return out + list(label[cursor:])
'''

ATTRIBUTE_TASK = '''\
"""__TITLE__: a review classifier behind a prediction API, its authors' region private (replace with the task).

Paper: none yet; cite the dataset's paper (authors, title, venue, year).
Threat model: the victim trains on its users' reviews and answers queries through an API; each author's region is
private, and an attacker queries the API to infer it.
Deviations: none yet; the template's inline examples stand in for the task's files.

The engine deals the pool into five disjoint splits (``tasks.attributes.AttributeTask.load``): the victim's
training data, the adversary's queries and attribute-labelled auxiliary texts, the texts whose attributes are
attacked, and the utility evaluation data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import register_task
from bench.tasks.attributes import AttributeTask

# replace with the task's data: (label, region, text); the region shows in the spelling, as an attribute may
REVIEWS = [
    (good, region, f"the {noun} {verb} {word}")
    for noun in ("colour", "flavour", "service", "parcel", "fit", "price")
    for good, word in ((1, "great"), (1, "lovely"), (1, "superb"), (0, "poor"), (0, "awful"), (0, "dull"))
    for region, verb in ((0, "was really"), (0, "seemed quite"), (0, "felt very"), (0, "looked so"),
                         (1, "was rather"), (1, "seemed a bit"), (1, "felt somewhat"), (1, "looked fairly"))
]


@register_task("__NAME__")
@dataclass
class __CLS__(AttributeTask):
    \"\"\"Sentiment of a review as the label; the author's region (0 or 1) as the private attribute.\"\"\"

    num_labels = 2
    attributes: ClassVar[tuple[str, ...]] = ("region",)
    default_n_train = 24
    default_n_eval = 12

    def pool(self):
        \"\"\"Every example: texts, labels, attributes by name, and notes for the record.\"\"\"
        texts = tuple(text for _, _, text in REVIEWS)
        labels = np.array([label for label, _, _ in REVIEWS])
        return texts, labels, {"region": np.array([region for _, region, _ in REVIEWS])}, \
            {"label": "sentiment (1 = positive)", "attributes": "region (0 or 1)"}
'''

