"""Attribute inference tasks (He et al. 2022): Trustpilot (TP-US), the Blog Authorship Corpus and AG News.

Each is a classifier served as a prediction API, whose authors' private attributes an adversary infers through an
extracted copy.

Offline from ``$BENCH_DATA_DIR/aia`` (the layout of shared/data; no hub copy of these preprocessed sets exists):

- ``trustpilot``: ``www2015_valid.csv`` and ``www2015_test.csv`` pooled, the US reviews only (country
  ``united_states``: TP-US, 1,759 rows); label = rating 1-5 (classes 0-4); attributes ``gender`` (1 = male) and
  ``age`` (1 = born before 1960), as the files give them.
- ``blog``: the 200-author sample; each ``<post>`` is an example (at most the first 100 posts of an author, so a
  few prolific authors do not fill the pool); label = the author's industry, restricted to the five most frequent
  known industries of the sample (Student, Arts, Technology, Internet, Education; ``indUnk`` and rarer ones are
  left out); attributes ``gender`` (1 = male) and ``age`` (the corpus's three age groups 13-17, 23-27, 33-48 as
  classes 0-2). The splits are drawn by author: no author's posts fall in two splits (version 2; before, posts
  were permuted one by one, so an author's posts in the auxiliary and evaluation sets let the attacker recognise
  the author rather than infer the attribute, and the victim's industry label rode on the same authors).
- ``agnews``: ``dev.tsv`` and ``test.tsv`` pooled, then a fixed (seed-independent) sample of 4,000 articles, so
  spaCy runs once over a bounded pool; label = the 4 topics; attributes ``person1``..``person5``: whether the
  article mentions each of the 5 most frequent PERSON entities of that pool (spaCy ``en_core_web_sm``; an entity
  is keyed by its last word, so "George W. Bush" and "Bush" count as one person). ``notes`` names them.

Every text is whitespace-normalised and cut to its first 100 words (the encoder reads at most 128 pieces).
Splits (``bench.core.examples.AttributeData``), drawn from the pool with the run's seed as consecutive blocks of
one permutation, so they are disjoint: victim training (``n_train``), the adversary's queries (``n_train``: "1x
queries"), its auxiliary attribute-labelled data (``n_train``), the attribute evaluation set (``n_eval``) and the
victim's utility evaluation set (``n_eval``). A task whose examples have authors (Blog) deals whole authors to the
five splits instead (``split_by_author``): the authors of each label in a seeded order, each to the split furthest
below its share of that label's posts dealt so far (first to every split once); then each split draws its size
from its own authors' posts. AG News's person attributes are sparse, so there the articles the five
blocks leave (2,400 at the defaults) go half to the auxiliary set and half to the attribute evaluation set.

Sensitive spans (for span defenses such as ``ndd``, which rewrite the victim's training text): spaCy's entities of
each text, kind = spaCy's label, computed once per text and cached (``tasks.squad.spacy_entities``). Rewriting
a span changes neither the label nor the attributes.
"""

from __future__ import annotations

import csv
import re
import string
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bench import ApiTask, BenchError, Examples, Metric, SpanTask, register_task
from bench.core import smoke
from bench.core.examples import AttributeData, data_dir
from bench.core.seeding import numpy_generator
from bench.core.spans import Span
from bench.tasks.squad import ENTITY_KINDS, spacy_entities

MAX_WORDS = 100  # words kept of each text
BLOG_POSTS_PER_AUTHOR = 100  # first posts of each author in the pool
BLOG_INDUSTRIES = ("Student", "Arts", "Technology", "Internet", "Education")
BLOG_AGE_GROUPS = ((13, 17), (23, 27), (33, 48))
AGNEWS_POOL = 4000  # articles of the fixed AG News pool spaCy reads
AGNEWS_TOPICS = ("World", "Sports", "Business", "Sci/Tech")
PERSONS = 5  # most frequent PERSON entities made attributes
SPLITS = ("train", "queries", "auxiliary", "attribute_eval", "eval")


def normalise(text: str) -> str:
    """Single spaces between words, at most ``MAX_WORDS`` words."""
    return " ".join(text.split()[:MAX_WORDS])


def _folder(name: str) -> Path:
    folder = data_dir() / "aia" / name
    if not folder.is_dir():
        raise BenchError(f"no offline copy of '{name}' under {folder}: set BENCH_DATA_DIR to a folder with "
                         f"aia/{name} (the layout of shared/data); these preprocessed sets are not on the hub.")
    return folder


Pool = tuple[tuple[str, ...], np.ndarray, dict[str, np.ndarray], dict[str, Any]]  # texts, labels, attributes, notes


class AttributeTask(ApiTask, SpanTask):
    """A victim classifier behind a prediction API, with its authors' private attributes."""

    metrics = (Metric("accuracy", True, "accuracy of the argmax of the API's (defended) answers on the victim's "
                                        "evaluation split"),)
    protocols = ("api",)
    default_n_train = 400
    default_n_eval = 200
    span_kinds: ClassVar[tuple[str, ...]] = ()  # set below from tasks.squad's spaCy labels

    def pool(self) -> Pool:
        """Every usable example of the offline files."""
        raise NotImplementedError

    def authors(self) -> np.ndarray | None:
        """The author of each example of ``pool`` (any hashable ids), or None when examples are split one by one."""
        return None

    def load(self, n_train: int, n_eval: int, seed: int) -> AttributeData:
        """The five disjoint splits (see the module docstring), drawn with the run's seed."""
        texts, labels, attributes, notes = self.pool()
        sizes = (n_train, n_train, n_train, n_eval, n_eval)
        if sum(sizes) > len(texts):
            raise BenchError(f"task '{self.registry_name}' has {len(texts)} examples, fewer than the {sum(sizes)} "
                             f"its five splits need (3 x n_train + 2 x n_eval); lower n_train or n_eval.")
        rng = numpy_generator(seed, "aia-splits", self.registry_name)
        authors = self.authors()
        if authors is not None:
            parts = split_by_author(authors, labels, sizes, rng, self.registry_name)
            splits = ("victim train, queries (1x), auxiliary, attribute eval, utility eval: whole authors dealt to "
                      "the splits (no author in two), label by label; each split's posts drawn from its authors")
            return self._data(texts, labels, attributes, parts, {"splits": splits, **notes})
        order = rng.permutation(len(texts))
        bounds = np.cumsum((0,) + sizes)
        parts = {name: order[a:b] for name, a, b in zip(SPLITS, bounds, bounds[1:])}
        # the examples no split holds go half to the auxiliary, half to the evaluation set (not at --check's smoke
        # budget, where encoding AG News's 3,700 leftovers took most of a cell's minute)
        if self.sparse_attributes and not smoke.active():
            rest = order[bounds[-1]:]
            half = len(rest) // 2
            parts["auxiliary"] = np.concatenate([parts["auxiliary"], rest[:half]])
            parts["attribute_eval"] = np.concatenate([parts["attribute_eval"], rest[half:]])
        splits = "victim train, queries (1x), auxiliary, attribute eval, utility eval: disjoint blocks of one " \
                 "seeded permutation"
        return self._data(texts, labels, attributes, parts, {"splits": splits, **notes})

    def _data(self, texts, labels, attributes, parts: dict[str, np.ndarray], notes: dict) -> AttributeData:
        examples = {name: Examples(tuple(texts[i] for i in idx), labels[idx]) for name, idx in parts.items()}
        return AttributeData(
            examples["train"], examples["eval"], source=f"offline {data_dir() / 'aia' / self.folder}", notes=notes,
            queries=examples["queries"], auxiliary=examples["auxiliary"], attribute_eval=examples["attribute_eval"],
            attributes={name: {k: v[idx] for k, v in attributes.items()} for name, idx in parts.items()})

    folder: ClassVar[str] = ""
    sparse_attributes: ClassVar[bool] = False  # the auxiliary and attribute evaluation splits share the leftovers

    def server(self, spec, training):
        """The victim behind the API: frozen encoder features and an MLP head."""
        from bench.models.servers import PredictionServer

        return PredictionServer(type(self).num_labels, training, spec.seed)

    def score(self, predictions, labels) -> dict[str, float]:
        """Accuracy of the predicted classes."""
        return {"accuracy": float(np.mean(np.asarray(predictions) == np.asarray(labels)))}

    # -- sensitive spans (NDD on the victim's training text) ------------------------------------------

    def sensitive_spans(self, data, split: str, index: int) -> list[Span]:
        """spaCy's entities of example ``index`` of ``split`` (the first call for a split runs spaCy over all of
        its texts, batched and cached)."""
        texts = getattr(data, split).texts
        store = self.__dict__.setdefault("_entity_store", {})
        if texts not in store:
            store.clear()
            store[texts] = spacy_entities(list(texts))
        return [Span(start, end, kind) for start, end, kind in store[texts][index]]

    def rewrite_label(self, label, text, edits):
        """A class label does not depend on the words of a rewritten entity."""
        return label


def split_by_author(authors: np.ndarray, labels: np.ndarray, sizes: tuple[int, ...], rng: np.random.Generator,
                    task: str) -> dict[str, np.ndarray]:
    """Indices of the five splits (``SPLITS``, of ``sizes`` examples), no author in two.

    The authors of each label (an author's label is that of their first example) are taken in a seeded order, each
    dealt to the split furthest below its share of that label's examples dealt so far, among the splits that hold
    no author of the label yet while there are any (so a label with five authors or more is in every split); each
    split then draws its size, in a seeded order, from its own authors' examples.
    """
    names, first, which = np.unique(np.asarray(authors), return_index=True, return_inverse=True)
    author_labels = np.asarray(labels)[first]
    counts = np.bincount(which, minlength=len(names))
    shares = np.asarray(sizes, dtype=float) / sum(sizes)
    owner = np.empty(len(names), dtype=np.int64)
    order = rng.permutation(len(names))
    for label in np.unique(author_labels):
        have, dealt, held = np.zeros(len(sizes)), 0, np.zeros(len(sizes), dtype=bool)
        for author in order[author_labels[order] == label]:
            dealt += counts[author]
            deficit = np.where(held.all() | ~held, shares * dealt - have, -np.inf)
            split = int(np.argmax(deficit))
            owner[author], have[split], held[split] = split, have[split] + counts[author], True
    parts = {}
    for split, (name, size) in enumerate(zip(SPLITS, sizes)):
        pool = np.flatnonzero(owner[which] == split)
        if len(pool) < size:
            raise BenchError(f"task '{task}': the authors dealt to its {name} split wrote {len(pool)} examples, fewer "
                             f"than the {size} it needs; lower n_train or n_eval.")
        parts[name] = np.sort(rng.permutation(pool)[:size])
    return parts


def _set_span_kinds(cls):
    cls.span_kinds = ENTITY_KINDS
    return cls


@register_task("trustpilot")
@dataclass
class Trustpilot(AttributeTask):
    """TP-US reviews: rating as the label, the author's gender and age (born before 1960) as attributes."""

    num_labels = 5
    attributes: ClassVar[tuple[str, ...]] = ("gender", "age")
    folder: ClassVar[str] = "trustpilot"

    def pool(self) -> Pool:
        """The US reviews of both files."""
        return _trustpilot(str(_folder(self.folder)))


@lru_cache(maxsize=2)
def _trustpilot(folder: str) -> Pool:
    texts, labels, gender, age = [], [], [], []
    for name in ("www2015_valid.csv", "www2015_test.csv"):
        path = Path(folder) / name
        if not path.is_file():
            raise BenchError(f"{path} is missing; trustpilot needs both www2015 files.")
        with path.open(encoding="utf-8", newline="") as handle:
            for number, row in enumerate(csv.reader(handle), start=1):
                if len(row) != 5 or row[4].strip() != "united_states" or not row[0].strip():
                    continue
                try:
                    labels.append(int(row[1]) - 1)
                    gender.append(int(row[2]))
                    age.append(int(row[3]))
                except ValueError:
                    raise BenchError(f"{path}:{number} has rating/gender/age '{row[1:4]}', which are not "
                                     "integers.") from None
                texts.append(normalise(row[0]))
    return (tuple(texts), np.array(labels), {"gender": np.array(gender), "age": np.array(age)},
            {"label": "rating 1-5 as classes 0-4", "attributes": "gender (1 = male), age (1 = born before 1960)"})


@register_task("blog")
@dataclass
class Blog(AttributeTask):
    """Blog posts: the author's industry (five most frequent known) as the label, gender and age group as
    attributes."""

    num_labels = len(BLOG_INDUSTRIES)
    attributes: ClassVar[tuple[str, ...]] = ("gender", "age")
    folder: ClassVar[str] = "blog"
    version: ClassVar[str] = "2"  # 2: split by author (posts of one author were spread over the splits)

    def pool(self) -> Pool:
        """The posts of the authors of the five industries."""
        return _blog(str(_folder(self.folder)))[0]

    def authors(self) -> np.ndarray:
        """The corpus's author id of each post of ``pool``."""
        return _blog(str(_folder(self.folder)))[1]


POST = re.compile(r"<post>(.*?)</post>", re.S)


def _age_group(age: int) -> int:
    for group, (low, high) in enumerate(BLOG_AGE_GROUPS):
        if low <= age <= high:
            return group
    raise BenchError(f"blog author age {age} lies in none of the corpus's age groups 13-17, 23-27, 33-48.")


@lru_cache(maxsize=2)
def _blog(folder: str) -> tuple[Pool, np.ndarray]:
    texts, labels, gender, age, authors = [], [], [], [], []
    files = sorted(Path(folder).glob("*.xml"))
    if not files:
        raise BenchError(f"{folder} holds no Blog Authorship Corpus files (id.gender.age.industry.sign.xml).")
    for path in files:
        parts = path.name.split(".")
        if len(parts) != 6 or parts[3] not in BLOG_INDUSTRIES:
            continue
        raw = path.read_bytes()
        try:
            content = raw.decode("utf-8")
        except UnicodeDecodeError:
            content = raw.decode("latin-1")  # about a third of the sample's files are not UTF-8
        posts = [normalise(p) for p in POST.findall(content)]
        for post in [p for p in posts if len(p.split()) >= 3][:BLOG_POSTS_PER_AUTHOR]:
            texts.append(post)
            labels.append(BLOG_INDUSTRIES.index(parts[3]))
            gender.append(int(parts[1] == "male"))
            age.append(_age_group(int(parts[2])))
            authors.append(parts[0])
    pool = (tuple(texts), np.array(labels), {"gender": np.array(gender), "age": np.array(age)},
            {"label": f"industry: {', '.join(BLOG_INDUSTRIES)}",
             "attributes": "gender (1 = male), age group (13-17, 23-27, 33-48)",
             "authors": f"{len(set(authors))} authors"})
    return pool, np.array(authors)


@register_task("agnews")
@dataclass
class AGNews(AttributeTask):
    """AG News topics as the label; the presence of the 5 most frequent person entities as attributes."""

    num_labels = len(AGNEWS_TOPICS)
    attributes: ClassVar[tuple[str, ...]] = tuple(f"person{i}" for i in range(1, PERSONS + 1))
    attribute_measure: ClassVar[str] = "micro_f1"  # He et al. report F1 on AG News's sparse person attributes
    folder: ClassVar[str] = "agnews"
    version: ClassVar[str] = "2"  # 2: the auxiliary and attribute evaluation splits share the pool's leftovers
    # each person is mentioned in 0.2-2% of the articles: at 400 / 200 the auxiliary set held 0-8 mentions of a
    # person and the evaluation set 4 in all, too few to train or score an attack; with the 2,400 leftovers split
    # between them (1,600 and 1,400 articles at the defaults), 61 and 48 mentions in all
    sparse_attributes: ClassVar[bool] = True

    def pool(self) -> Pool:
        """The fixed 4,000-article pool with its person attributes (spaCy, cached)."""
        return _agnews(str(_folder(self.folder)))


def _surname(word: str) -> str:
    """A PERSON entity's last word without possessive or punctuation ("Bush's," -> "Bush")."""
    return re.sub(r"['’]s$", "", word.strip(string.punctuation + "’")).strip(string.punctuation)


@lru_cache(maxsize=2)
def _agnews(folder: str) -> Pool:
    texts, labels = [], []
    for name in ("dev.tsv", "test.tsv"):
        path = Path(folder) / name
        if not path.is_file():
            raise BenchError(f"{path} is missing; agnews needs dev.tsv and test.tsv.")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            text, _, topic = line.rpartition("\t")
            if not text.strip():
                continue
            if topic not in AGNEWS_TOPICS:
                raise BenchError(f"{path}:{number} has topic '{topic}'; expected one of {', '.join(AGNEWS_TOPICS)}.")
            texts.append(normalise(text))
            labels.append(AGNEWS_TOPICS.index(topic))
    keep = np.sort(numpy_generator(0, "agnews-pool").permutation(len(texts))[:AGNEWS_POOL])
    texts, labels = [texts[i] for i in keep], np.array(labels)[keep]
    people = [sorted({_surname(text.split(" ")[end - 1]) for start, end, kind in spans if kind == "PERSON"} - {""})
              for text, spans in zip(texts, spacy_entities(texts))]
    counts = Counter(name for found in people for name in found)
    top = [name for name, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:PERSONS]]
    attributes = {f"person{i}": np.array([int(name in found) for found in people]) for i, name in enumerate(top, 1)}
    return (tuple(texts), labels, attributes,
            {"label": "topic: " + ", ".join(AGNEWS_TOPICS),
             "attributes": "; ".join(f"person{i} = mentions '{name}' ({counts[name]} of {len(texts)} articles)"
                                     for i, name in enumerate(top, 1))})


for _task in (Trustpilot, Blog, AGNews):
    _set_span_kinds(_task)
