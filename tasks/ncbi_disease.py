"""NCBI-disease BioNER: entity-level F1 (seqeval) of the server's token tagger on disease mentions.

Data: ``$BENCH_DATA_DIR/ncbi_disease/train.tsv`` (training) and ``devel.tsv`` (the evaluation split), the NCBI
disease corpus (Doğan et al. 2014, public domain) in CoNLL format: one token and its IOB2 tag (``B-Disease``,
``I-Disease``, ``O``) a line, a blank line between sentences. Each example is one sentence, its words joined
by single spaces; its label is the tag id of each word (``TAGS``). Both splits are seeded samples of sentences.

The server is the token tagger of the NER family (``bench.models.servers.TaggingServer``): a released piece
carries its word's tag (a B- word's later pieces carry I-), and a word is scored by its first released piece
(predicted O when it has none), as in ``tasks/conll2003.py``. It is also the utility of the clinical
pretraining tasks (``tasks/clinical.py``, Li et al. Table 7's BioNER column): there the tagger runs on the
encoder of the released, further-pretrained MLM.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

from bench import BenchError, Examples, Metric, TaskData, TokenTask, register_task
from bench.core.examples import data_dir, sample_indices
from bench.core.files import read_utf8
from bench.core.seeding import numpy_generator
from bench.data.alignment import word_of_pieces

TAGS = ("O", "B-Disease", "I-Disease")
TAG_ID = {tag: i for i, tag in enumerate(TAGS)}


def read_ncbi(path: Path) -> Examples:
    """The sentences of a CoNLL-format NCBI-disease file: texts and tag ids per word."""
    texts, labels, words, tags = [], [], [], []
    for number, line in enumerate(io.StringIO(read_utf8(path), newline=None), start=1):  # not UTF-8: named
        fields = line.split()
        if not fields:
            if words:
                texts.append(" ".join(words))
                labels.append(tags)
            words, tags = [], []
            continue
        if len(fields) != 2 or fields[1] not in TAG_ID:
            raise BenchError(f"{path}:{number} is not a token and a tag of {', '.join(TAGS)}.")
        words.append(fields[0])
        tags.append(TAG_ID[fields[1]])
    if words:
        texts.append(" ".join(words))
        labels.append(tags)
    array = np.empty(len(labels), dtype=object)
    array[:] = labels
    return Examples(tuple(texts), array)


def piece_tags(word_of: np.ndarray, word_tags: Sequence[int]) -> np.ndarray:
    """One tag per released piece: a word's first piece keeps its tag, later pieces of a B- word get I-."""
    tags = np.asarray(word_tags, dtype=np.int64)[word_of]
    later = np.r_[False, word_of[1:] == word_of[:-1]] if len(word_of) else np.zeros(0, bool)
    tags[later & (tags == TAG_ID["B-Disease"])] = TAG_ID["I-Disease"]
    return tags


def word_tags(word_of: np.ndarray, words: int, tags_of_pieces: Sequence[int]) -> np.ndarray:
    """One tag per word: the tag of its first released piece, O for a word with none."""
    tags_of_pieces = np.asarray(tags_of_pieces, dtype=np.int64)
    if len(tags_of_pieces) != len(word_of):
        raise BenchError(f"the server returned {len(tags_of_pieces)} tags for a sentence of {len(word_of)} pieces.")
    out = np.full(words, TAG_ID["O"], dtype=np.int64)
    first = np.r_[True, word_of[1:] != word_of[:-1]] if len(word_of) else np.zeros(0, bool)
    out[word_of[first]] = tags_of_pieces[first]
    return out


def entity_scores(predicted: Sequence[Sequence[int]], gold: Sequence[Sequence[int]]) -> dict[str, float]:
    """seqeval entity F1, precision and recall (IOB2, exact boundaries)."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    y_true = [[TAGS[int(t)] for t in g] for g in gold]
    y_pred = [[TAGS[int(t)] for t in p] for p in predicted]
    return {"f1": float(f1_score(y_true, y_pred, zero_division=0)),
            "precision": float(precision_score(y_true, y_pred, zero_division=0)),
            "recall": float(recall_score(y_true, y_pred, zero_division=0))}


@register_task("ncbi-disease")
@dataclass
class NCBIDisease(TokenTask):
    """NCBI-disease BioNER on train.tsv / devel.tsv; entity F1 (seqeval)."""

    metrics = (
        Metric("f1", True, "entity F1 (seqeval, IOB2): a disease mention counts when its boundaries match"),
        Metric("precision", True, "entity precision"),
        Metric("recall", True, "entity recall"),
    )
    protocols = ("tokens",)  # a tag needs its token
    evaluate_on: ClassVar[str] = "original"  # trained on released text, scored on the original development set
    num_labels = len(TAGS)
    training_defaults: ClassVar[dict] = {"epochs": 30, "batch_size": 256}  # batches of WordPieces, as conll2003
    default_n_train: ClassVar[int] = 2000
    default_n_eval: ClassVar[int] = 500

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """Seeded samples of training and development sentences."""
        folder = data_dir() / "ncbi_disease"
        paths = [folder / "train.tsv", folder / "devel.tsv"]
        if not all(path.is_file() for path in paths):
            raise BenchError(f"ncbi-disease data is missing: put train.tsv and devel.tsv under {folder} (set "
                             "BENCH_DATA_DIR to a folder laid out like shared/data).")
        train, evaluation = (read_ncbi(path) for path in paths)
        rng = numpy_generator(seed, "data", "ncbi-disease")
        train = train.subset(sample_indices(len(train), n_train, rng))
        evaluation = evaluation.subset(sample_indices(len(evaluation), n_eval, rng))
        return TaskData(train, evaluation, f"local:{folder}", {"eval_split": "NCBI-disease devel.tsv"})

    def server(self, spec, training):
        """A token tagger over the server's encoder."""
        from bench.models.servers import TaggingServer

        return TaggingServer(self.num_labels, training, spec.seed)

    def token_labels(self, texts, labels, encoder):
        """Word tags aligned to the released WordPieces: one tag array per sentence."""
        out = np.empty(len(texts), dtype=object)
        out[:] = [piece_tags(w, tags) for w, tags in zip(word_of_pieces(texts, encoder.tokenizer,
                                                                         encoder.max_length), labels)]
        return out

    def task_predictions(self, predictions, texts, encoder):
        """Piece tags back to word tags."""
        return [word_tags(w, len(t.split(" ")), p) for w, t, p in
                zip(word_of_pieces(texts, encoder.tokenizer, encoder.max_length), texts, predictions)]

    def score(self, predictions, labels) -> dict[str, float]:
        """Entity F1, precision and recall of word tag ids against gold word tag ids."""
        return entity_scores(predictions, labels)
