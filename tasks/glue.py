"""GLUE: SST-2, CoLA, MRPC, STS-B, QQP, QNLI, RTE and MNLI, each scored with its GLUE metrics.

Offline the splits come from ``$BENCH_DATA_DIR/glue/<TASK>/`` (the layout of shared/data); online
from the hub with ``datasets.load_dataset("nyu-mll/glue", config)``. The evaluation split is GLUE's
dev set (test labels are not public; MNLI's is the matched dev set). Where the offline copy is a
single labelled file (the QQP subset, QNLI's dev set, NLTK's pooled PASCAL RTE1-3 sets), it is split
once into training and evaluation parts (80/20) with a seed that does not depend on the run's, so no
seed's training data overlaps any seed's evaluation data and all seeds share one evaluation pool;
the record's ``eval_split`` note says so. Both splits are then sampled with the run's seed.
Sentence-pair tasks give each example as a ``(first, second)`` pair of strings.
"""

from __future__ import annotations

import csv
import io
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar, Iterator, Protocol

import numpy as np

from bench import BenchError, Examples, Metric, TaskData, TokenTask, register_task
from bench.core.examples import data_dir, flatten_segments, sample_indices
from bench.core.files import read_utf8
from bench.core.hub import offline_unless_reachable, unreachable_note
from bench.core.scores import accuracy, f1, mcc, pearson, spearman
from bench.core.seeding import numpy_generator

HUB_DATASET = "nyu-mll/glue"
EVAL_FRACTION = 0.2  # of a single labelled file, held out for evaluation
PUBLIC_PAIRS = 20000  # training examples past a run's sample kept as its public text (an adversary's priors)
SCORERS = {"accuracy": accuracy, "mcc": mcc, "f1": f1, "pearson": pearson, "spearman": spearman}
METRICS = {
    "accuracy": Metric("accuracy", True, "fraction of evaluation examples classified correctly"),
    "mcc": Metric("mcc", True, "Matthews correlation coefficient (GLUE CoLA)", -1.0, 1.0),
    "f1": Metric("f1", True, "F1 of the positive class"),
    "pearson": Metric("pearson", True, "Pearson correlation", -1.0, 1.0),
    "spearman": Metric("spearman", True, "Spearman correlation", -1.0, 1.0),
}


def glue_metrics(*names: str) -> tuple[Metric, ...]:
    """The declarations of GLUE's metrics for a task, the headline first."""
    return tuple(METRICS[name] for name in names)
NLI_LABELS = {"entailment": 0, "not_entailment": 1}  # GLUE's ids for QNLI and RTE
MNLI_LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}

Column = int | tuple[str, ...]  # a position (file without header) or the header names it may have
Split = tuple[Examples, Examples, str]  # training part, evaluation part, how evaluation was chosen


# -- reading local files ------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """Where a tab-separated file keeps its label and its one or two text columns."""

    label: Column
    texts: tuple[Column, ...]
    header: bool = False
    convert: Callable[[str], int | float] = int  # label string -> label

    def read(self, path: Path, num_labels: int) -> Examples:
        """The file's examples; short rows (blank, truncated, malformed) are skipped, extra columns ignored.

        No CSV quoting: GLUE texts contain quote marks. A leading BOM is dropped. A label outside the task's
        ``num_labels`` classes (or, for regression, a score that is not finite) and a file without examples
        raise ``BenchError`` naming the file (and line).
        """
        text = read_utf8(path, "utf-8-sig")  # a byte that is not UTF-8: one sentence with the file and line
        csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))  # a whole file may be one field
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE))
        if not any(rows):
            raise BenchError(f"{path} holds no example (the file is empty); restore the original download.")
        label, texts, first_line = self.label, self.texts, 1
        if self.header:
            label, texts = _position(path, rows[0], label), tuple(_position(path, rows[0], c) for c in texts)
            rows, first_line = rows[1:], 2
        items, labels = [], []
        for number, row in enumerate(rows, start=first_line):
            if len(row) <= max(label, *texts):
                continue
            try:
                value = self.convert(row[label].strip())
            except (ValueError, KeyError):
                raise BenchError(f"{path}:{number} has label '{row[label]}', which this task cannot read.") from None
            if not _fits(value, num_labels):
                wanted = "a finite score" if num_labels == 1 else f"a class from 0 to {num_labels - 1}"
                raise BenchError(f"{path}:{number} has label '{row[label].strip()}', not {wanted}; correct the "
                                 "line or restore the original download.")
            labels.append(value)
            parts = tuple(row[c] for c in texts)
            items.append(parts[0] if len(parts) == 1 else parts)
        if not items:
            raise BenchError(f"{path} holds no example (no row with a label and its text); restore the original "
                             "download.")
        return Examples(tuple(items), np.array(labels))


def _fits(value: int | float, num_labels: int) -> bool:
    """A regression score is finite; a class id lies in ``0 .. num_labels - 1``."""
    if num_labels == 1:
        return math.isfinite(value)
    return 0 <= value < num_labels


def _position(path: Path, header: list[str], column: Column) -> int:
    """Position of the first of ``column``'s names in a header (names compared lower-cased)."""
    names = [name.strip().lower() for name in header]
    found = [names.index(name) for name in column if name in names]
    if not found:
        raise BenchError(f"{path} has header {header}; expected a column named {' or '.join(column)}.")
    return found[0]


def fixed_split(examples: Examples, task: str) -> tuple[Examples, Examples]:
    """Training and evaluation parts of one labelled file, the same for every run seed."""
    order = numpy_generator(0, "fixed-split", task).permutation(len(examples))
    cut = int(round(EVAL_FRACTION * len(examples)))
    return examples.subset(order[cut:]), examples.subset(order[:cut])


class LocalSource(Protocol):
    """A way a task's data may be laid out in its folder under ``$BENCH_DATA_DIR/glue``."""

    files: tuple[str, ...]

    def read(self, folder: Path, task: str, num_labels: int) -> Split | None:
        """The splits, or None when the files are not there."""


@dataclass(frozen=True)
class DevFiles:
    """A training file and GLUE's dev file, which is the evaluation split."""

    train: str
    dev: str
    table: Table

    @property
    def files(self) -> tuple[str, ...]:
        """The files that must exist."""
        return self.train, self.dev

    def read(self, folder: Path, task: str, num_labels: int) -> Split | None:
        """Both files as they are, or None when one is missing."""
        if not all((folder / name).is_file() for name in self.files):
            return None
        return (self.table.read(folder / self.train, num_labels), self.table.read(folder / self.dev, num_labels),
                "GLUE dev")


@dataclass(frozen=True)
class SplitFile:
    """One labelled file, split once with a fixed seed into training and evaluation parts."""

    file: str
    table: Table
    what: str  # how the evaluation note names the file

    @property
    def files(self) -> tuple[str, ...]:
        """The file that must exist."""
        return (self.file,)

    def read(self, folder: Path, task: str, num_labels: int) -> Split | None:
        """The fixed split of the file, or None when it is missing."""
        if not (folder / self.file).is_file():
            return None
        train, evaluation = fixed_split(self.table.read(folder / self.file, num_labels), task)
        return train, evaluation, f"{self.what} split 80/20 with a fixed seed (not GLUE dev)"


@dataclass(frozen=True)
class RTEZip:
    """NLTK's PASCAL RTE1-3 corpus (dev and test XML in a zip), pooled and split once with a fixed seed."""

    file: str = "rte.zip"

    @property
    def files(self) -> tuple[str, ...]:
        """The file that must exist."""
        return (self.file,)

    def read(self, folder: Path, task: str, num_labels: int) -> Split | None:
        """Every pair of the six XML files, labelled as GLUE labels RTE, then split; None when missing."""
        path = folder / self.file
        if not path.is_file():
            return None
        from nltk.corpus.reader import RTECorpusReader
        from nltk.data import ZipFilePathPointer

        with nltk_may_read(path.parent):
            reader = RTECorpusReader(ZipFilePathPointer(str(path), "rte/"), r"rte\d_(dev|test)\.xml")
            pairs = [p for p in reader.pairs(reader.fileids()) if p.text and p.hyp]
        texts = tuple((" ".join(p.text.split()), " ".join(p.hyp.split())) for p in pairs)
        labels = np.array([0 if p.value == 1 else 1 for p in pairs])  # YES/TRUE is GLUE's 0, "entailment"
        train, evaluation = fixed_split(Examples(texts, labels), task)
        return train, evaluation, "PASCAL RTE1-3 dev+test pooled, split 80/20 with a fixed seed (not GLUE dev)"


@contextmanager
def nltk_may_read(folder: Path) -> Iterator[None]:
    """Let nltk read files under ``folder`` while the block runs (nltk >= 3.9 reads only under its data path)."""
    import nltk

    entry = str(folder.resolve())
    added = entry not in nltk.data.path
    if added:
        nltk.data.path.append(entry)
    try:
        yield
    finally:
        if added:
            nltk.data.path.remove(entry)


# -- the task base ------------------------------------------------------------------------------


class GlueTask(TokenTask):
    """A GLUE task: local files when present (the first layout found), else the hub; seeded samples."""

    protocols = ("representations", "tokens")  # the sentence server trains on hidden representations or tokens
    folder: ClassVar[str]  # under $BENCH_DATA_DIR/glue/
    local: ClassVar[tuple[LocalSource, ...]]  # layouts tried in order
    hub_config: ClassVar[str]
    hub_columns: ClassVar[tuple[str, ...]]  # text columns of the hub dataset
    hub_eval_split: ClassVar[str] = "validation"
    num_labels: ClassVar[int] = 2
    default_n_train: ClassVar[int] = 8000
    default_n_eval: ClassVar[int] = 1000

    def score(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """The task's GLUE metrics by name, the headline first."""
        return {metric.name: SCORERS[metric.name](predictions, labels) for metric in self.metrics}

    def server(self, spec, training):
        """A sentence(-pair) classifier, or a regressor for STS-B: the encoder and an MLP head."""
        from bench.models.servers import SentenceServer

        return SentenceServer(self.num_labels, training, spec.seed)

    def _splits(self) -> tuple[Split, str]:
        """The full training and evaluation splits (local files first, else the hub) and where they came from."""
        folder = data_dir() / "glue" / self.folder
        found = next((split for source in self.local
                      if (split := source.read(folder, self.registry_name, self.num_labels))), None)
        if found is not None:
            return found, f"local:{folder}"
        return self._hub(), f"hub:{HUB_DATASET}/{self.hub_config}"

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """Seeded samples of the training split and of the evaluation split."""
        (train, evaluation, eval_split), source = self._splits()
        rng = numpy_generator(seed, "data", self.registry_name)
        order = rng.permutation(len(train))  # the draw sample_indices makes: the sampled data is as before
        rest = train.subset(order[n_train : n_train + PUBLIC_PAIRS])
        train = train.subset(order[:n_train])
        evaluation = evaluation.subset(sample_indices(len(evaluation), n_eval, rng))
        public = tuple(dict.fromkeys(flatten_segments(list(rest.texts))[0]))
        return TaskData(train, evaluation, source, {"eval_split": eval_split}, public,
                        f"{self.registry_name}: {len(public)} sentences of training examples the run does not sample")

    def membership_pools(self, data: TaskData, seed: int) -> tuple[Examples, Examples] | None:
        """Non-members: as many training-file examples as the evaluation split holds, from the far end of the run's
        permutation of the training file (past its public slice where the file is long enough); public: the run's
        public slice (``TaskData.public``) with its labels, less the non-members. Both come from the training file,
        so members and non-members share one distribution (SST-2's training file holds phrases, its dev set whole
        sentences). Examples whose text a member or an evaluation example also has are left out. None when the
        file has too few examples past the run's sample."""
        (train, _, _), _ = self._splits()
        order = numpy_generator(seed, "data", self.registry_name).permutation(len(train))  # load()'s draw
        n_train, n_held = len(data.train), len(data.eval)
        if len(order) - n_train < 2 * n_held:
            return None
        held = order[len(order) - n_held:]
        public = order[n_train : min(n_train + PUBLIC_PAIRS, len(order) - n_held)]
        private = set(data.train.texts) | set(data.eval.texts)
        nonmembers = train.subset(np.array([i for i in held if train.texts[i] not in private], dtype=int))
        private |= set(nonmembers.texts)
        return nonmembers, train.subset(np.array([i for i in public if train.texts[i] not in private], dtype=int))

    def _hub(self) -> Split:
        """Training and evaluation splits from the Hugging Face hub; BenchError saying both ways when unreachable."""
        layouts = ", or ".join(" and ".join(source.files) for source in self.local)
        how = (
            f"{self.registry_name} data is missing: put {layouts} under {data_dir() / 'glue' / self.folder} "
            f"(set BENCH_DATA_DIR to a folder laid out like shared/data), or run where the Hugging Face hub "
            f"is reachable (datasets.load_dataset('{HUB_DATASET}', '{self.hub_config}'))."
        )

        if offline_unless_reachable() or os.environ.get("HF_DATASETS_OFFLINE") == "1":  # no retries without a hub
            note = unreachable_note()
            raise BenchError(f"{how[:-1]}; {note}." if note else how)
        try:
            import datasets

            splits = datasets.load_dataset(HUB_DATASET, self.hub_config)
        except Exception as exc:  # no network, no such dataset, ...
            raise BenchError(how) from exc
        return self._examples(splits["train"]), self._examples(splits[self.hub_eval_split]), "GLUE dev"

    def _examples(self, split) -> Examples:
        """A hub split's texts (a sentence, or a pair of the two text columns) and labels."""
        columns = [list(split[name]) for name in self.hub_columns]
        texts = tuple(columns[0]) if len(columns) == 1 else tuple(zip(*columns))
        return Examples(texts, np.asarray(split["label"]))


# -- the tasks ----------------------------------------------------------------------------------


@register_task("sst2")
@dataclass
class SST2(GlueTask):
    """Stanford Sentiment Treebank, binary sentiment; accuracy."""

    metrics = glue_metrics("accuracy")
    folder = "SST-2"
    local = (DevFiles("train.tsv", "dev.tsv", Table(("label",), (("sentence", "content"),), header=True)),)
    hub_config, hub_columns = "sst2", ("sentence",)


@register_task("cola")
@dataclass
class CoLA(GlueTask):
    """Corpus of Linguistic Acceptability, in-domain dev as evaluation; Matthews correlation (and accuracy)."""

    metrics = glue_metrics("mcc", "accuracy")
    folder = "CoLA"
    local = (DevFiles("in_domain_train.tsv", "in_domain_dev.tsv", Table(1, (3,))),)
    hub_config, hub_columns = "cola", ("sentence",)


@register_task("mrpc")
@dataclass
class MRPC(GlueTask):
    """Microsoft Research Paraphrase Corpus: is the pair a paraphrase; F1 of "paraphrase" (and accuracy)."""

    metrics = glue_metrics("f1", "accuracy")
    folder = "MRPC"
    local = (DevFiles("train.tsv", "dev.tsv", Table(("quality",), (("#1 string",), ("#2 string",)), header=True)),)
    hub_config, hub_columns = "mrpc", ("sentence1", "sentence2")


@register_task("stsb")
@dataclass
class STSB(GlueTask):
    """Semantic Textual Similarity Benchmark: similarity 0-5, regression; Pearson (and Spearman)."""

    metrics = glue_metrics("pearson", "spearman")
    num_labels = 1
    folder = "STS-B"
    local = (DevFiles("sts-train.csv", "sts-dev.csv", Table(4, (5, 6), convert=float)),)
    hub_config, hub_columns = "stsb", ("sentence1", "sentence2")


@register_task("qqp")
@dataclass
class QQP(GlueTask):
    """Quora Question Pairs: are the questions duplicates; F1 of "duplicate" (and accuracy)."""

    metrics = glue_metrics("f1", "accuracy")
    folder = "QQP"
    local = (
        DevFiles("train.tsv", "dev.tsv", Table(("is_duplicate",), (("question1",), ("question2",)), header=True)),
        SplitFile("qqp_subset.tsv", Table(5, (3, 4)), "QQP subset (qqp_subset.tsv)"),
    )
    hub_config, hub_columns = "qqp", ("question1", "question2")


QNLI_TABLE = Table(("label",), (("question",), ("sentence",)), header=True, convert=NLI_LABELS.__getitem__)


@register_task("qnli")
@dataclass
class QNLI(GlueTask):
    """Question NLI: does the sentence answer the question; accuracy."""

    metrics = glue_metrics("accuracy")
    folder = "QNLI"
    local = (
        DevFiles("train.tsv", "dev.tsv", QNLI_TABLE),
        SplitFile("dev.tsv", QNLI_TABLE, "QNLI dev"),
    )
    hub_config, hub_columns = "qnli", ("question", "sentence")


@register_task("rte")
@dataclass
class RTE(GlueTask):
    """Recognizing Textual Entailment (0 = entailment, 1 = not, as GLUE); accuracy.

    GLUE's RTE pools RTE1-3 and RTE5; the offline stand-in is NLTK's RTE1-3 dev and test sets.
    """

    metrics = glue_metrics("accuracy")
    folder = "RTE"
    local = (
        DevFiles("train.tsv", "dev.tsv",
                 Table(("label",), (("sentence1",), ("sentence2",)), header=True, convert=NLI_LABELS.__getitem__)),
        RTEZip(),
    )
    hub_config, hub_columns = "rte", ("sentence1", "sentence2")


@register_task("mnli")
@dataclass
class MNLI(GlueTask):
    """Multi-Genre NLI, 3 classes (entailment, neutral, contradiction); accuracy on the matched dev set."""

    metrics = glue_metrics("accuracy")
    num_labels = 3
    folder = "MNLI"
    local = (
        DevFiles("train.tsv", "dev_matched.tsv", Table(("gold_label",), (("sentence1",), ("sentence2",)),
                                                       header=True, convert=MNLI_LABELS.__getitem__)),
    )
    hub_config, hub_columns, hub_eval_split = "mnli", ("premise", "hypothesis"), "validation_matched"
