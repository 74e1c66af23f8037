"""Representation-based similarity search (RSS): return the corpus sentence nearest to a release.

Paper: Huang et al. "TextHide: Tackling Data Privacy in Language Understanding Tasks." Findings of
EMNLP 2020, §4.4 and Table 3.
Threat model: the adversary holds the public encoder and the task corpus (every sentence of the
run's train and evaluation slices, without knowing which one was released). It indexes the
corpus by its undefended representations and, for each released representation, returns the
sentence of highest cosine similarity (exact search with faiss).

Metrics of the returned sentence x* against the true x: Identity (x* = x), JCdist (word Jaccard
|x ∩ x*| / |x ∪ x*|, as the paper defines it), TF-IDFsim (TF-IDF cosine, fitted on the corpus),
Label (same label; on a regression task such as STS-B the same similarity score exactly, which few pairs share, so
it is near 0 for the attack and the random guess alike and says nothing there) and SBERTsim (cosine of SBERT
embeddings; the packaged all-MiniLM-L6-v2 is the SBERT model). The random reference returns a uniformly drawn
corpus sentence. For sentence-pair tasks a corpus item is the pair; the word metrics read its two sentences joined.
Deviation: the paper indexes the whole dataset; the offline default indexes the run's slices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import Attack, Metric, PublicKnowledge, Release, ReleaseKind, Truth, register_attack
from bench.core.examples import as_text
from bench.core.scores import cosine_rows, jaccard_words, tfidf_cosine
from bench.privacy.neighbours import cosine_search


@register_attack()
@dataclass
class RSS(Attack):
    """Nearest corpus sentence (cosine) to each released sentence representation."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.SENTENCE_EMBEDDINGS,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("identity", True, "fraction of queries whose returned sentence is the true one"),
        Metric("jcdist", True, "Jaccard word overlap of the returned and the true sentence"),
        Metric("tfidf", True, "TF-IDF cosine of the returned and the true sentence"),
        Metric("label", True, "fraction of returned sentences with the true sentence's label"),
        Metric("sbert", True, "SBERT cosine of the returned and the true sentence", -1.0, 1.0),
    )

    knowledge: ClassVar[dict[str, str]] = {
        "index": "TextHide §4.4: the adversary searches the dataset the released sentences come from, to re-identify "
                 "them",
    }

    sbert: str = "minilm"  # sentence-transformer used for SBERTsim ("minilm" = all-MiniLM-L6-v2)

    def check(self) -> None:
        """The SBERT model must resolve (no weights are loaded)."""
        from bench.models.loading import check_model_name

        check_model_name(self.sbert, f"rss sbert='{self.sbert}', the SBERTsim model,")

    def attack(self, release: Release, public: PublicKnowledge) -> np.ndarray:
        """Index of the corpus sentence most similar to each released representation."""
        corpus_reps = public.encoder.encode(public.index)
        _, nearest = cosine_search(corpus_reps, release.data, k=1)
        return nearest[:, 0]

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> np.ndarray:
        """A uniformly drawn corpus index per release row."""
        return rng.integers(0, len(public.index), size=len(release.owners))

    def score(self, guesses: np.ndarray, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Identity, JCdist, TF-IDFsim, Label and SBERTsim averaged over release rows."""
        from bench.models.loading import load_encoder

        guessed = [public.index[i] for i in guesses]
        guessed_text, true_text = [as_text(x) for x in guessed], [as_text(x) for x in truth.texts]
        device = getattr(public.encoder, "device", "cpu")  # the cell's device
        corpus_sbert = load_encoder(self.sbert, device).encode(public.index)  # mean pooling, as SBERT
        position = {text: i for i, text in enumerate(public.index)}
        true_rows = np.array([position[t] for t in truth.texts])
        return {
            "identity": float(np.mean([g == t for g, t in zip(guessed, truth.texts)])),
            "jcdist": float(np.mean(jaccard_words(guessed_text, true_text))),
            "tfidf": float(np.mean(tfidf_cosine(guessed_text, true_text, [as_text(x) for x in public.index]))),
            "label": float(np.mean(truth.index_labels[guesses] == truth.labels)),
            "sbert": float(np.mean(cosine_rows(corpus_sbert[guesses], corpus_sbert[true_rows]))),
        }
