"""CoNLL-2003 English NER: span F1 of the server's tagger, labelled (LP/LR/LF) and unlabelled (UP/UR/UF).

Data: ``$BENCH_DATA_DIR/conll2003/eng.train`` (training) and ``eng.testa`` (the development set, the
evaluation split), in the shared task's column format (word, POS, chunk, NER tag; ``-DOCSTART-`` lines
start documents, blank lines end sentences). The files tag in IOB1; the task converts to IOB2, seqeval's
default scheme, on reading. Each example is one sentence, its words joined by single spaces; its label is
the IOB2 tag id of each word (``TAGS``). Both splits are seeded samples of sentences.

Setting (Li et al., "semantics-preserved distortion", §5): the server trains on the released (distorted)
training text and is scored on the ORIGINAL evaluation text, so the task declares ``evaluate_on =
"original"``: the engine privatizes only the training split, releases the evaluation split unprotected,
and attacks the training release.

Token alignment (the client's side, ``token_labels``): the client releases each sentence's regular
WordPiece ids, and [MASK] where a span defense wrote it (``bench.privacy.mechanisms.client_token_ids``: the other
special tokens, [UNK] among them, are dropped; the sentence is cut to ``max_length - 2`` pieces). Each released
piece carries its word's tag; a B- word's later pieces carry I- of its type. Predictions map back to words by
the tag of each word's first released piece (``task_predictions``); a word with no released piece (all [UNK], or
cut off by truncation) is predicted O, and gold is always the whole sentence, so such words count against recall.

Sensitive spans (for span defenses, ``bench.core.spans``): the gold entities of each example, of kind PER, ORG,
LOC or MISC. A rewritten entity stays an entity of its kind: its new words are tagged B-X I-X ... (``rewrite_label``).
Public examples (``public_examples``, what substitutes come from): the sentences of both files that the cell's
splits do not hold.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

from bench import BenchError, Examples, Metric, SpanTask, TaskData, TokenTask, register_task
from bench.core.examples import data_dir, sample_indices
from bench.core.files import read_utf8
from bench.core.seeding import numpy_generator
from bench.core.spans import Edit, Span
from bench.data.alignment import word_of_pieces

TYPES = ("PER", "ORG", "LOC", "MISC")
TAGS = ("O",) + tuple(f"{prefix}-{kind}" for kind in TYPES for prefix in ("B", "I"))  # IOB2 tag of each id
TAG_ID = {tag: i for i, tag in enumerate(TAGS)}
UNLABELLED = "ENT"  # the one type every entity gets for unlabelled (boundary-only) scores

Sentence = list[tuple[str, str]]  # (word, IOB tag)


# -- reading -------------------------------------------------------------------------------------


def read_conll(path: Path) -> list[Sentence]:
    """The sentences of a CoNLL-2003 file as (word, tag) pairs, tags as in the file (first and last columns)."""
    sentences: list[Sentence] = []
    current: Sentence = []
    for number, line in enumerate(io.StringIO(read_utf8(path), newline=None), start=1):  # not UTF-8: named
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if current:
                sentences.append(current)
            current = []
            continue
        if len(fields) < 2:
            raise BenchError(f"{path}:{number} has {len(fields)} column; expected word ... NER tag.")
        current.append((fields[0], fields[-1]))
    if current:
        sentences.append(current)
    if not sentences:
        raise BenchError(f"{path} holds no example (no tagged sentence); restore the original download.")
    return sentences


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 (B- only between adjacent entities of one type) to IOB2 (every entity starts with B-)."""
    out: list[str] = []
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:  # previous is O or another type
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return out


def sentence_examples(sentences: list[Sentence], path: Path) -> Examples:
    """Texts (words joined by single spaces) and IOB2 tag ids per word."""
    texts, labels = [], []
    for sentence in sentences:
        words, tags = zip(*sentence)
        try:
            labels.append([TAG_ID[tag] for tag in iob1_to_iob2(tags)])
        except KeyError as missing:
            raise BenchError(f"{path} has tag {missing}, which is not a CoNLL-2003 NER tag.") from None
        texts.append(" ".join(words))
    array = np.empty(len(labels), dtype=object)
    array[:] = labels
    return Examples(tuple(texts), array)


# -- alignment with the public WordPiece space ---------------------------------------------------


@dataclass(frozen=True)
class Alignment:
    """Where a sentence's released WordPieces come from: the word index of each piece (in release order)."""

    words: int  # words in the sentence
    word_of: np.ndarray  # (pieces,) word index of each released piece

    def piece_tags(self, word_tags: Sequence[int]) -> np.ndarray:
        """One tag id per released piece: the first piece of a word keeps its tag, later pieces of a B- word
        get I- of the same type."""
        tags = np.asarray(word_tags, dtype=np.int64)[self.word_of]
        later = np.r_[False, self.word_of[1:] == self.word_of[:-1]] if len(self.word_of) else np.zeros(0, bool)
        begins = later & np.isin(tags, [TAG_ID[f"B-{kind}"] for kind in TYPES])
        tags[begins] += 1  # B-X and I-X are adjacent ids
        return tags

    def word_tags(self, piece_tags: Sequence[int]) -> np.ndarray:
        """One tag id per word: the tag of its first released piece; O for a word with none."""
        piece_tags = np.asarray(piece_tags, dtype=np.int64)
        if len(piece_tags) != len(self.word_of):
            raise BenchError(f"the server returned {len(piece_tags)} tags for a sentence of {len(self.word_of)} "
                             "released pieces.")
        out = np.full(self.words, TAG_ID["O"], dtype=np.int64)
        first = np.r_[True, self.word_of[1:] != self.word_of[:-1]] if len(self.word_of) else np.zeros(0, bool)
        out[self.word_of[first]] = piece_tags[first]
        return out


def align(texts: Sequence[str], tokenizer, max_length: int) -> list[Alignment]:
    """The alignment of each space-joined sentence with the WordPieces a client releases for it
    (``bench.data.alignment.word_of_pieces``)."""
    return [Alignment(len(text.split(" ")), word_of) for text, word_of in
            zip(texts, word_of_pieces(texts, tokenizer, max_length))]


# -- scoring -------------------------------------------------------------------------------------


def _names(tag_ids: Sequence[int], labelled: bool) -> list[str]:
    names = [TAGS[int(t)] for t in tag_ids]
    return names if labelled else [n if n == "O" else f"{n[:2]}{UNLABELLED}" for n in names]


def span_scores(predicted: Sequence[Sequence[int]], gold: Sequence[Sequence[int]]) -> dict[str, float]:
    """seqeval span precision/recall/F1 (IOB2, CoNLL evaluation), labelled and with every type merged."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    scores = {}
    for labelled, prefix in ((True, "l"), (False, "u")):
        y_true = [_names(g, labelled) for g in gold]
        y_pred = [_names(p, labelled) for p in predicted]
        scores[f"{prefix}p"] = float(precision_score(y_true, y_pred, zero_division=0))
        scores[f"{prefix}r"] = float(recall_score(y_true, y_pred, zero_division=0))
        scores[f"{prefix}f"] = float(f1_score(y_true, y_pred, zero_division=0))
    return {name: scores[name] for name in ("lf", "lp", "lr", "uf", "up", "ur")}


def entities(tag_ids: Sequence[int]) -> list[tuple[int, int, str]]:
    """The entity spans of one IOB2 sentence, ``(start_word, end_word exclusive, type)``."""
    from seqeval.metrics.sequence_labeling import get_entities

    return [(start, end + 1, kind) for kind, start, end in get_entities(_names(tag_ids, True))]


# -- the task ------------------------------------------------------------------------------------


@register_task("conll2003")
@dataclass
class CoNLL2003(TokenTask, SpanTask):
    """CoNLL-2003 English NER (PER, ORG, LOC, MISC) on eng.train / eng.testa; span F1 (seqeval)."""

    metrics = (
        Metric("lf", True, "labelled span F1 (seqeval, IOB2): an entity counts when its boundaries and type match"),
        Metric("lp", True, "labelled span precision"),
        Metric("lr", True, "labelled span recall"),
        Metric("uf", True, "unlabelled span F1: boundaries only (every type merged into one)"),
        Metric("up", True, "unlabelled span precision"),
        Metric("ur", True, "unlabelled span recall"),
    )
    protocols = ("tokens",)  # a tag needs its token
    evaluate_on: ClassVar[str] = "original"  # Li et al. §5: trained on distorted text, tested on original text
    num_labels = len(TAGS)
    span_kinds: ClassVar[tuple[str, ...]] = TYPES  # the gold entities of each type are sensitive
    # the tagger's batches are WordPieces (~18 a sentence); 30 epochs of 256 pieces train it in a minute or two
    training_defaults: ClassVar[dict] = {"epochs": 30, "batch_size": 256}
    default_n_train: ClassVar[int] = 2000  # sentences; about 28k WordPieces, minutes on 2 CPU cores
    default_n_eval: ClassVar[int] = 500
    train_file: ClassVar[str] = "eng.train"
    eval_file: ClassVar[str] = "eng.testa"

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """Seeded samples of training and development sentences."""
        folder = data_dir() / "conll2003"
        paths = [folder / self.train_file, folder / self.eval_file]
        if not all(path.is_file() for path in paths):
            raise BenchError(f"conll2003 data is missing: put {self.train_file} and {self.eval_file} under {folder} "
                             "(set BENCH_DATA_DIR to a folder laid out like shared/data).")
        train, evaluation = (sentence_examples(read_conll(path), path) for path in paths)
        rng = numpy_generator(seed, "data", self.registry_name)
        train = train.subset(sample_indices(len(train), n_train, rng))
        evaluation = evaluation.subset(sample_indices(len(evaluation), n_eval, rng))
        notes = {"eval_split": "CoNLL-2003 eng.testa (development set)",
                 "tag_scheme": "IOB2, converted from the files' IOB1",
                 "alignment": "one tag per released regular WordPiece; a word is scored by its first piece; "
                              "words with no released piece (all [UNK] or truncated) are predicted O"}
        return TaskData(train, evaluation, f"local:{folder}", notes)

    def server(self, spec, training):
        """A token tagger: the server's frozen encoder and an MLP head over each released piece."""
        from bench.models.servers import TaggingServer

        return TaggingServer(self.num_labels, training, spec.seed)

    def token_labels(self, texts, labels, encoder):
        """Word tags aligned to the released WordPieces (the client's side): one tag array per sentence."""
        aligned = align(texts, encoder.tokenizer, encoder.max_length)
        out = np.empty(len(aligned), dtype=object)
        out[:] = [a.piece_tags(tags) for a, tags in zip(aligned, labels)]
        return out

    def task_predictions(self, predictions, texts, encoder):
        """Piece tags back to word tags (first piece of each word; O for a word with no released piece)."""
        return [a.word_tags(p) for a, p in zip(align(texts, encoder.tokenizer, encoder.max_length), predictions)]

    def score(self, predictions, labels) -> dict[str, float]:
        """Labelled and unlabelled span precision, recall and F1 of word tag ids against gold word tag ids."""
        return span_scores(predictions, labels)

    def sensitive_spans(self, data: TaskData, split: str, index: int) -> list[Span]:
        """Gold entities of example ``index`` of ``split`` ("train" or "eval"), kind = entity type: the spans an
        NDD-style defense treats as sensitive."""
        if split not in ("train", "eval"):
            raise BenchError(f"split must be train or eval, got '{split}'.")
        return [Span(start, end, kind) for start, end, kind in entities(getattr(data, split).labels[index])]

    def public_examples(self, data: TaskData) -> Examples:
        """The sentences of the training and development files that neither split of ``data`` holds (by text):
        public news whose entities a substitutive span defense draws from."""
        folder = data_dir() / "conll2003"
        held = set(data.train.texts) | set(data.eval.texts)
        parts = [sentence_examples(read_conll(folder / name), folder / name)
                 for name in (self.train_file, self.eval_file)]
        texts = [t for part in parts for t in part.texts]
        labels = [l for part in parts for l in part.labels]
        keep = [i for i, t in enumerate(texts) if t not in held]
        array = np.empty(len(keep), dtype=object)
        array[:] = [labels[i] for i in keep]
        return Examples(tuple(texts[i] for i in keep), array)

    def membership_pools(self, data: TaskData, seed: int) -> tuple[Examples, Examples] | None:
        """Non-members: as many training-file sentences as the evaluation split holds, from the far end of the run's
        permutation of eng.train; public: the training-file sentences between the run's sample and them. Sentences
        whose text a split of ``data`` holds are left out. None when eng.train has too few sentences past the
        sample."""
        path = data_dir() / "conll2003" / self.train_file
        train = sentence_examples(read_conll(path), path)
        order = numpy_generator(seed, "data", self.registry_name).permutation(len(train))  # load()'s draw
        n_train, n_held = len(data.train), len(data.eval)
        if len(order) - n_train < 2 * n_held:
            return None
        private = set(data.train.texts) | set(data.eval.texts)
        held = [i for i in order[len(order) - n_held:] if train.texts[i] not in private]
        private |= {train.texts[i] for i in held}
        public = [i for i in order[n_train : len(order) - n_held] if train.texts[i] not in private]
        return train.subset(np.array(held, dtype=int)), train.subset(np.array(public, dtype=int))

    def span_fragment(self, label, text, span: Span) -> list[int]:
        """The entity's own tag ids (B-X I-X ...): what a substituted entity carries."""
        return list(label[span.start:span.end])

    def rewrite_label(self, label, text, edits: list[Edit]) -> list[int]:
        """Tags of the rewritten sentence: unchanged words keep theirs; each rewritten entity is tagged B-X I-X ...
        with its kind X, whatever words replaced it (a [MASK]ed entity is still an entity to the tagger)."""
        out: list[int] = []
        cursor = 0
        for edit in sorted(edits, key=lambda e: e.span.start):
            out.extend(label[cursor:edit.span.start])
            kind = edit.span.kind
            if kind not in TYPES:
                raise BenchError(f"conll2003 spans are of kind {', '.join(TYPES)}, not '{kind}'.")
            out.extend([TAG_ID[f"B-{kind}"]] + [TAG_ID[f"I-{kind}"]] * (len(edit.words) - 1))
            cursor = edit.span.end
        out.extend(label[cursor:])
        return out
