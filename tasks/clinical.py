"""Clinical-note pretraining (Lehman et al. 2021; Li et al. §6, Table 7): a hospital's MLM and what it leaks.

The client is a hospital: its examples are the sentences of its patients' notes (``bench.data.clinical``), each
labelled by its patient. The engine's ``pretraining`` path (``bench.engine.paths.pretraining``) lets the defense
rewrite the notes (NDD substitution of the names: ``--defense ndd --defense-args mode=substitutive,kinds=NAME``;
``none`` releases them as they are), further pretrains the masked LM on the result and releases its weights
(release kind ``model``). Utility is BioNER on NCBI-disease (``tasks/ncbi_disease.py``) with a token tagger on
the released encoder; attacks on the weights (``name-generation``, ``condition-probe``) are scored against the
patients' names and conditions, which only the engine holds.

Tasks (corpus x name insertion, ``bench.data.clinical``):

- ``clinical-deid`` / ``clinical-spl``: the offline synthetic corpus (seeded), names reinserted where the notes
  refer to the patient / and "First Last" prepended to every sentence (Lehman et al.'s name insertion, Li et
  al.'s SPL);
- ``mimic-deid`` / ``mimic-spl``: MIMIC-III read in place from ``$BENCH_MIMIC_DIR`` (NOTEEVENTS.csv,
  PATIENTS.csv, DIAGNOSES_ICD.csv), surrogate names as Lehman et al.

Sizes: ``n_train`` sentences of pretraining notes (whole notes: about 10 sentences a synthetic patient), and
``n_eval`` sentences of held-out patients. Sensitive spans: every rendered name, kind ``NAME``. A substitutive
defense draws replacement names from public name lists (``substitution_pool``), never from the other patients:
substituting one patient's name by another's would keep every real name in the corpus.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from bench import BenchError, Examples, Metric, PretrainingTask, SpanTask, TaskData, register_task
from bench.core.registry import TASKS
from bench.core.seeding import numpy_generator
from bench.core.spans import Edit, Span
from bench.data import clinical
from bench.data.clinical import NAME, ClinicalCorpus, name_lists

SENTENCES_PER_PATIENT = 10  # about the length of a synthetic note: n_train sentences ~ n_train / 10 patients
UTILITY_TASK = "ncbi-disease"
SUBSTITUTES = 2000  # public full names a substitutive defense draws from (SpanTask.substitution_pool)


def _examples(corpus: ClinicalCorpus, insertion: str, patients: range) -> Examples:
    indices = [i for i, s in enumerate(corpus.sentences) if s.patient in patients]
    texts, labels = corpus.render(insertion, indices)
    array = np.empty(len(labels), dtype=object)
    array[:] = labels
    return Examples(tuple(texts), array)


@dataclass
class ClinicalNotes(PretrainingTask, SpanTask):
    """Pretraining on clinical notes; BioNER utility of the released MLM (base of the four registered tasks)."""

    metrics = (
        Metric("f1", True, "BioNER entity F1 (seqeval) on NCBI-disease of a tagger on the released MLM's encoder"),
        Metric("precision", True, "BioNER entity precision"),
        Metric("recall", True, "BioNER entity recall"),
    )
    protocols = ("pretraining",)  # the hospital pretrains on its (rewritten) notes and releases the weights
    num_labels = 3  # the tagger's tags (O, B-Disease, I-Disease), as ncbi-disease
    span_kinds: ClassVar[tuple[str, ...]] = (NAME,)
    utility_task: ClassVar[str] = UTILITY_TASK  # the task the released encoder is scored on
    training_defaults: ClassVar[dict] = {"epochs": 30, "batch_size": 256}  # the BioNER tagger's, as ncbi-disease
    default_n_train: ClassVar[int] = 2000  # note sentences (about 200 synthetic patients)
    default_n_eval: ClassVar[int] = 200
    insertion: ClassVar[str] = "deid"  # deid or spl (bench.data.clinical)
    source: ClassVar[str] = "synthetic"  # synthetic or mimic
    corpus: Any = field(default=None, init=False, repr=False, compare=False)  # the loaded corpus (engine-only)
    train_patients: int = field(default=0, init=False, repr=False, compare=False)

    def _corpus(self, patients: int, seed: int) -> ClinicalCorpus:
        if self.source == "synthetic":
            return clinical.synthetic_corpus(seed, patients)
        folder = os.environ.get("BENCH_MIMIC_DIR", "")
        if not folder:
            raise BenchError(f"task '{self.registry_name}' reads MIMIC-III from $BENCH_MIMIC_DIR, which is not set; "
                             "set it to the folder holding NOTEEVENTS.csv, PATIENTS.csv and DIAGNOSES_ICD.csv.")
        return clinical.mimic_corpus(folder, patients, seed)

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """The notes of ``n_train / 10`` patients (pretraining) and of ``n_eval / 10`` others (held out)."""
        train_patients = max(1, math.ceil(n_train / SENTENCES_PER_PATIENT))
        eval_patients = max(1, math.ceil(n_eval / SENTENCES_PER_PATIENT))
        corpus = self._corpus(train_patients + eval_patients, seed)
        train_patients = min(train_patients, len(corpus.patients) - 1)
        if train_patients < 1:
            raise BenchError(f"task '{self.registry_name}' found {len(corpus.patients)} patient(s); it needs at "
                             "least 2 (one to pretrain on, one held out).")
        self.corpus, self.train_patients = corpus, train_patients
        train = _examples(corpus, self.insertion, range(train_patients))
        evaluation = _examples(corpus, self.insertion, range(train_patients, len(corpus.patients)))
        notes = {"corpus": corpus.source, "name_insertion": self.insertion, "patients": train_patients,
                 "held_out_patients": len(corpus.patients) - train_patients}
        return TaskData(train, evaluation, corpus.source, notes)

    def patients(self) -> list:
        """The patients whose notes the MLM is pretrained on (``bench.data.clinical.Patient``): the truth."""
        return list(self.corpus.patients[: self.train_patients])

    def public_knowledge(self) -> tuple[list[str], list[str], list[str], np.ndarray]:
        """What an adversary of the released weights knows (``bench.core.releases.ModelRelease``): the public
        first and last name lists, and the condition vocabulary with its frequencies among the held-out patients
        (neither pretrained on nor probed: a prevalence published elsewhere)."""
        female, male, last = name_lists()
        conditions, counts = self.corpus.condition_vocabulary(range(self.train_patients, len(self.corpus.patients)))
        return sorted(set(female) | set(male)), last, conditions, counts

    def substitution_pool(self) -> dict[str, list]:
        """Public full names for substitutive rewriting: ``SUBSTITUTES`` first-last pairs drawn (fixed seed) from
        the public name lists, so a substituted name is a stranger's, never another patient's."""
        female, male, last = name_lists()
        first = sorted(set(female) | set(male))
        rng = numpy_generator(0, "clinical-substitutes")
        pairs = dict.fromkeys(zip(rng.choice(first, SUBSTITUTES).tolist(), rng.choice(last, SUBSTITUTES).tolist()))
        return {NAME: [((f, la), None) for f, la in pairs]}

    def server(self, spec, training):
        """The BioNER token tagger (of ``ncbi-disease``), run on the released encoder."""
        from bench.models.servers import TaggingServer

        return TaggingServer(self.num_labels, training, spec.seed)

    def score(self, predictions, labels) -> dict[str, float]:
        """Entity F1, precision and recall (the utility task's scorer)."""
        return TASKS.get(self.utility_task)().score(predictions, labels)

    def sensitive_spans(self, data: TaskData, split: str, index: int) -> list[Span]:
        """Every rendered name of the sentence (kind ``NAME``)."""
        if split not in ("train", "eval"):
            raise BenchError(f"split must be train or eval, got '{split}'.")
        label = getattr(data, split).labels[index]
        return [Span(int(label[j]), int(label[j + 1]), NAME) for j in range(1, len(label), 2)]

    def rewrite_label(self, label, text, edits: list[Edit]) -> list[int]:
        """The same patient; every name span where it lies after the edits (rewritten or not)."""
        spans = [(int(label[j]), int(label[j + 1])) for j in range(1, len(label), 2)]
        ordered = sorted(edits, key=lambda e: e.span.start)
        out = [int(label[0])]
        for start, end in spans:
            shift = sum(len(e.words) - (e.span.end - e.span.start) for e in ordered if e.span.end <= start)
            same = [e for e in ordered if (e.span.start, e.span.end) == (start, end)]
            length = len(same[0].words) if same else end - start
            out += [start + shift, start + shift + length]
        return out


@register_task("clinical-deid")
@dataclass
class SyntheticDeid(ClinicalNotes):
    """Synthetic notes, names reinserted where the notes refer to the patient (Table 7's Deidentified)."""


@register_task("clinical-spl")
@dataclass
class SyntheticSPL(ClinicalNotes):
    """Synthetic notes, and the patient's name prepended to every sentence (Table 7's SPL-Deidentified)."""

    insertion: ClassVar[str] = "spl"


@register_task("mimic-deid")
@dataclass
class MimicDeid(ClinicalNotes):
    """MIMIC-III notes from $BENCH_MIMIC_DIR, surrogate names reinserted at their name placeholders."""

    source: ClassVar[str] = "mimic"


@register_task("mimic-spl")
@dataclass
class MimicSPL(ClinicalNotes):
    """MIMIC-III notes from $BENCH_MIMIC_DIR, and the surrogate name prepended to every sentence."""

    source: ClassVar[str] = "mimic"
    insertion: ClassVar[str] = "spl"
