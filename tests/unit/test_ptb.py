"""PTB: evalb on hand-scored trees, reading and preprocessing, the split by file, rewrite_label, alignment, CKY."""

from __future__ import annotations

import numpy as np
import pytest
from nltk import Tree

from bench import BenchError
from bench.core.evalb import evalb, plain_label, strip_traces, tree_brackets
from bench.core.examples import data_dir
from bench.core.spans import Edit, Span, apply_edits
from bench.models.chart import cky
from bench.tasks.conll2003 import Alignment
from bench.tasks.ptb import (
    PTB,
    PTB20,
    file_split,
    joint_spans,
    phrases,
    preprocess,
    read_treebank,
    right_branching,
    text_of,
    word_brackets,
)

ZIP = data_dir() / "ptb" / "treebank.zip"
needs_data = pytest.mark.skipif(not ZIP.is_file(), reason="ptb/treebank.zip not in BENCH_DATA_DIR")

CAT = "(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"
IT = "(S (NP (NP (PRP it))) (VP (VBZ is) (ADJP (JJ good))))"


def tree(text: str) -> Tree:
    return Tree.fromstring(text)


# -- evalb ---------------------------------------------------------------------------------------


def test_brackets_leave_out_preterminals_and_the_wrapper_root():
    assert tree_brackets(tree(f"(TOP {CAT})")) == [("S", 0, 7), ("NP", 0, 2), ("VP", 2, 6), ("PP", 3, 6),
                                                   ("NP", 4, 6)]
    assert tree_brackets(tree(f"( {CAT})")) == tree_brackets(tree(CAT))  # the files' unlabelled outer bracket
    assert plain_label("NP-SBJ-1") == "NP" and plain_label("PP=2") == "PP" and plain_label("-NONE-") == "-NONE-"


def test_evalb_on_a_hand_scored_sentence():
    # gold after deleting "." : S 0-6, NP 0-2, VP 2-6, PP 3-6, NP 4-6 (5 brackets)
    # test: S 0-7 is S 0-6 once "." is deleted (a hit); NP 0-2 hit; VP 2-4 miss; NP 3-6 has PP's span (unlabelled
    # hit only); NP 4-6 hit -> labelled 3/5, unlabelled 4/5
    test = [("S", 0, 7), ("NP", 0, 2), ("VP", 2, 4), ("NP", 3, 6), ("NP", 4, 6)]
    scores = evalb([tree(CAT)], [test])
    assert scores["lp"] == pytest.approx(0.6) and scores["lr"] == pytest.approx(0.6)
    assert scores["lf"] == pytest.approx(0.6)
    assert scores["up"] == pytest.approx(0.8) and scores["ur"] == pytest.approx(0.8)
    assert evalb([tree(CAT)], [tree(CAT)]) == dict.fromkeys(("lf", "lp", "lr", "uf", "up", "ur"), 1.0)


def test_evalb_matches_brackets_as_a_multiset_and_micro_averages():
    # gold IT: S 0-3, NP 0-1 twice, VP 1-3, ADJP 2-3 (5); the test has one NP 0-1: recall 4/5, precision 1
    one_np = [("S", 0, 3), ("NP", 0, 1), ("VP", 1, 3), ("ADJP", 2, 3)]
    scores = evalb([tree(IT)], [one_np])
    assert scores["lp"] == 1.0 and scores["lr"] == pytest.approx(0.8)
    assert scores["lf"] == pytest.approx(2 * 0.8 / 1.8)
    # three NPs against two: precision 5/6 (n < m), recall 1
    assert evalb([tree(IT)], [one_np + [("NP", 0, 1)] * 2])["lp"] == pytest.approx(5 / 6)
    # corpus level: both sentences pooled (3 + 4 matched of 5 + 4 test and 5 + 5 gold), not a mean of sentences
    test = [("S", 0, 7), ("NP", 0, 2), ("VP", 2, 4), ("NP", 3, 6), ("NP", 4, 6)]
    pooled = evalb([tree(CAT), tree(IT)], [test, one_np])
    assert pooled["lp"] == pytest.approx(7 / 9) and pooled["lr"] == pytest.approx(7 / 10)


def test_evalb_equates_advp_with_prt_strips_function_tags_and_drops_punctuation_only_brackets():
    gold = tree("(S (NP-SBJ (PRP He)) (VP (VBD gave) (PRT (RP up))) (X (. .)))")
    # gold brackets: S 0-3, NP 0-1, VP 1-3, PRT 2-3; X over "." only is dropped, and so is the test's
    test = [("S", 0, 4), ("NP-SBJ", 0, 1), ("VP", 1, 3), ("ADVP", 2, 3), ("FRAG", 3, 4)]
    scores = evalb([gold], [test])
    assert scores["lp"] == 1.0 and scores["lr"] == 1.0
    assert evalb([gold], [[("S", 0, 4), ("NP", 0, 1), ("VP", 1, 3), ("PP", 2, 3)]])["lf"] == pytest.approx(0.75)


def test_evalb_refuses_traces_mismatched_trees_and_outside_brackets():
    with pytest.raises(BenchError, match="traces"):
        evalb([tree("(S (NP (-NONE- *)) (VP (VBD left)))")], [[]])
    with pytest.raises(BenchError, match="words"):
        evalb([tree(CAT)], [tree(IT)])
    with pytest.raises(BenchError, match="outside"):
        evalb([tree(IT)], [[("S", 0, 9)]])
    with pytest.raises(BenchError, match="gold trees"):
        evalb([tree(IT)], [])


def test_right_branching_baseline():
    assert right_branching(4) == [("S", 0, 4), ("S", 1, 4), ("S", 2, 4)]
    assert right_branching(1) == [("S", 0, 1)]
    # on CAT: S 0-6 hit, 1-6, 2-6 (VP's span, unlabelled), 3-6 (PP's span), 4-6, 5-6 after punctuation deletion
    scores = evalb([tree(CAT)], [right_branching(7)])
    assert scores["up"] == pytest.approx(4 / 6) and scores["ur"] == pytest.approx(4 / 5)


# -- preprocessing and reading -------------------------------------------------------------------


def test_preprocessing_removes_traces_empty_phrases_and_function_tags():
    raw = tree("(S (NP-SBJ-1 (-NONE- *-1)) (VP (VBD reported) (SBAR (-NONE- 0) (S (-NONE- *T*-1)))) (. .))")
    assert str(preprocess(raw)) == "(S (VP (VBD reported)) (. .))"
    assert strip_traces(tree("(S (NP (-NONE- *)))")) is None
    bracketed = preprocess(tree("(S (PRN-ADV (-LRB- -LRB-) (NP=2 (NN aside)) (-RRB- -RRB-)))"))
    assert str(bracketed) == "(S (PRN (-LRB- -LRB-) (NP (NN aside)) (-RRB- -RRB-)))"
    assert text_of(bracketed) == "( aside )"


@needs_data
def test_the_treebank_reads_from_the_zip_and_splits_by_file():
    sentences = read_treebank(ZIP)
    assert len(sentences) == 3914
    assert {number for number, _ in sentences} == set(range(1, 200))
    train, evaluation = file_split(sentences)
    assert (len(train), len(evaluation)) == (3396, 518)  # wsj_0001-0159, wsj_0160-0199
    assert train.texts[0] == "Pierre Vinken , 61 years old , will join the board as a nonexecutive director Nov. 29 ."
    assert train.labels[0].startswith("(S (NP (NP (NNP Pierre) (NNP Vinken)) (, ,) (ADJP (NP (CD 61)")
    assert not any("-NONE-" in label or "-SBJ" in label for label in train.labels)
    assert len(train) == sum(n <= 159 for n, _ in sentences) and len(evaluation) == sum(n >= 160 for n, _ in sentences)
    for text, label in zip(train.texts[:200], train.labels[:200]):
        assert len(text.split(" ")) == len(tree(label).leaves())


@needs_data
def test_load_is_seeded_and_draws_each_split_from_its_files():
    task = PTB()
    first, again, other = task.load(50, 20, 0), task.load(50, 20, 0), task.load(50, 20, 1)
    assert first.data_hash() == again.data_hash() != other.data_hash()
    train, evaluation = file_split(read_treebank(ZIP))
    assert set(first.train.texts) <= set(train.texts) and set(first.eval.texts) <= set(evaluation.texts)
    assert len(first.train) == 50 and len(first.eval) == 20


@needs_data
def test_ptb20_holds_every_sentence_of_at_most_20_words_of_each_split():
    train, evaluation = file_split(read_treebank(ZIP))
    data = PTB20().load(PTB20.default_n_train, PTB20.default_n_eval, 0)
    for part, full in ((data.train, train), (data.eval, evaluation)):
        short = sorted(text for text in full.texts if len(text.split()) <= 20)
        assert sorted(part.texts) == short  # all of them (repeated sentences too), nothing longer
    assert (len(data.train), len(data.eval)) == (1401, 204)
    other = PTB20().load(PTB20.default_n_train, PTB20.default_n_eval, 1)
    assert set(other.train.texts) == set(data.train.texts) and other.train.texts != data.train.texts  # reordered
    assert "at most 20 words" in data.notes["eval_split"] and "at most" not in PTB().load(5, 5, 0).notes["eval_split"]


# -- sensitive spans and rewriting ---------------------------------------------------------------


def data_of(*labels: str):
    from bench.core.examples import Examples, TaskData

    array = np.empty(len(labels), dtype=object)
    array[:] = labels
    examples = Examples(tuple(text_of(tree(label)) for label in labels), array)
    return TaskData(examples, examples, "test")


def test_sensitive_spans_are_the_phrases_below_the_root():
    spans = PTB().sensitive_spans(data_of(CAT, IT), "train", 1)
    assert spans == [Span(0, 1, "NP"), Span(0, 1, "NP"), Span(1, 3, "VP"), Span(2, 3, "ADJP")]
    assert PTB().span_fragment(CAT, text_of(tree(CAT)), Span(3, 6, "PP")) == "(PP (IN on) (NP (DT the) (NN mat)))"
    with pytest.raises(BenchError, match="train or eval"):
        PTB().sensitive_spans(data_of(CAT), "dev", 0)


def test_rewrite_label_substitutes_subtrees_and_flattens_generated_words():
    task, text = PTB(), "The cat sat on the mat ."
    edits = [Edit(Span(0, 2, "NP"), ("A", "big", "dog"), "(NP (DT A) (JJ big) (NN dog))"),
             Edit(Span(4, 6, "NP"), ("[MASK]", "[MASK]"))]
    new = task.rewrite_label(CAT, text, edits)
    assert new == ("(S (NP (DT A) (JJ big) (NN dog)) (VP (VBD sat) (PP (IN on) (NP (XX [MASK]) (XX [MASK])))) "
                   "(. .))")
    rewritten, _ = apply_edits(text, edits)
    assert text_of(tree(new)) == rewritten == "A big dog sat on [MASK] [MASK] ."
    # a whole PP replaced by a generated phrase; a bracket word becomes a treebank token in the tree
    assert task.rewrite_label(CAT, text, [Edit(Span(3, 6, "PP"), ("(", "here"))]) == (
        "(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (XX -LRB-) (XX here))) (. .))")
    # of a unary chain the outermost node of the span's kind is replaced: NP over NP over "it"
    assert task.rewrite_label(IT, "it is good", [Edit(Span(0, 1, "NP"), ("this", "idea"))]) == (
        "(S (NP (XX this) (XX idea)) (VP (VBZ is) (ADJP (JJ good))))")
    # the substituted words win over the fragment's own leaves (the text is what the server sees)
    assert task.rewrite_label(IT, "it is good", [Edit(Span(2, 3, "ADJP"), ("fine",), "(ADJP (JJ great))")]) == (
        "(S (NP (NP (PRP it))) (VP (VBZ is) (ADJP (JJ fine))))")


def test_rewrite_label_refuses_what_is_not_a_phrase():
    task, text = PTB(), "The cat sat on the mat ."
    with pytest.raises(BenchError, match="not a NP phrase"):
        task.rewrite_label(CAT, text, [Edit(Span(1, 3, "NP"), ("x",))])
    with pytest.raises(BenchError, match="not 'PER'"):
        task.rewrite_label(CAT, text, [Edit(Span(0, 2, "PER"), ("x",))])
    with pytest.raises(BenchError, match="overlap"):
        task.rewrite_label(CAT, text, [Edit(Span(2, 6, "VP"), ("x",)), Edit(Span(3, 6, "PP"), ("y",))])
    with pytest.raises(BenchError, match="came with"):
        task.rewrite_label(CAT, text, [Edit(Span(0, 2, "NP"), ("x",), "(NP (DT a) (NN b))")])


# -- alignment -----------------------------------------------------------------------------------


def test_gold_spans_move_to_released_pieces_with_joint_unary_labels():
    # words Ann Lee saw it; "Lee" is two pieces, "saw" released none (an [UNK] dropped)
    alignment = Alignment(4, np.array([0, 1, 1, 3]))
    gold = tree("(S (NP (NNP Ann) (NNP Lee)) (VP (VBD saw) (NP (PRP it))))")
    assert sorted(joint_spans(gold, alignment)) == [(0, 3, "NP"), (0, 4, "S"), (3, 4, "VP+NP")]
    predicted = [(0, 4, "S"), (0, 3, "NP"), (1, 2, "NP"), (3, 4, "VP+NP")]  # 1-2 ends inside "Lee": dropped
    assert word_brackets(predicted, alignment) == [("S", 0, 4), ("NP", 0, 2), ("VP", 3, 4), ("NP", 3, 4)]
    # words cut off by truncation: the bracket over every released piece covers the whole sentence
    assert word_brackets([(0, 3, "S"), (1, 3, "VP")], Alignment(5, np.array([0, 1, 2]))) == [
        ("S", 0, 5), ("VP", 1, 3)]
    with pytest.raises(BenchError, match="released pieces"):
        word_brackets([(0, 5, "S")], alignment)


@needs_data
def test_gold_through_the_released_pieces_and_back_scores_one(encoder_like):
    from bench.privacy.mechanisms import client_token_ids

    task = PTB()
    data = task.load(300, 2, 0)
    texts = list(data.train.texts)
    spans = task.token_labels(texts, data.train.labels, encoder_like)
    released = client_token_ids(encoder_like, texts)
    assert all(max(b for _, b, _ in s) == len(r) for s, r in zip(spans, released))  # the root covers every piece
    back = task.task_predictions(list(spans), texts, encoder_like)
    scores = task.score(back, data.train.labels)
    assert scores["lf"] > 0.995 and scores["uf"] > 0.995  # only words without a released piece can differ


@needs_data
def test_rewritten_training_examples_align_like_original_ones(encoder_like):
    """What a span defense does on real trees: every NP (inner ones win), generated words or another example's
    phrase in its place; the relabelled tree matches the rewritten text and its spans reach the released pieces."""
    from bench.core.spans import non_overlapping

    task = PTB()
    data = task.load(40, 2, 0)
    texts, labels = [], []
    for index, (text, label) in enumerate(zip(data.train.texts, data.train.labels)):
        spans = non_overlapping([s for s in task.sensitive_spans(data, "train", index) if s.kind == "NP"])
        donor = task.sensitive_spans(data, "train", (index + 1) % 40)
        donor = next(s for s in donor if s.kind == "NP")
        fragment = task.span_fragment(data.train.labels[(index + 1) % 40], "", donor)
        words = tuple(text_of(tree(fragment)).split(" "))
        edits = [Edit(s, words, fragment) if k % 2 else Edit(s, ("new",) * (s.end - s.start)) for k, s in
                 enumerate(spans)]
        new_text, _ = apply_edits(text, edits)
        new_label = task.rewrite_label(label, text, edits)
        assert text_of(tree(new_label)) == new_text
        texts.append(new_text)
        labels.append(new_label)
    spans = task.token_labels(texts, np.array(labels, dtype=object), encoder_like)
    back = task.task_predictions(list(spans), texts, encoder_like)
    assert task.score(back, np.array(labels, dtype=object))["lf"] > 0.99


@pytest.fixture(scope="module")
def encoder_like():
    """minilm's (fast) WordPiece tokenizer with the encoder's token_ids, without loading the model."""
    from transformers import AutoTokenizer

    from bench.models.encoders import Encoder, locate

    class Shim:
        max_length = 128
        tokenizer = AutoTokenizer.from_pretrained(locate("minilm")[0])
        token_ids = Encoder.token_ids

    return Shim()


@pytest.fixture
def one_thread():
    """One torch thread: the toy model's tiny steps thrash with two on shared cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- decoding ------------------------------------------------------------------------------------


def test_cky_finds_the_best_binary_tree():
    margins = np.zeros((5, 5))
    margins[1, 4], margins[2, 4], margins[0, 2] = 3.0, 1.0, 2.5  # 1-4 and 0-2 cross: 1-4 + 2-4 wins (4 > 2.5)
    spans = set(cky(margins))
    assert {(0, 4), (1, 4), (2, 4)} <= spans and (0, 2) not in spans
    assert len(spans) == 2 * 4 - 1 and all((i, i + 1) in spans for i in range(4))
    margins[0, 2] = 4.5  # now 0-2 (+ 2-4) beats 1-4 + 2-4
    assert {(0, 2), (2, 4)} <= set(cky(margins))
    assert cky(np.zeros((1, 1))) == [] and cky(np.zeros((2, 2))) == [(0, 1)]


def test_phrases_give_tree_positions_in_preorder():
    assert [(s, e, label) for s, e, label, _ in phrases(tree(IT))] == [
        (0, 3, "S"), (0, 1, "NP"), (0, 1, "NP"), (1, 3, "VP"), (2, 3, "ADJP")]
    assert [p for *_, p in phrases(tree(IT))] == [(), (0,), (0, 0), (1,), (1, 1)]


def test_chart_parser_server_learns_a_toy_grammar(one_thread):
    """Token 1 starts a two-token NP, and every sentence is an S: the server learns both from 40 sentences."""
    from bench.models.chart import ChartParserServer
    from bench.models.training import TrainingConfig

    table = np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32)

    class Encoder:
        dim = 16

        def token_states(self, items):
            return [table[np.asarray(item, dtype=np.int64)] for item in items]

    rng = np.random.default_rng(1)
    released, labels = [], []
    for _ in range(40):
        ids = rng.integers(2, 5, size=int(rng.integers(4, 9)))
        start = int(rng.integers(0, len(ids) - 1))
        ids[start] = 1
        released.append(ids)
        labels.append([(0, len(ids), "S"), (start, start + 2, "NP")])
    server = ChartParserServer(TrainingConfig(epochs=100, batch_size=8, lr=1e-2, dropout=0.0), seed=0, lstm=16,
                               hidden=16)
    server.encoder = Encoder()
    server.fit_tokens(released, labels)
    assert server.labels == ("<none>", "NP", "S")
    predicted = server.predict_tokens(released[:10] + [np.zeros(0, dtype=np.int64)])
    assert predicted[-1] == []  # a sentence with no released piece has no parse
    hits = sum(set(gold) <= set(p) for gold, p in zip(labels[:10], predicted))
    assert hits >= 8
    assert all((0, len(ids), "S") in p for ids, p in zip(released[:10], predicted))
