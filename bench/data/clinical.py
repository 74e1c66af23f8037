"""Clinical notes with patient names and conditions: MIMIC-III by path, or a deterministic synthetic stand-in.

The setting of Lehman et al. (NAACL 2021), as Li et al. §6 use it: a hospital pretrains a masked LM on its notes.
Each patient has a name and a set of conditions; each note sentence belongs to one patient. Names reach the text
in two ways (``render``):

- ``deid``: the de-identified notes with each name placeholder filled by that patient's (surrogate) name, as
  Lehman et al. reinsert names before pretraining; names so occur only where a note refers to the patient;
- ``spl``: the same, and the patient's "First Last" prepended to every sentence (their "name insertion").

Every rendered name is a sensitive span of kind ``NAME`` (word positions of "First Last", or of the single name
a placeholder asks for), which span defenses (NDD substitution) rewrite.

Two sources:

- ``synthetic_corpus(seed, n_patients)``: names from the PyPI ``faker`` package's en_US first (by sex) and last
  name lists, conditions from ICD-10-CM categories (their descriptions from PyPI ``simple-icd-10-cm``; a patient
  has 1-3, drawn with a Zipf-like frequency so a frequency baseline is informative), and notes written around
  them: a few templated sentences that name the patient and state the conditions, between sentences of the
  clinical register drawn from the public medical transcription samples of ``$BENCH_DATA_DIR/clinical``
  (mtsamples, no patient data). Everything follows from the seed.
- ``mimic_corpus(folder, n_patients)``: MIMIC-III's ``NOTEEVENTS.csv``, ``PATIENTS.csv`` and ``DIAGNOSES_ICD.csv``
  read in place from a folder the user names (credentialed data: never copied; nothing derived from a note is
  written anywhere but the user's cache directory, and no record or log quotes a note). MIMIC has no names:
  each patient gets a surrogate name drawn from the same public lists, seeded by the subject id; the conditions
  are the patient's ICD-9 diagnoses (their short titles from ``D_ICD_DIAGNOSES.csv`` when the folder has it,
  else the codes). Placeholders ``[** ... **]`` that name a person become the patient's name; any other
  placeholder becomes the word ``phi``.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.core.errors import BenchError
from bench.core.examples import data_dir
from bench.core.seeding import numpy_generator

NAME = "NAME"  # the span kind of a rendered name
INSERTIONS = ("deid", "spl")
MIMIC_FILES = ("NOTEEVENTS.csv", "PATIENTS.csv", "DIAGNOSES_ICD.csv")
# ICD-10-CM categories of the synthetic patients, most frequent first (their descriptions from simple-icd-10-cm)
ICD10_CATEGORIES = ("I10", "E11", "E78", "J45", "K21", "F32", "I48", "N18", "I50", "E66", "E03", "D50", "G43",
                    "J18", "I25", "M17", "G40", "I21", "J20", "K80", "N17", "I26", "K85", "I63", "C34", "C50",
                    "C61", "C18", "G20", "G30", "F20", "L40", "E10", "H40", "H25", "K35", "K70", "S72", "B20",
                    "J02")
# templated sentences: {name} = the patient's name (a placeholder in the de-identified note), {cond} = a condition
NAMED_TEMPLATES = ("{title} {name} is a {age} year old {sex} with a history of {cond} .",
                   "{name} was admitted for management of {cond} .",
                   "{name} was diagnosed with {cond} .",
                   "{title} {name} returns for follow up of {cond} .")
PLAIN_TEMPLATES = ("the patient has a history of {cond} .", "assessment : {cond} .",
                   "past medical history is significant for {cond} .", "impression : {cond} .")
REGISTER_SENTENCES = 7  # sentences of the clinical register in each synthetic note
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|\d+(?:\.\d+)?|[^\sA-Za-z\d]")


@dataclass(frozen=True)
class Patient:
    """A patient: surrogate name and the conditions (descriptions, lower case, words split by spaces)."""

    first: str
    last: str
    sex: str  # "F" or "M"
    conditions: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


@dataclass(frozen=True)
class NoteSentence:
    """One sentence of a patient's note; ``{first}``, ``{last}`` and ``{name}`` mark where the note names them."""

    patient: int
    template: str


@dataclass(frozen=True)
class ClinicalCorpus:
    """Patients and their note sentences, with where they came from (``source``, no path of credentialed data)."""

    patients: tuple[Patient, ...]
    sentences: tuple[NoteSentence, ...]
    source: str

    def render(self, insertion: str, indices=None) -> tuple[list[str], list[list[int]]]:
        """Texts (words joined by single spaces) and labels ``[patient, start, end, start, end, ...]`` (the word
        ranges of each rendered name) of the sentences ``indices`` (default all) under ``insertion``."""
        if insertion not in INSERTIONS:
            raise BenchError(f"name insertion must be one of {', '.join(INSERTIONS)}, got '{insertion}'.")
        chosen = range(len(self.sentences)) if indices is None else indices
        texts, labels = [], []
        for i in chosen:
            sentence = self.sentences[int(i)]
            patient = self.patients[sentence.patient]
            words, spans = [], []
            if insertion == "spl":
                spans.append((0, 2))
                words += [patient.first, patient.last]
            for word in sentence.template.split(" "):
                filled = {"{name}": [patient.first, patient.last], "{first}": [patient.first],
                          "{last}": [patient.last]}.get(word)
                if filled is None:
                    words.append(word)
                else:
                    spans.append((len(words), len(words) + len(filled)))
                    words += filled
            texts.append(" ".join(words))
            labels.append([sentence.patient] + [x for span in spans for x in span])
        return texts, labels

    def condition_vocabulary(self, counted=None) -> tuple[list[str], np.ndarray]:
        """Every condition of the corpus and how many of the patients ``counted`` (indices; default all) have each,
        most frequent among them first."""
        counts = {c: 0 for patient in self.patients for c in patient.conditions}
        for index in range(len(self.patients)) if counted is None else counted:
            for condition in self.patients[int(index)].conditions:
                counts[condition] += 1
        ordered = sorted(counts, key=lambda c: (-counts[c], c))
        return ordered, np.array([counts[c] for c in ordered])


def words_of(text: str) -> list[str]:
    """Lower-case words and punctuation marks of ``text``, each a separate word."""
    return _WORD.findall(text.lower())


def condition_text(description: str) -> str:
    """A condition description as words: lower case, parenthesised and bracketed parts and a trailing
    qualifier after a comma dropped ("Essential (primary) hypertension" -> "essential hypertension")."""
    text = re.sub(r"\([^)]*\)|\[[^\]]*\]", " ", description).split(",")[0]
    text = re.sub(r"^other ", "", text.strip().lower())
    return " ".join(words_of(text))


def name_lists() -> tuple[list[str], list[str], list[str]]:
    """Public name lists: female first names, male first names, last names (faker's en_US provider, sorted)."""
    from faker.providers.person.en_US import Provider

    def distinct(names) -> list[str]:
        return sorted({n for n in names if n.isalpha()})

    return distinct(Provider.first_names_female), distinct(Provider.first_names_male), distinct(Provider.last_names)


@functools.lru_cache(maxsize=2)
def register_sentences(limit: int = 4000) -> list[str]:
    """Sentences of the clinical register (mtsamples transcriptions), tokenised to lower-case words, 6 to 30
    words (at least 4 of more than two letters), without digits, distinct, in file order."""
    path = data_dir() / "clinical" / "mtsamples_partial.csv"
    if not path.is_file():
        raise BenchError(f"the clinical register is missing: put mtsamples_partial.csv under {path.parent} (set "
                         "BENCH_DATA_DIR to a folder laid out like shared/data).")
    csv.field_size_limit(1 << 24)
    seen: dict[str, None] = {}
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        for row in csv.DictReader(handle):
            text = re.sub(r"[A-Z][A-Z /&]+:,?", " ", row.get("transcription") or "")  # section headings
            for sentence in re.split(r"(?<=[.!?])\s+|,\s*(?=[A-Z][a-z])", text.replace(",", ", ")):
                words = words_of(sentence)
                if 6 <= len(words) <= 30 and not any(w.isdigit() for w in words) and words[-1] in ".?!" \
                        and sum(len(w) > 2 for w in words) >= 4:
                    seen.setdefault(" ".join(words), None)
                    if len(seen) >= limit:
                        return list(seen)
    return list(seen)


def _name(rng: np.random.Generator, sex: str, lists) -> tuple[str, str]:
    female, male, last = lists
    firsts = female if sex == "F" else male
    return str(firsts[rng.integers(len(firsts))]), str(last[rng.integers(len(last))])


def synthetic_corpus(seed: int, n_patients: int) -> ClinicalCorpus:
    """``n_patients`` synthetic patients (distinct full names) with one note each (see the module docstring)."""
    import simple_icd_10_cm as icd


    if n_patients < 1:
        raise BenchError(f"the synthetic clinical corpus needs at least 1 patient, got {n_patients}.")
    rng = numpy_generator(seed, "clinical-synthetic")
    lists = name_lists()
    conditions = [condition_text(icd.get_description(code)) for code in ICD10_CATEGORIES]
    weights = 1.0 / np.arange(1, len(conditions) + 1)
    weights /= weights.sum()
    register = register_sentences()
    patients, sentences, names = [], [], set()
    for index in range(n_patients):
        sex = "F" if rng.random() < 0.5 else "M"
        first, last = _name(rng, sex, lists)
        while (first, last) in names:
            first, last = _name(rng, sex, lists)
        names.add((first, last))
        count = int(rng.integers(1, 4))
        own = tuple(conditions[i] for i in sorted(rng.choice(len(conditions), size=count, replace=False, p=weights)))
        patients.append(Patient(first, last, sex, own))
        title, noun = ("ms", "woman") if sex == "F" else ("mr", "man")
        note = [NAMED_TEMPLATES[0].format(title=title, name="{name}", age=int(rng.integers(25, 90)), sex=noun,
                                          cond=own[0])]
        for condition in own:
            template = NAMED_TEMPLATES[1 + int(rng.integers(len(NAMED_TEMPLATES) - 1))] if rng.random() < 0.5 \
                else PLAIN_TEMPLATES[int(rng.integers(len(PLAIN_TEMPLATES)))]
            note.append(template.format(title=title, name="{name}", cond=condition))
        note += [register[int(i)] for i in rng.choice(len(register), size=REGISTER_SENTENCES, replace=False)]
        order = [0, *(1 + rng.permutation(len(note) - 1))]  # the introduction first, then shuffled
        sentences += [NoteSentence(index, note[int(i)]) for i in order]
    return ClinicalCorpus(tuple(patients), tuple(sentences), f"synthetic:seed={seed},patients={n_patients}")


# -- MIMIC-III -----------------------------------------------------------------------------------------------


def check_mimic(folder: str | Path) -> Path:
    """The MIMIC-III folder, or a BenchError naming the files it lacks."""
    path = Path(folder).expanduser()
    missing = [name for name in MIMIC_FILES if not (path / name).is_file()]
    if missing:
        raise BenchError(f"the MIMIC-III folder '{path}' lacks {', '.join(missing)}; name a folder that holds "
                         f"{', '.join(MIMIC_FILES)} (MIMIC-III v1.4, credentialed access from PhysioNet).")
    return path


_PLACEHOLDER = re.compile(r"\[\*\*(.*?)\*\*\]")


def _note_template(text: str) -> str:
    """A note with each placeholder replaced: ``{first}``, ``{last}`` or ``{name}`` for a person's name (as
    MIMIC's "First Name", "Last Name", "Known lastname", "Name" markers say), ``phi`` for any other."""
    def replace(match: re.Match) -> str:
        inside = match.group(1).lower()
        if "first name" in inside or "firstname" in inside:
            return " FIRSTMARK "
        if "last name" in inside or "lastname" in inside:
            return " LASTMARK "
        if "name" in inside:
            return " NAMEMARK "
        return " phi "

    words = words_of(_PLACEHOLDER.sub(replace, text))
    return " ".join({"firstmark": "{first}", "lastmark": "{last}", "namemark": "{name}"}.get(w, w) for w in words)


def mimic_corpus(folder: str | Path, n_patients: int, seed: int = 0, max_sentences: int = 40) -> ClinicalCorpus:
    """The first ``n_patients`` patients (in NOTEEVENTS order) with notes and diagnoses, each with up to
    ``max_sentences`` sentences of their notes (see the module docstring)."""
    import pandas as pd


    path = check_mimic(folder)
    diagnoses = pd.read_csv(path / "DIAGNOSES_ICD.csv", usecols=lambda c: c.upper() in ("SUBJECT_ID", "ICD9_CODE"),
                            dtype=str).rename(columns=str.upper).dropna()
    titles: dict[str, str] = {}
    if (path / "D_ICD_DIAGNOSES.csv").is_file():
        table = pd.read_csv(path / "D_ICD_DIAGNOSES.csv", dtype=str).rename(columns=str.upper)
        titles = dict(zip(table["ICD9_CODE"], table["SHORT_TITLE"]))
    by_subject = diagnoses.groupby("SUBJECT_ID")["ICD9_CODE"].apply(list).to_dict()
    patients_table = pd.read_csv(path / "PATIENTS.csv", dtype=str).rename(columns=str.upper)
    sex_of = dict(zip(patients_table["SUBJECT_ID"], patients_table.get("GENDER", pd.Series(dtype=str))))
    lists = name_lists()
    patients: list[Patient] = []
    sentences: list[NoteSentence] = []
    order: dict[str, int] = {}
    per_patient: dict[int, int] = {}
    for chunk in pd.read_csv(path / "NOTEEVENTS.csv", dtype=str, chunksize=2000,
                             usecols=lambda c: c.upper() in ("SUBJECT_ID", "TEXT")):
        chunk = chunk.rename(columns=str.upper)
        for subject, text in zip(chunk["SUBJECT_ID"], chunk["TEXT"]):
            if subject not in by_subject or not isinstance(text, str):
                continue
            if subject not in order:
                if len(order) >= n_patients:
                    continue
                sex = "F" if str(sex_of.get(subject, "")).upper().startswith("F") else "M"
                first, last = _name(numpy_generator(seed, "mimic-name", subject), sex, lists)
                conditions = tuple(dict.fromkeys(condition_text(titles.get(c, c)) for c in by_subject[subject]))
                order[subject] = len(patients)
                patients.append(Patient(first, last, sex, tuple(c for c in conditions if c)))
            index = order[subject]
            for sentence in re.split(r"(?<=[.!?])\s+|\n\s*\n", text):
                template = _note_template(sentence)
                if len(template.split(" ")) >= 4 and per_patient.get(index, 0) < max_sentences:
                    per_patient[index] = per_patient.get(index, 0) + 1
                    sentences.append(NoteSentence(index, template))
        if len(order) >= n_patients and all(per_patient.get(i, 0) >= max_sentences for i in range(len(patients))):
            break
    if not sentences:
        raise BenchError(f"the MIMIC-III folder '{path}' gave no note sentence of a patient with diagnoses.")
    return ClinicalCorpus(tuple(patients), tuple(sentences), f"mimic-iii:patients={len(patients)}")
