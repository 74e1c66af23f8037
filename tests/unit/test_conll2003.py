"""CoNLL-2003: reading, IOB1 -> IOB2, alignment with minilm's WordPieces both ways, the span scorer."""

from __future__ import annotations

import numpy as np
import pytest

from bench import BenchError
from bench.core.examples import data_dir
from bench.tasks.conll2003 import (
    TAG_ID,
    TAGS,
    Alignment,
    CoNLL2003,
    align,
    entities,
    iob1_to_iob2,
    read_conll,
    sentence_examples,
    span_scores,
)

FOLDER = data_dir() / "conll2003"
needs_data = pytest.mark.skipif(not (FOLDER / "eng.train").is_file(), reason="CoNLL-2003 files not in BENCH_DATA_DIR")


def ids(*tags: str) -> list[int]:
    return [TAG_ID[t] for t in tags]


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


def test_read_conll_splits_documents_and_sentences(tmp_path):
    path = tmp_path / "eng.sample"
    path.write_text("-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\nPeter NNP I-NP I-PER\n"
                    "Blackburn NNP I-NP I-PER\n\n-DOCSTART- -X- O O\n\nBRUSSELS NNP I-NP I-LOC\n", encoding="utf-8")
    sentences = read_conll(path)
    assert sentences == [[("EU", "I-ORG"), ("rejects", "O")], [("Peter", "I-PER"), ("Blackburn", "I-PER")],
                         [("BRUSSELS", "I-LOC")]]
    examples = sentence_examples(sentences, path)
    assert examples.texts == ("EU rejects", "Peter Blackburn", "BRUSSELS")
    assert [list(x) for x in examples.labels] == [ids("B-ORG", "O"), ids("B-PER", "I-PER"), ids("B-LOC")]


def test_an_unknown_tag_is_refused(tmp_path):
    path = tmp_path / "bad"
    path.write_text("EU NNP I-NP I-XYZ\n", encoding="utf-8")
    with pytest.raises(BenchError, match="not a CoNLL-2003 NER tag"):
        sentence_examples(read_conll(path), path)


def test_iob1_to_iob2():
    assert iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC"]) == ["B-PER", "I-PER", "O", "B-LOC"]
    # IOB1's B- separates two adjacent entities of one type; a type change starts a new entity
    assert iob1_to_iob2(["I-PER", "B-PER", "I-PER", "I-ORG"]) == ["B-PER", "B-PER", "I-PER", "B-ORG"]
    assert iob1_to_iob2(["O", "O"]) == ["O", "O"]


@needs_data
def test_real_files_read_as_iob2():
    train = read_conll(FOLDER / "eng.train")
    assert len(train) == 14041 and sum(len(s) for s in train) == 203621  # the shared task's counts
    assert train[0][0] == ("EU", "I-ORG")
    examples = sentence_examples(train[:50], FOLDER / "eng.train")
    for labels in examples.labels:  # IOB2: an I- tag always continues an entity of its type
        names = [TAGS[t] for t in labels]
        for before, tag in zip(["O"] + names, names):
            assert not tag.startswith("I-") or before[2:] == tag[2:]


def test_alignment_both_ways_on_hand_made_pieces():
    alignment = Alignment(4, np.array([0, 1, 1, 1, 3]))  # word 2 released no piece (an [UNK] dropped)
    word_tags = ids("O", "B-ORG", "B-LOC", "I-LOC")
    assert [TAGS[t] for t in alignment.piece_tags(word_tags)] == ["O", "B-ORG", "I-ORG", "I-ORG", "I-LOC"]
    predicted = ids("O", "B-PER", "O", "I-PER", "B-MISC")
    assert [TAGS[t] for t in alignment.word_tags(predicted)] == ["O", "B-PER", "O", "B-MISC"]
    with pytest.raises(BenchError, match="released pieces"):
        alignment.word_tags(predicted[:3])


@needs_data
def test_alignment_matches_what_the_client_releases(encoder_like):
    from bench.privacy.mechanisms import client_token_ids

    examples = sentence_examples(read_conll(FOLDER / "eng.testa")[:300], FOLDER / "eng.testa")
    texts = list(examples.texts)
    aligned = align(texts, encoder_like.tokenizer, encoder_like.max_length)
    released = client_token_ids(encoder_like, texts)
    assert [len(a.word_of) for a in aligned] == [len(r) for r in released]
    task = CoNLL2003()
    pieces = task.token_labels(texts, examples.labels, encoder_like)
    assert [len(p) for p in pieces] == [len(r) for r in released]
    # gold through the pieces and back gives gold again, so a perfect tagger scores 1
    back = task.task_predictions(list(pieces), texts, encoder_like)
    assert all(np.array_equal(b, g) for b, g in zip(back, examples.labels))
    assert task.score(back, examples.labels)["lf"] == 1.0
    # a word split into pieces: every piece carries its word's entity; B- only on the first
    vocab = encoder_like.tokenizer.convert_ids_to_tokens
    for text, a, p, r in zip(texts, aligned, pieces, released):
        if len(set(a.word_of.tolist())) < len(a.word_of) and any(TAGS[t].startswith("B-") for t in p):
            tokens = vocab(r.tolist())
            later = [i for i in range(1, len(r)) if a.word_of[i] == a.word_of[i - 1]]
            assert all(tokens[i].startswith("##") or not text.split(" ")[a.word_of[i]].isalnum() for i in later)
            assert not any(TAGS[p[i]].startswith("B-") for i in later)
            break
    else:
        pytest.fail("no multi-piece entity word in the sample")


def test_truncation_and_unknown_words_are_predicted_o(encoder_like):
    text = " ".join(["Paris"] * 200)  # 200 words, cut to max_length - 2 = 126 pieces
    (alignment,) = align([text], encoder_like.tokenizer, encoder_like.max_length)
    assert alignment.words == 200 and len(alignment.word_of) == 126
    tags = alignment.word_tags(np.full(126, TAG_ID["B-LOC"]))
    assert (tags[:126] == TAG_ID["B-LOC"]).all() and (tags[126:] == TAG_ID["O"]).all()
    (unknown,) = align(["Hello \U0001F600 world"], encoder_like.tokenizer, encoder_like.max_length)
    assert unknown.words == 3 and unknown.word_of.tolist() == [0, 2]  # the emoji is [UNK], which is never released
    assert unknown.word_tags(ids("B-PER", "B-LOC")).tolist() == ids("B-PER", "O", "B-LOC")


def test_span_scores_on_hand_made_sequences():
    gold = [ids("B-PER", "I-PER", "O", "B-LOC"), ids("B-ORG", "O")]
    perfect = span_scores(gold, gold)
    assert perfect == {name: 1.0 for name in ("lf", "lp", "lr", "uf", "up", "ur")}
    # sentence 1: PER right, LOC predicted as ORG (boundary right, type wrong); sentence 2: ORG missed
    predicted = [ids("B-PER", "I-PER", "O", "B-ORG"), ids("O", "O")]
    scores = span_scores(predicted, gold)
    assert scores["lp"] == pytest.approx(1 / 2) and scores["lr"] == pytest.approx(1 / 3)
    assert scores["lf"] == pytest.approx(2 * (1 / 2) * (1 / 3) / (1 / 2 + 1 / 3))
    assert scores["up"] == pytest.approx(1.0) and scores["ur"] == pytest.approx(2 / 3)
    assert scores["uf"] == pytest.approx(0.8)
    # a truncated span (wrong end) counts as wrong both ways
    cut = span_scores([ids("B-PER", "O", "O", "O")], [ids("B-PER", "I-PER", "O", "O")])
    assert cut["lf"] == 0.0 and cut["uf"] == 0.0
    nothing = span_scores([ids("O", "O")], [ids("B-PER", "O")])
    assert nothing["lp"] == 0.0 and nothing["lf"] == 0.0


def test_sensitive_spans_are_the_gold_entities():
    assert entities(ids("B-PER", "I-PER", "O", "B-LOC", "B-LOC")) == [(0, 2, "PER"), (3, 4, "LOC"), (4, 5, "LOC")]
    from bench import Examples, TaskData

    labels = np.empty(1, dtype=object)
    labels[:] = [ids("O", "B-ORG", "I-ORG")]
    data = TaskData(Examples(("the European Commission",), labels), Examples(("x",), labels), "test")
    assert CoNLL2003().sensitive_spans(data, "train", 0) == [(1, 3, "ORG", 0)]
    with pytest.raises(BenchError, match="split"):
        CoNLL2003().sensitive_spans(data, "test", 0)


@needs_data
def test_load_is_seeded_and_sized():
    task = CoNLL2003()
    first, again, other = task.load(50, 20, 0), task.load(50, 20, 0), task.load(50, 20, 1)
    assert len(first.train) == 50 and len(first.eval) == 20
    assert first.data_hash() == again.data_hash() != other.data_hash()
    assert all(len(t.split(" ")) == len(lab) for t, lab in zip(first.train.texts, first.train.labels))


def test_evaluate_on_is_declared_and_checked():
    from bench import TokenTask

    assert CoNLL2003.evaluate_on == "original" and CoNLL2003.protocols == ("tokens",)
    from bench.tasks.glue import SST2

    assert SST2.evaluate_on == "released"  # GLUE is scored on privatized evaluation data, as before

    class Bad(TokenTask):
        registry_name = "bad"
        metrics = CoNLL2003.metrics
        protocols = ("representations", "tokens")
        evaluate_on = "original"

    with pytest.raises(BenchError, match="only the token protocol"):
        Bad.check_declarations()
    Bad.protocols, Bad.evaluate_on = ("tokens",), "plain"
    with pytest.raises(BenchError, match="expected released or original"):
        Bad.check_declarations()


def test_a_rewritten_entity_keeps_its_kind_over_its_new_words():
    from bench.core.spans import Edit, Span, apply_edits

    text = "Peter Blackburn visited EU offices"
    label = ids("B-PER", "I-PER", "O", "B-ORG", "O")
    edits = [Edit(Span(0, 2, "PER"), ("[MASK]",) * 3), Edit(Span(3, 4, "ORG"), ("United", "Nations"))]
    new_text, placed = apply_edits(text, edits)
    assert new_text == "[MASK] [MASK] [MASK] visited United Nations offices"
    assert placed == [Span(0, 3, "PER"), Span(4, 6, "ORG")]
    assert CoNLL2003().rewrite_label(label, text, edits) == ids("B-PER", "I-PER", "I-PER", "O", "B-ORG", "I-ORG", "O")
    assert CoNLL2003().span_fragment(label, text, Span(0, 2, "PER")) == ids("B-PER", "I-PER")
