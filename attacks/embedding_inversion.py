"""Learned embedding inversion: predict the words of a sentence from its released representation.

Paper: Congzheng Song and Ananth Raghunathan. "Information Leakage in Embedding Models." ACM CCS 2020, §4
(embedding inversion; the learning-based black-box attack that predicts the sentence's set of words as a
multi-label classification).
Threat model: the adversary observes released sentence representations and knows the public encoder, the public
mechanism with its parameters, and public text disjoint from every private split. It never holds a private
(released, original) pair and never the client's secrets (noise draws, mixing weights and partners, mask pool).

Method. The adversary encodes the public sentences with the public encoder and passes them through the release's
public mechanism as it can run it itself (noise-aware training): d_chi noise at the release's eta; for TextHide,
mixing with k - 1 partners drawn from its own public batch with |N(0, 1)| weights, then a sign mask from a pool of
m masks it draws itself (the client's pool is secret). The mechanism is sampled afresh every epoch. Under a mask the
model reads absolute values, which any mask leaves as they are. An MLP (one hidden layer, ReLU) with one sigmoid
output per word of the public vocabulary (the most frequent words of the public sentences) is trained with binary
cross-entropy to predict which words a sentence holds; for a mixture, the words of its own sentence (member 0).

Guess. The adversary does not know the attacked sentence's length: for each released row it returns the L words of
highest probability, L being the mean number of distinct words of a public sentence; for the content-word metrics,
the L_c most probable words that are not stop words, L_c the mean number of distinct content words of a public
sentence. Stop words are scikit-learn's English list; words are lower-cased ``\\w+`` runs.

Metrics: word precision, recall and F1 of the guessed words against the attacked sentence's distinct words, averaged
over rows; ``precision``, ``recall``, ``f1`` without stop words (rows without a content word are left out), the
``_all`` ones with them. The random reference is a frequency guess of the same length: the L (L_c) words that most
public sentences hold, for every row. Sentence pairs are scored on their two sentences' words together.

Deviation: the paper also trains a multi-set prediction decoder and a white-box relaxation; here the multi-label
predictor alone. A generative decoder conditioned on the representation (GEIA, Li et al. 2023; Vec2Text, Morris et al.
2023) is the goal and not built: no word order, and no word outside the public vocabulary.
Deviation: TextHide's inter scheme mixes public sentences of another task; the adversary mixes its own public
sentences in both schemes, and takes a TextHide release as training traffic (mixed, then masked).
Limit: the public text of a task without its own is Wikipedia and Reuters sentences, so words frequent in the task's
domain and rare there are predicted poorly, and the frequency reference is that text's most frequent words.
Limit: a mechanism the adversary cannot run (a defense declared by name only) is attacked by a model trained on
undefended representations (the record's ``inversion_mechanism`` note says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bench import Attack, Metric, PublicKnowledge, Release, ReleaseKind, Truth, register_attack, require, within
from bench.core.errors import BenchError
from bench.core.examples import as_text
from bench.core.progress import track
from bench.core.scores import words
from bench.core.seeding import derive_seed
from bench.privacy.mechanisms import dchi_noise


def stop_words() -> frozenset[str]:
    """scikit-learn's English stop words."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


@dataclass
class WordGuesses:
    """The guessed words of each attacked row: over all words, and over content words (no stop words)."""

    all: list[list[str]]
    content: list[list[str]]


def word_scores(guessed: list[list[str]], true: list[set[str]]) -> tuple[float, float, float]:
    """Mean precision, recall and F1 of guessed word lists against true word sets (rows without a true word left
    out; 0 for each when no row has one)."""
    rows = [(set(g), t) for g, t in zip(guessed, true) if t]
    if not rows:
        return 0.0, 0.0, 0.0
    p, r, f = [], [], []
    for g, t in rows:
        hit = len(g & t)
        precision, recall = (hit / len(g) if g else 0.0), hit / len(t)
        p.append(precision)
        r.append(recall)
        f.append(2 * precision * recall / (precision + recall) if hit else 0.0)
    return float(np.mean(p)), float(np.mean(r)), float(np.mean(f))


@register_attack("embedding-inversion")
@dataclass
class EmbeddingInversion(Attack):
    """An MLP trained on public sentences through the public mechanism predicts each release's words."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.SENTENCE_EMBEDDINGS,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("f1", True, "word F1 of the guessed and the true sentence's content words (stop words excluded)"),
        Metric("precision", True, "share of guessed content words the sentence holds"),
        Metric("recall", True, "share of the sentence's content words guessed"),
        Metric("f1_all", True, "word F1 with stop words included"),
        Metric("precision_all", True, "share of guessed words the sentence holds, stop words included"),
        Metric("recall_all", True, "share of the sentence's words guessed, stop words included"),
    )
    knowledge: ClassVar[dict[str, str]] = {
        "public": "Song & Raghunathan §4: the adversary trains its inversion model on public text it encodes itself "
                  "with the public encoder; the word frequencies of the reference",
    }
    check_args: ClassVar[dict] = {"epochs": 1, "public_size": 256, "vocabulary": 500, "hidden": 64}

    vocabulary: int = within(3000, "[1, 1e6]")  # words the model can predict: the public text's most frequent
    hidden: int = within(512, "[1, 65536]")  # width of the MLP's hidden layer
    epochs: int = within(10, "[1, 1e5]")  # passes over the public sentences, the mechanism sampled afresh each time
    lr: float = within(1e-3, "(0, 10]")  # Adam learning rate
    batch_size: int = within(128, "[1, 65536]")  # public sentences per step (TextHide mixes within a batch)
    public_size: int = within(20000, "[1, 1e7]")  # public sentences trained on (the first ones of the public corpus)
    seed: int = within(0, "[0, 4294967295]")  # seeds the model, the batches and the adversary's mechanism draws
    run_notes: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("vocabulary", "hidden", "epochs", "batch_size", "public_size"):
            value = getattr(self, name)
            require(value >= 1, f"embedding-inversion {name} must be >= 1 (an inversion budget of {value} trains "
                                f"nothing), got {value}.")
        require(self.lr > 0, f"embedding-inversion lr must be positive, got {self.lr}.")

    # -- what the adversary learns from public text ------------------------------------------------------------

    def public_words(self, public: PublicKnowledge) -> tuple[list[str], list[set[str]]]:
        """The public sentences trained on and their word sets."""
        sentences = list(public.public)[: self.public_size]
        if not sentences:
            raise BenchError("embedding-inversion needs public sentences to train on, and this run has none.")
        return sentences, [words(s) for s in sentences]

    def lengths(self, sets: list[set[str]]) -> tuple[int, int]:
        """L and L_c: the mean numbers of distinct words and of distinct content words of a public sentence."""
        stop = stop_words()
        all_words = max(1, round(float(np.mean([len(s) for s in sets]))))
        content = max(1, round(float(np.mean([len(s - stop) for s in sets]))))
        return all_words, content

    def frequent(self, sets: list[set[str]]) -> list[str]:
        """The words most public sentences hold, most frequent first (ties by word), at most ``vocabulary``."""
        from collections import Counter

        counts = Counter(w for s in sets for w in s)
        return sorted(counts, key=lambda w: (-counts[w], w))[: self.vocabulary]

    def attack(self, release: Release, public: PublicKnowledge) -> WordGuesses:
        """Train the inversion model on public sentences through the mechanism; the top words of each row."""
        sentences, sets = self.public_words(public)
        vocab = self.frequent(sets)
        column = {w: i for i, w in enumerate(vocab)}
        targets = np.zeros((len(sets), len(vocab)), dtype=np.float32)
        for row, s in enumerate(sets):
            targets[row, [column[w] for w in s if w in column]] = 1.0
        reps = public.encoder.encode(sentences)
        predict = self.fit(reps, targets, release.mechanism)
        scores = predict(np.asarray(release.data, dtype=np.float32))
        stop = stop_words()
        content = np.array([w not in stop for w in vocab])
        length, content_length = self.lengths(sets)
        self.run_notes = {"inversion_vocabulary": len(vocab), "inversion_words_guessed": length,
                          "inversion_content_words_guessed": content_length,
                          "inversion_mechanism": channel_note(release.mechanism)}
        return WordGuesses(top_words(scores, vocab, length),
                           top_words(np.where(content, scores, -np.inf), vocab, content_length))

    def fit(self, reps: np.ndarray, targets: np.ndarray, mechanism):
        """Noise-aware training of the multi-label MLP; returns ``released rows -> word logits``."""
        import torch
        from torch import nn

        from bench.models.generators import torch_generator

        channel = Channel(mechanism, reps.shape[1], self.seed)
        x, y = torch.as_tensor(reps, dtype=torch.float32), torch.as_tensor(targets)
        draws = torch_generator(self.seed, "embedding-inversion-mechanism")
        first = channel(x[: min(len(x), 4096)], torch.arange(min(len(x), 4096)), draws)[0]
        mean, std = first.mean(dim=0), first.std(dim=0).clamp_min(1e-6)  # standardise what the model reads
        with torch.random.fork_rng():
            torch.manual_seed(derive_seed(self.seed, "embedding-inversion-init"))
            model = nn.Sequential(nn.Linear(x.shape[1], self.hidden), nn.ReLU(), nn.Linear(self.hidden, y.shape[1]))
        optimizer = torch.optim.Adam(model.parameters(), lr=self.lr, foreach=True)
        order_generator = torch_generator(self.seed, "embedding-inversion-batches")
        loss_fn = nn.BCEWithLogitsLoss()
        for _ in track(range(self.epochs), f"embedding-inversion: training on {len(x):,} public sentences",
                       unit="epochs"):
            order = torch.randperm(len(x), generator=order_generator)
            for start in range(0, len(x), self.batch_size):
                idx = order[start : start + self.batch_size]
                released, _ = channel(x[idx], idx, draws)
                loss = loss_fn(model((released - mean) / std), y[idx])  # the words of member 0, the row's own
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        model.eval()

        def predict(rows: np.ndarray) -> np.ndarray:
            with torch.inference_mode():
                observed = channel.view(torch.as_tensor(rows))
                return model((observed - mean) / std).numpy()

        return predict

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> WordGuesses:
        """The L (L_c) words most public sentences hold, for every row."""
        _, sets = self.public_words(public)
        vocab = self.frequent(sets)
        stop = stop_words()
        length, content_length = self.lengths(sets)
        rows = len(release.owners)
        frequent_all = vocab[:length]
        frequent_content = [w for w in vocab if w not in stop][:content_length]
        return WordGuesses([list(frequent_all)] * rows, [list(frequent_content)] * rows)

    def score(self, guesses: WordGuesses, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Word precision, recall and F1 against each row's sentence, without and with stop words."""
        stop = stop_words()
        true = [words(as_text(t)) for t in truth.texts]
        p, r, f = word_scores(guesses.content, [t - stop for t in true])
        p_all, r_all, f_all = word_scores(guesses.all, true)
        return {"f1": f, "precision": p, "recall": r, "f1_all": f_all, "precision_all": p_all, "recall_all": r_all}


def top_words(scores: np.ndarray, vocab: list[str], length: int) -> list[list[str]]:
    """The ``length`` words of highest score in each row (finite scores only)."""
    length = min(length, len(vocab))
    best = np.argsort(-scores, axis=1, kind="stable")[:, :length]
    return [[vocab[j] for j in row if np.isfinite(scores[i, j])] for i, row in enumerate(best)]


def channel_note(mechanism) -> str:
    """What the adversary ran of the mechanism, for the record."""
    channel = Channel(mechanism, 1, 0)
    if not channel.runs:
        return f"{channel.name}: not runnable by the adversary; trained on undefended representations"
    return ", ".join(filter(None, [channel.name, f"eta={channel.eta}" if channel.eta is not None else "",
                                   f"k={channel.k}" if channel.k > 1 else "",
                                   f"own pool of m={channel.m} masks, absolute values read" if channel.masked else ""]))


class Channel:
    """The public mechanism as the adversary runs it on its own sentences (never the client's secrets)."""

    def __init__(self, mechanism, dim: int, seed: int) -> None:
        import torch

        self.name = getattr(mechanism, "name", "identity")
        self.eta = getattr(mechanism, "eta", None)
        self.k = int(getattr(mechanism, "k", 1)) if self.name == "mix-and-mask" else 1
        self.m = getattr(mechanism, "m", 0) if self.name == "mix-and-mask" else 0
        self.masked = self.m != 0
        self.pool = None
        if self.masked and self.m != "inf":  # the adversary's own pool of m masks
            bits = torch.randint(0, 2, (int(self.m), dim), generator=_generator(seed, "embedding-inversion-pool"))
            self.pool = bits.float() * 2 - 1
        self.runs = self.name in ("identity", "dchi-sentence-noise", "mix-and-mask")  # else: trained undefended

    def __call__(self, reps, idx, generator):
        """The batch released as the mechanism releases it, and the row indices of each row's members."""
        import torch

        out = reps
        if self.name == "dchi-sentence-noise":
            seed = int(torch.randint(0, 2**62, (1,), generator=generator))
            noise = dchi_noise(len(reps), reps.shape[1], float(self.eta), np.random.default_rng(seed))
            out = reps + torch.from_numpy(noise)
        if self.k > 1:  # mix with k - 1 partners of the batch, |N(0, 1)| weights summing to 1
            n = len(reps)
            weights = torch.randn(n, self.k, generator=generator).abs()
            weights = weights / weights.sum(dim=1, keepdim=True)
            members = torch.stack([torch.arange(n)] + [torch.randperm(n, generator=generator)
                                                       for _ in range(self.k - 1)])
            out = (weights.T.unsqueeze(-1) * reps[members]).sum(dim=0)
        if self.masked:
            if self.pool is None:
                mask = torch.randint(0, 2, out.shape, generator=generator).float() * 2 - 1
            else:
                mask = self.pool[torch.randint(0, len(self.pool), (len(out),), generator=generator)]
            out = out * mask
        return self.view(out), idx

    def view(self, released):
        """What the model reads of a released row: its absolute values under a sign mask, else the row."""
        released = released.float()
        return released.abs() if self.masked else released


def _generator(seed: int, purpose: str):
    from bench.models.generators import torch_generator

    return torch_generator(seed, purpose)
