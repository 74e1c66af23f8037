"""Task data: examples, splits, the local data directory and the hash of what a run used."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from bench.core.errors import BenchError


def data_dir() -> Path:
    """The offline data directory: ``$BENCH_DATA_DIR`` when set and not empty, else ``~/.cache/bench/data``."""
    return Path(os.environ.get("BENCH_DATA_DIR") or Path.home() / ".cache" / "bench" / "data").expanduser()


Text = str | tuple[str, str]  # one sentence, or a sentence pair (GLUE's MRPC, STS-B, QQP, QNLI, RTE, MNLI)


def flatten_segments(items: Sequence) -> tuple[list, Callable[[list], list]]:
    """Pairs split into their segments (first, second, first, ...), and the function that regroups
    per-segment results into pairs.

    Single items pass through unchanged, so mechanisms written for one sentence serve pairs too.
    """
    if not items or not isinstance(items[0], tuple):
        return list(items), lambda results: list(results)
    flat = [segment for item in items for segment in item]
    return flat, lambda results: [tuple(results[i : i + 2]) for i in range(0, len(results), 2)]


def as_text(item: Text) -> str:
    """A pair's two sentences joined by a space; a single sentence as it is (for word-level metrics)."""
    return " ".join(item) if isinstance(item, tuple) else item


@dataclass(frozen=True)
class Examples:
    """Texts (single sentences or sentence pairs) with their labels (class ids, or floats for regression)."""

    texts: tuple[Text, ...]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, indices: np.ndarray) -> "Examples":
        """The examples at ``indices``, in that order."""
        return Examples(tuple(self.texts[i] for i in indices), self.labels[indices])


@dataclass(frozen=True)
class TaskData:
    """The train and evaluation examples of one run, with where they came from."""

    train: Examples
    eval: Examples
    source: str
    notes: dict[str, Any] = field(default_factory=dict)
    # public sentences from the same source as the splits and disjoint from them (e.g. the rest of a training file),
    # for an adversary's priors and candidate sets; empty: the engine takes offline public text instead
    public: tuple[str, ...] = ()
    public_source: str = ""

    def data_hash(self) -> str:
        """SHA-256 over the exact examples (texts and labels, both splits, in order).

        A pair is hashed as a two-element JSON list, so single-sentence hashes are as before pairs existed.
        """
        digest = hashlib.sha256()
        for split in (self.train, self.eval):
            payload = {"texts": list(split.texts), "labels": split.labels.tolist()}
            digest.update(json.dumps(payload, ensure_ascii=False).encode("utf-8"))
        return digest.hexdigest()

    def private_splits(self) -> list[Examples]:
        """Every split of the run that holds private text (all but ``public``)."""
        return [value for value in (getattr(self, f.name) for f in dataclasses.fields(self))
                if isinstance(value, Examples)]

    def index_corpus(self) -> tuple[list[Text], np.ndarray]:
        """Distinct texts (sentences or pairs) of the training and evaluation splits, first occurrence kept, and
        their labels: what an adversary's re-identification index holds (``PublicKnowledge.index``)."""
        seen: dict[Text, int] = {}
        labels = []
        for split in (self.train, self.eval):
            for text, label in zip(split.texts, split.labels):
                if text not in seen:
                    seen[text] = len(seen)
                    labels.append(label)
        return list(seen), _label_array(labels)


def sample_indices(n_available: int, n_wanted: int, rng: np.random.Generator) -> np.ndarray:
    """A seeded sample of ``min(n_wanted, n_available)`` distinct indices, in random order."""
    n = min(n_wanted, n_available)
    return rng.permutation(n_available)[:n]


def _label_array(labels: list) -> np.ndarray:
    """Labels as an array: numbers as they are, per-token label sequences (tagging) as an object array."""
    if labels and np.ndim(labels[0]) > 0:
        array = np.empty(len(labels), dtype=object)
        array[:] = labels
        return array
    return np.asarray(labels)


@dataclass(frozen=True)
class AttributeData(TaskData):
    """The splits of a prediction-API task (attribute inference, He et al. 2022): the victim's training data
    (``train``) and its utility evaluation data (``eval``), the adversary's query pool (``queries``: as many texts
    as ``train``, disjoint from it), its attribute-labelled auxiliary data (``auxiliary``) and the held-out data
    whose attributes are attacked (``attribute_eval``); ``attributes[split][name]`` holds each example's private
    attribute values (integers)."""

    queries: Examples | None = None
    auxiliary: Examples | None = None
    attribute_eval: Examples | None = None
    attributes: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    def data_hash(self) -> str:
        """SHA-256 over every split's examples and attributes, in order."""
        digest = hashlib.sha256(super().data_hash().encode("ascii"))
        for name in ("queries", "auxiliary", "attribute_eval"):
            split = getattr(self, name)
            payload = {"texts": list(split.texts), "labels": split.labels.tolist(),
                       "attributes": {k: v.tolist() for k, v in sorted(self.attributes.get(name, {}).items())}}
            digest.update(json.dumps(payload, ensure_ascii=False).encode("utf-8"))
        return digest.hexdigest()


def check_task_data(task, data: TaskData) -> TaskData:
    """``data`` checked against ``task``'s declared schema, after every load: each split holds an example, a
    class label is a whole number in ``0 .. num_labels - 1`` (each tag of a tagged sentence too), a regression
    label (``num_labels == 1``) is a finite number; other labels (trees, answer records) are the task's own, as
    are a pretraining task's (its ``num_labels`` are its utility tagger's). Raises ``BenchError`` naming the task,
    its source, the split and the example."""
    name, classes = task.registry_name, int(task.num_labels)
    server_labels = "pretraining" not in getattr(task, "protocols", ())
    splits = {"training": data.train, "evaluation": data.eval}
    if isinstance(data, AttributeData):
        splits.update(query=data.queries, auxiliary=data.auxiliary, attribute=data.attribute_eval)
    for split, examples in splits.items():
        if examples is None:
            continue
        if len(examples) == 0:
            raise BenchError(f"task '{name}' loaded no example for its {split} split from {data.source}; check that "
                             "its data files hold rows (not only a header) or restore the original download.")
        for index, label in enumerate(examples.labels if server_labels else ()):
            bad = _bad_label(label, classes)
            if bad is not None:
                wanted = "a finite number" if classes == 1 else f"a class from 0 to {classes - 1}"
                raise BenchError(f"task '{name}' loaded from {data.source}: {split} example {index} has label "
                                 f"{bad}, not {wanted}; fix the data file or restore the original download.")
    return data


def _bad_label(label: Any, classes: int) -> Any:
    """The offending value of one label (a number, or a sequence of tag numbers), or None when it fits."""
    if isinstance(label, (list, tuple, np.ndarray)) and np.ndim(label) == 1 and classes > 1:
        return next((value for value in label if _bad_label(value, classes) is not None), None)
    if isinstance(label, (bool, np.bool_)) or not isinstance(label, (int, float, np.integer, np.floating)):
        return None  # not a number: the task's own kind of label
    value = float(label)
    if classes == 1:
        return None if np.isfinite(value) else label
    return None if np.isfinite(value) and value == int(value) and 0 <= value < classes else label
