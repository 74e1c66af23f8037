"""GLUE single-sentence classification: SST-2 (accuracy) and CoLA (Matthews correlation).

Offline the splits come from ``$BENCH_DATA_DIR/glue/<TASK>/`` (the layout of shared/data: GLUE TSV
files); online from the hub with ``datasets.load_dataset("nyu-mll/glue", config)``. The evaluation
split is GLUE's dev set (test labels are not public); both splits are sampled with the run's seed.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from bench import BenchError, Examples, Task, TaskData, register_task
from bench.data import data_dir, sample_indices
from bench.metrics import accuracy, mcc
from bench.seeding import numpy_generator

HUB_DATASET = "nyu-mll/glue"


TEXT_HEADERS = ("sentence", "content")


def read_tsv(path: Path, label_col: int, text_col: int, header: bool) -> Examples:
    """Labels and sentences from a GLUE TSV file (no quoting: sentences contain quote marks).

    With a header, columns are found by name (``label``; ``sentence`` or ``content``), so both the
    shared/data layout and GLUE's own column order read; without one, the given positions are used.
    """
    with open(path, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    body, first_line = rows, 1
    if header and rows:
        names = [name.strip().lower() for name in rows[0]]
        text_names = [n for n in TEXT_HEADERS if n in names]
        if "label" not in names or not text_names:
            raise BenchError(f"{path} has header {rows[0]}; expected a label and a sentence column.")
        label_col, text_col = names.index("label"), names.index(text_names[0])
        body, first_line = rows[1:], 2
    texts, labels = [], []
    for number, row in enumerate(body, start=first_line):
        if len(row) <= max(label_col, text_col):
            continue  # blank or truncated line
        try:
            labels.append(int(row[label_col]))
        except ValueError:
            raise BenchError(f"{path}:{number} has label '{row[label_col]}', not an integer class.") from None
        texts.append(row[text_col])
    return Examples(tuple(texts), np.array(labels))


class GlueSingleSentence(Task):
    """A GLUE task with one sentence per example, read locally or from the hub."""

    hub_config: ClassVar[str]
    folder: ClassVar[str]  # under $BENCH_DATA_DIR/glue/
    train_file: ClassVar[str]
    eval_file: ClassVar[str]
    label_col: ClassVar[int]
    text_col: ClassVar[int]
    header: ClassVar[bool]
    num_labels: ClassVar[int] = 2
    default_n_train: ClassVar[int] = 8000
    default_n_eval: ClassVar[int] = 1000

    def _local(self) -> tuple[Examples, Examples, str] | None:
        folder = data_dir() / "glue" / self.folder
        train, dev = folder / self.train_file, folder / self.eval_file
        if not (train.is_file() and dev.is_file()):
            return None
        read = lambda p: read_tsv(p, self.label_col, self.text_col, self.header)  # noqa: E731
        return read(train), read(dev), f"local:{folder}"

    def _hub(self) -> tuple[Examples, Examples, str]:
        where = data_dir() / "glue" / self.folder
        how = (
            f"{self.registry_name} data is missing: put {self.train_file} and {self.eval_file} under "
            f"{where} (set BENCH_DATA_DIR to a folder laid out like shared/data), or run where the "
            f"Hugging Face hub is reachable (datasets.load_dataset('{HUB_DATASET}', '{self.hub_config}'))."
        )
        if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
            raise BenchError(how)
        try:
            import datasets

            splits = datasets.load_dataset(HUB_DATASET, self.hub_config)
        except Exception as exc:  # no network, no such dataset, ...
            raise BenchError(how) from exc
        convert = lambda s: Examples(tuple(s["sentence"]), np.asarray(s["label"]))  # noqa: E731
        return convert(splits["train"]), convert(splits["validation"]), f"hub:{HUB_DATASET}/{self.hub_config}"

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """Seeded samples of the train split and of the dev split."""
        train, dev, source = self._local() or self._hub()
        rng = numpy_generator(seed, "data", self.registry_name)
        train = train.subset(sample_indices(len(train), n_train, rng))
        dev = dev.subset(sample_indices(len(dev), n_eval, rng))
        return TaskData(train, dev, source, {"eval_split": "GLUE dev"})


@register_task("sst2")
@dataclass
class SST2(GlueSingleSentence):
    """Stanford Sentiment Treebank, binary sentiment; metric accuracy."""

    metric: ClassVar[str] = "accuracy"
    hub_config: ClassVar[str] = "sst2"
    folder: ClassVar[str] = "SST-2"
    train_file: ClassVar[str] = "train.tsv"
    eval_file: ClassVar[str] = "dev.tsv"
    label_col: ClassVar[int] = 0
    text_col: ClassVar[int] = 1
    header: ClassVar[bool] = True

    def score(self, predictions, labels):
        """GLUE SST-2 metric: accuracy."""
        return {"accuracy": accuracy(predictions, labels)}


@register_task("cola")
@dataclass
class CoLA(GlueSingleSentence):
    """Corpus of Linguistic Acceptability, in-domain dev as evaluation; metric MCC."""

    metric: ClassVar[str] = "mcc"
    hub_config: ClassVar[str] = "cola"
    folder: ClassVar[str] = "CoLA"
    train_file: ClassVar[str] = "in_domain_train.tsv"
    eval_file: ClassVar[str] = "in_domain_dev.tsv"
    label_col: ClassVar[int] = 1
    text_col: ClassVar[int] = 3
    header: ClassVar[bool] = False

    def score(self, predictions, labels):
        """GLUE CoLA metric: Matthews correlation (accuracy reported beside it)."""
        return {"mcc": mcc(predictions, labels), "accuracy": accuracy(predictions, labels)}
