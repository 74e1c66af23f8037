"""Penn Treebank constituency parsing (NLTK's 10% WSJ sample): evalb bracket F1 of a span-based chart parser.

Data: ``$BENCH_DATA_DIR/ptb/treebank.zip`` (NLTK's sample: 199 files wsj_0001.mrg-wsj_0199.mrg, 3,914 parsed
sentences), read from the zip with nltk's ``BracketParseCorpusReader`` (nothing is extracted). Split by file,
fixed: wsj_0001-wsj_0159 are the training files (3,396 sentences), wsj_0160-wsj_0199 the evaluation files
(518 sentences); both splits are then seeded samples of sentences (``n_train``, ``n_eval``).

Preprocessing (as evalb and the usual parsing setups do): ``-NONE-`` preterminals (traces, empty elements) are
removed, and so is every constituent left over nothing; function tags and indices are stripped from phrase
labels (``NP-SBJ-1`` -> ``NP``, ``PP=2`` -> ``PP``); POS tags are kept. Each example's text is its words
joined by single spaces, with the treebank's bracket tokens written as the brackets they stand for (``-LRB-``
-> ``(``, ``-RRB-`` -> ``)``, ``-LCB-`` -> ``{``, ``-RCB-`` -> ``}``); its label is the preprocessed tree as
a one-line bracket string (the leaves keep the treebank's tokens, word i of the text is leaf i).

Metric (``bench.core.evalb``, evalb with COLLINS.prm; PYEVALB was checked and is not sound): labelled and
unlabelled bracket precision, recall and F1, corpus-level, the sentence's top phrase counted, preterminals not,
punctuation words (gold tags , : `` '' .) deleted, ADVP = PRT, brackets matched as a multiset.

Server (``bench.models.chart.ChartParserServer``): a span-based chart parser over the server's frozen encoder's
features of the RELEASED WordPieces (it never sees words): BiLSTM fencepost differences, an MLP span-label
scorer trained with cross-entropy over all spans, CKY. Alignment (the client's side, ``token_labels``, with
conll2003's ``align``): the client releases each sentence's regular WordPieces (special tokens and [UNK]
dropped, cut to ``max_length - 2`` pieces); a constituent over words i..j becomes the pieces from the first
piece of its first word with a piece to the last piece of its last word with one; a constituent over no
released piece (all [UNK], or truncated) is dropped. Unary chains become one joint label, outermost first
(``S+VP``). Predictions map back to words (``task_predictions``): a predicted bracket that starts or ends inside
a word is dropped; the bracket over all released pieces covers the whole sentence, so words cut off by
truncation (sentences over 126 pieces) are flat under the root; joint labels expand to one bracket each.

Setting (Li et al., "semantics-preserved distortion", §5): the server trains on the released (distorted)
training text and is scored on the ORIGINAL evaluation text (``evaluate_on = "original"``).

Sensitive spans (``bench.core.spans``): every gold phrase of the preprocessed tree except the root (the whole
sentence) and the preterminals; one-word phrases count (``(NP (PRP it))`` is an NP over "it"); each node of a
unary chain is a span of its own kind over the same words. Kinds are the plain phrase labels (``PHRASES``).
``span_fragment`` is the phrase's subtree as a bracket string; ``rewrite_label`` puts a substituted phrase's
subtree in place of the old phrase, and turns generated or [MASK] words into a flat phrase of the span's kind
whose words all get the placeholder tag ``XX`` (``(NP (XX [MASK]) (XX [MASK]))``).
Public examples (``public_examples``, what substitutes come from): the treebank sentences the cell's splits do
not hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Sequence

import numpy as np

from bench import BenchError, Examples, Metric, SpanTask, TaskData, TokenTask, register_task
from bench.core.evalb import Bracket, evalb, is_preterminal, plain_label, strip_traces
from bench.core.examples import data_dir, sample_indices
from bench.core.seeding import numpy_generator
from bench.core.spans import Edit, Span, apply_edits
from bench.tasks.conll2003 import Alignment, align
from bench.tasks.glue import nltk_may_read

# the phrase labels of the Penn Treebank II guidelines (the sample has all but a few; X is "unknown")
PHRASES = ("ADJP", "ADVP", "CONJP", "FRAG", "INTJ", "LST", "NAC", "NP", "NX", "PP", "PRN", "PRT", "QP", "RRC",
           "S", "SBAR", "SBARQ", "SINV", "SQ", "UCP", "VP", "WHADJP", "WHADVP", "WHNP", "WHPP", "X")
TRAIN_FILES = (1, 159)  # wsj_0001.mrg - wsj_0159.mrg
EVAL_FILES = (160, 199)  # wsj_0160.mrg - wsj_0199.mrg
PLACEHOLDER_TAG = "XX"  # the part of speech of a generated or masked word in a rewritten tree
JOINT = "+"  # joins the labels of a unary chain, outermost first
BRACKET_WORDS = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}"}  # treebank token -> text word
BRACKET_LEAVES = {word: leaf for leaf, word in BRACKET_WORDS.items()}
_FILE = re.compile(r"wsj_(\d{4})\.mrg")


# -- reading and preprocessing -------------------------------------------------------------------


def preprocess(tree):
    """The tree without traces and empty constituents, phrase labels without function tags or indices (POS
    tags unchanged); None when nothing is left."""
    from nltk import Tree

    def plain(node):
        if isinstance(node, str) or is_preterminal(node):
            return node
        return Tree(plain_label(node.label()), [plain(child) for child in node])

    stripped = strip_traces(tree)
    return None if stripped is None else plain(stripped)


def one_line(tree) -> str:
    """A tree as a one-line bracket string."""
    return tree.pformat(margin=10**9)


def text_of(tree) -> str:
    """The sentence of a tree: its leaves joined by single spaces, bracket tokens as brackets."""
    return " ".join(BRACKET_WORDS.get(leaf, leaf) for leaf in tree.leaves())


def leaf_of(word: str) -> str:
    """The treebank token of a text word: a bracket back to ``-LRB-`` and so on (round brackets inside a word
    too, so any word can be a leaf of a bracket string)."""
    if word in BRACKET_LEAVES:
        return BRACKET_LEAVES[word]
    return word.replace("(", "-LRB-").replace(")", "-RRB-")


@lru_cache(maxsize=2)
def _read_zip(path: str, stamp: float) -> tuple[tuple[int, str], ...]:
    """(file number, preprocessed one-line tree) of every sentence of the zip, in file order."""
    from nltk.corpus.reader import BracketParseCorpusReader
    from nltk.data import ZipFilePathPointer


    with nltk_may_read(Path(path).parent):
        reader = BracketParseCorpusReader(ZipFilePathPointer(path, "treebank/combined/"), r"wsj_\d{4}\.mrg")
        out = []
        for fileid in reader.fileids():
            number = int(_FILE.fullmatch(fileid).group(1))
            for tree in reader.parsed_sents(fileid):
                processed = preprocess(tree)
                if processed is not None and not is_preterminal(processed):
                    out.append((number, one_line(processed)))
    return tuple(out)


def read_treebank(path: Path) -> list[tuple[int, str]]:
    """(file number, preprocessed tree as a one-line bracket string) of each sentence of NLTK's treebank zip."""
    try:
        return list(_read_zip(str(path.resolve()), path.stat().st_mtime))
    except (KeyError, ValueError, OSError) as exc:
        raise BenchError(f"{path} is not NLTK's treebank.zip ({type(exc).__name__}: {exc}).") from None


def file_split(sentences: Sequence[tuple[int, str]]) -> tuple[Examples, Examples]:
    """Training (wsj_0001-0159) and evaluation (wsj_0160-0199) examples, in file order."""
    from nltk import Tree

    splits = []
    for first, last in (TRAIN_FILES, EVAL_FILES):
        trees = [tree for number, tree in sentences if first <= number <= last]
        labels = np.empty(len(trees), dtype=object)
        labels[:] = trees
        splits.append(Examples(tuple(text_of(Tree.fromstring(t)) for t in trees), labels))
    return splits[0], splits[1]


# -- trees as spans --------------------------------------------------------------------------------


def phrases(tree) -> list[tuple[int, int, str, tuple[int, ...]]]:
    """Every phrase node (not a preterminal) in preorder: (start word, end word exclusive, label, tree position)."""
    out = []

    def visit(node, start: int, position: tuple[int, ...]) -> int:
        if isinstance(node, str) or is_preterminal(node):
            return start + 1
        slot = len(out)
        end = start
        for k, child in enumerate(node):
            end = visit(child, end, position + (k,))
        out.insert(slot, (start, end, node.label(), position))
        return end

    visit(tree, 0, ())
    return out


def joint_spans(tree, alignment: Alignment) -> list[tuple[int, int, str]]:
    """The gold labelled spans of a tree in released-piece positions, unary chains joined (``S+VP``)."""
    pieces = len(alignment.word_of)
    first = np.full(alignment.words, -1)
    last = np.full(alignment.words, -1)
    for piece in range(pieces - 1, -1, -1):
        first[alignment.word_of[piece]] = piece
    for piece in range(pieces):
        last[alignment.word_of[piece]] = piece
    joined: dict[tuple[int, int], list[str]] = {}
    for start, end, label, _ in phrases(tree):
        covered = np.flatnonzero(first[start:end] >= 0)
        if len(covered):
            key = (int(first[start + covered[0]]), int(last[start + covered[-1]]) + 1)
            joined.setdefault(key, []).append(label)  # preorder: the outer phrase first
    return [(a, b, JOINT.join(labels)) for (a, b), labels in joined.items()]


def word_brackets(spans: Sequence[tuple[int, int, str]], alignment: Alignment) -> list[Bracket]:
    """Predicted labelled piece spans as word brackets: one bracket per label of a joint label; a span that
    starts or ends inside a word is dropped; the span over all pieces covers the whole sentence."""
    word_of = alignment.word_of
    pieces = len(word_of)
    starts_word = np.r_[True, word_of[1:] != word_of[:-1]] if pieces else np.zeros(0, bool)
    ends_word = np.r_[word_of[1:] != word_of[:-1], True] if pieces else np.zeros(0, bool)
    out: list[Bracket] = []
    for a, b, label in spans:
        if not 0 <= a < b <= pieces:
            raise BenchError(f"the server returned span {a}-{b} for a sentence of {pieces} released pieces.")
        if (a, b) == (0, pieces):
            start, end = 0, alignment.words
        elif starts_word[a] and ends_word[b - 1]:
            start, end = int(word_of[a]), int(word_of[b - 1]) + 1
        else:
            continue
        out += [(name, start, end) for name in label.split(JOINT)]
    return out


def right_branching(words: int, label: str = "S") -> list[Bracket]:
    """The right-branching baseline parse: a bracket over words i..end for every i (all labelled ``label``)."""
    return [(label, i, words) for i in range(max(words - 1, 1))] if words else []


# -- the task ------------------------------------------------------------------------------------


@register_task("ptb")
@dataclass
class PTB(TokenTask, SpanTask):
    """Penn Treebank WSJ sample (NLTK), split by file; evalb labelled/unlabelled bracket F1 of a chart parser."""

    metrics = (
        Metric("lf", True, "labelled bracket F1 (evalb, COLLINS.prm): a bracket counts when its span and label match"),
        Metric("lp", True, "labelled bracket precision"),
        Metric("lr", True, "labelled bracket recall"),
        Metric("uf", True, "unlabelled bracket F1: spans only"),
        Metric("up", True, "unlabelled bracket precision"),
        Metric("ur", True, "unlabelled bracket recall"),
    )
    protocols = ("tokens",)  # a parse needs its tokens
    evaluate_on: ClassVar[str] = "original"  # Li et al. §5: trained on distorted text, tested on original text
    num_labels = len(PHRASES)  # phrase labels; the parser's own label set is the training trees' joint labels
    span_kinds: ClassVar[tuple[str, ...]] = PHRASES
    # batches are sentences (every span of each one is a training example); chosen on 1,500 / 400 sentences, seed 0:
    # 8 epochs at lr 3e-3 and input dropout 0.2 gave lf 0.659, 12 epochs at 4e-3 and 0.1 gave 0.722 (152 s of
    # training on 2 shared cores), 20 epochs 0.740 (309 s)
    training_defaults: ClassVar[dict] = {"epochs": 12, "batch_size": 8, "lr": 4e-3, "dropout": 0.1}
    default_n_train: ClassVar[int] = 1500  # sentences of wsj_0001-0159
    default_n_eval: ClassVar[int] = 400  # sentences of wsj_0160-0199
    file: ClassVar[str] = "treebank.zip"
    max_words: ClassVar[int | None] = None  # keep only sentences of at most this many words (punctuation counted)

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """Seeded samples of the training files' and the evaluation files' sentences."""
        folder = data_dir() / "ptb"
        path = folder / self.file
        if not path.is_file():
            raise BenchError(f"ptb data is missing: put NLTK's {self.file} under {folder} (set BENCH_DATA_DIR to a "
                             "folder laid out like shared/data).")
        train, evaluation = file_split(read_treebank(path))
        if self.max_words is not None:
            train, evaluation = (part.subset(np.flatnonzero([len(text.split()) <= self.max_words
                                                             for text in part.texts]))
                                 for part in (train, evaluation))
        rng = numpy_generator(seed, "data", self.registry_name)
        train = train.subset(sample_indices(len(train), n_train, rng))
        evaluation = evaluation.subset(sample_indices(len(evaluation), n_eval, rng))
        notes = {"eval_split": "NLTK WSJ sample files wsj_0160-0199 (training: wsj_0001-0159)"
                               + (f", sentences of at most {self.max_words} words" if self.max_words else ""),
                 "preprocessing": "-NONE- and emptied constituents removed, function tags and indices stripped",
                 "metric": "evalb COLLINS.prm: punctuation deleted, ADVP=PRT, root phrase counted, micro P/R/F1",
                 "alignment": "the parser sees released WordPieces; unary chains joined; brackets splitting a word "
                              "dropped; words past the released pieces flat under the root"}
        return TaskData(train, evaluation, f"local:{path}", notes)

    def server(self, spec, training):
        """A span-based chart parser over the server's frozen encoder's features of released pieces."""
        from bench.models.chart import ChartParserServer

        return ChartParserServer(training, spec.seed)

    def token_labels(self, texts, labels, encoder):
        """Gold labelled spans in released-piece positions (the client's side), unary chains joined."""
        from nltk import Tree

        aligned = align(texts, encoder.tokenizer, encoder.max_length)
        out = np.empty(len(aligned), dtype=object)
        out[:] = [joint_spans(Tree.fromstring(label), a) for a, label in zip(aligned, labels)]
        return out

    def task_predictions(self, predictions, texts, encoder):
        """The parser's labelled piece spans as word brackets (``word_brackets``)."""
        return [word_brackets(p, a) for a, p in zip(align(texts, encoder.tokenizer, encoder.max_length),
                                                     predictions)]

    def score(self, predictions, labels) -> dict[str, float]:
        """evalb labelled and unlabelled bracket precision, recall and F1 against the gold trees."""
        from nltk import Tree

        return evalb([Tree.fromstring(label) for label in labels], list(predictions))

    # -- sensitive spans ----------------------------------------------------------------------------

    def sensitive_spans(self, data: TaskData, split: str, index: int) -> list[Span]:
        """Every gold phrase of example ``index`` of ``split`` but the root, kind = its label (nested and unary
        phrases included: the defense chooses kinds and drops overlaps)."""
        from nltk import Tree

        if split not in ("train", "eval"):
            raise BenchError(f"split must be train or eval, got '{split}'.")
        tree = Tree.fromstring(getattr(data, split).labels[index])
        return [Span(start, end, label) for start, end, label, position in phrases(tree) if position]

    def public_examples(self, data: TaskData) -> Examples:
        """The treebank's sentences that neither split of ``data`` holds (by text), every length: public trees
        whose phrases a substitutive span defense draws from."""
        train, evaluation = file_split(read_treebank(data_dir() / "ptb" / self.file))
        held = set(data.train.texts) | set(data.eval.texts)
        texts = [*train.texts, *evaluation.texts]
        labels = [*train.labels, *evaluation.labels]
        keep = [i for i, t in enumerate(texts) if t not in held]
        array = np.empty(len(keep), dtype=object)
        array[:] = [labels[i] for i in keep]
        return Examples(tuple(texts[i] for i in keep), array)

    def span_fragment(self, label, text, span: Span) -> str:
        """The subtree of the span's phrase (the outermost of its kind over exactly its words), as a bracket
        string."""
        from nltk import Tree

        tree = Tree.fromstring(label)
        return one_line(tree[self._position(tree, span)])

    def rewrite_label(self, label, text, edits: list[Edit]) -> str:
        """The tree of the rewritten sentence: a substituted phrase's subtree replaces the old phrase; generated
        or masked words become a flat phrase of the span's kind, each word tagged ``XX``."""
        from nltk import Tree

        tree = Tree.fromstring(label)
        if len(tree.leaves()) != len(text.split(" ")):
            raise BenchError(f"a tree of {len(tree.leaves())} words does not label a text of "
                             f"{len(text.split(' '))} words.")
        apply_edits(text, edits)  # checks the edits: in bounds, not overlapping
        positions = [self._position(tree, edit.span) for edit in edits]  # all in the original tree
        for edit, position in zip(edits, positions):
            leaves = [leaf_of(word) for word in edit.words]
            if edit.fragment is None:
                new = Tree(edit.span.kind, [Tree(PLACEHOLDER_TAG, [leaf]) for leaf in leaves])
            else:
                new = Tree.fromstring(edit.fragment) if isinstance(edit.fragment, str) else edit.fragment.copy(True)
                if len(new.leaves()) != len(leaves):
                    raise BenchError(f"a substituted phrase of {len(new.leaves())} words came with "
                                     f"{len(leaves)} words.")
                for k, leaf_position in enumerate(new.treepositions("leaves")):
                    new[leaf_position] = leaves[k]
            if position:
                tree[position] = new  # edits do not overlap, so the other edits' positions stay valid
            else:
                tree = new  # the whole sentence was the phrase
        return one_line(tree)

    def _position(self, tree, span: Span) -> tuple[int, ...]:
        if span.kind not in PHRASES:
            raise BenchError(f"ptb spans are phrase labels ({', '.join(PHRASES)}), not '{span.kind}'.")
        for start, end, kind, position in phrases(tree):
            if (start, end, kind) == (span.start, span.end, span.kind):
                return position
        raise BenchError(f"words {span.start}-{span.end} are not a {span.kind} phrase of the tree.")


@register_task("ptb-20")
@dataclass
class PTB20(PTB):
    """PTB restricted to sentences of at most 20 words (punctuation counted) in both splits: every such sentence.

    Why: exact NDD masks every unchanged WordPiece of a sentence in turn for every candidate, so a rewrite costs
    about the squared sentence length per span. Rewriting the 1,401 training sentences of at most 20 words is
    about a tenth of the work of the same rewrite of the full 1,500-sentence slice (every phrase 0.32 against 3.40,
    every NP 0.27 against 3.03, a third of the NPs 0.09 against 1.00, in units of the recorded full-slice 33%-NP
    cell; ``scripts/ndd_ptb_cost.py``), which makes Li et al.'s Table 2 rows a CPU grid (``grids/ndd_ptb20.yaml``).
    A deviation from the paper's full treebank, like the WSJ-k restrictions of parsing studies (those count words
    without punctuation).
    """

    default_n_train: ClassVar[int] = 1401  # every training sentence (wsj_0001-0159) of at most 20 words
    default_n_eval: ClassVar[int] = 204  # every evaluation sentence (wsj_0160-0199) of at most 20 words
    max_words: ClassVar[int | None] = 20
