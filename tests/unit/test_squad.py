"""SQuAD v1.1: the official normalisation and scores, reading and the article split, answer offsets to words, the
context window, WordPiece alignment, spaCy entities as word spans, and relabelling rewritten text."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from bench import BenchError, Examples, TaskData
from bench.core.examples import data_dir
from bench.core.spans import Edit, Span, apply_edits
from bench.tasks.squad import (
    FILE,
    TRAIN_ARTICLES,
    WINDOW,
    Question,
    SQuAD,
    choose_window,
    covered_words,
    entity_words,
    exact_match,
    normalize_answer,
    read_squad,
    split_articles,
    squad_scores,
    token_f1,
    window_starts,
    word_offsets,
)

REAL = data_dir() / "squad" / FILE
needs_real = pytest.mark.skipif(not REAL.is_file(), reason="SQuAD v1.1 dev file missing")


# -- the official v1.1 scores (cases worked by hand with the official script's definitions) ---------------


@pytest.mark.parametrize("raw, normal", [
    ("The Denver Broncos!", "denver broncos"),
    ("  an   apple ", "apple"),
    ("A", ""),
    ("theatre of the absurd", "theatre of absurd"),  # articles only as whole words
    ("U.S.", "us"),  # punctuation removed, not replaced by a space
    ("boom-and-bust", "boomandbust"),
    ("24–10", "24–10"),  # the en dash is not ASCII punctuation: the official script keeps it
    ("Denver,\tBroncos\n", "denver broncos"),
])
def test_normalisation(raw, normal):
    assert normalize_answer(raw) == normal


def test_exact_match_and_f1_on_hand_made_pairs():
    assert exact_match("the Denver Broncos.", "Denver Broncos") == 1.0
    assert exact_match("Broncos", "Denver Broncos") == 0.0
    assert token_f1("Broncos", "Denver Broncos") == pytest.approx(2 / 3)  # P 1, R 1/2
    assert token_f1("the Denver Broncos won", "Denver Broncos") == pytest.approx(0.8)  # P 2/3, R 1
    assert token_f1("cat cat", "cat") == pytest.approx(2 / 3)  # a repeated token counts once per gold occurrence
    assert token_f1("Carolina", "Denver Broncos") == 0.0
    assert token_f1("", "") == 0.0  # v1.1: no common token is 0, even for two empty answers
    assert token_f1("the", "a") == 0.0


def test_scores_take_the_best_gold_answer_and_average_questions():
    scores = squad_scores(["Broncos", "Santa Clara", "nothing"],
                          [["Denver Broncos", "Broncos"], ["Santa Clara, California"], ["Levi's Stadium"]])
    assert scores["em"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx((1.0 + 0.8 + 0.0) / 3)  # Santa Clara: P 1, R 2/3
    with pytest.raises(BenchError):
        squad_scores(["a"], [])


# -- reading, offsets and the split -----------------------------------------------------------------------


def squad_json(articles: int) -> dict:
    """A small SQuAD-format file: each article one paragraph with two questions."""
    data = []
    for number in range(articles):
        context = f"Article {number} says Super Bowl 50 was played in Santa Clara, California on February 7."
        data.append({"title": f"A{number}", "paragraphs": [{"context": context, "qas": [
            {"id": f"{number}-a", "question": "Where  was Super Bowl 50 played? ",
             "answers": [{"answer_start": context.index("Santa"), "text": "Santa Clara"},
                         {"answer_start": context.index("Clara"), "text": "Clara"}]},
            {"id": f"{number}-b", "question": "When was it played?",
             "answers": [{"answer_start": context.index("February"), "text": "February 7"}]},
        ]}]})
    return {"version": "1.1", "data": data}


def test_answer_offsets_become_the_words_they_overlap(tmp_path):
    path = tmp_path / "squad.json.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("dev-v1.1.json", json.dumps(squad_json(2)))
    articles = read_squad(path)
    assert [len(a) for a in articles] == [2, 2]
    first, second = articles[0]
    assert first.question == "Where was Super Bowl 50 played?"  # whitespace collapsed to single spaces
    assert first.words[first.spans[0][0]:first.spans[0][1]] == ("Santa", "Clara,")
    assert first.words[first.spans[1][0]:first.spans[1][1]] == ("Clara,",)  # a word counts when partly covered
    assert second.words[second.spans[0][0]:second.spans[0][1]] == ("February", "7.")
    words, starts, ends = word_offsets("a  bc\nd")
    assert words == ["a", "bc", "d"] and starts.tolist() == [0, 3, 6] and ends.tolist() == [1, 5, 7]
    assert covered_words(starts, ends, 4, 7) == (1, 3)
    with pytest.raises(BenchError):
        covered_words(starts, ends, 1, 3)  # only the spaces between words


def test_a_file_that_is_not_squad_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(BenchError, match="not a SQuAD JSON file"):
        read_squad(bad)


def test_split_by_article_is_disjoint_and_needs_enough_articles(tmp_path, monkeypatch):
    articles = [[Question("q", ("w",), ("w",), ((0, 1),), number, f"{number}")] for number in range(40)]
    train, evaluation = split_articles(articles)
    assert {q.article for q in train} == set(range(TRAIN_ARTICLES))
    assert {q.article for q in evaluation} == set(range(TRAIN_ARTICLES, 40))
    with pytest.raises(BenchError, match="articles"):
        split_articles(articles[:TRAIN_ARTICLES])
    (tmp_path / "squad").mkdir()
    (tmp_path / "squad" / FILE).write_bytes(b"")
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "elsewhere"))
    with pytest.raises(BenchError, match="squad data is missing"):
        SQuAD().load(4, 4, 0)


@needs_real
def test_real_split_is_by_article_deterministic_and_seeded():
    train, evaluation = split_articles(read_squad(REAL))
    assert (len(train), len(evaluation)) == (8123, 2447)
    assert not {q.words for q in train} & {q.words for q in evaluation}  # no paragraph on both sides
    assert max(q.article for q in train) < min(q.article for q in evaluation)
    task = SQuAD()
    one, again, other = task.load(50, 30, 0), task.load(50, 30, 0), task.load(50, 30, 1)
    assert one.data_hash() == again.data_hash() != other.data_hash()
    assert (len(one.train), len(one.eval)) == (50, 30)
    eval_ids = {label["id"] for label in one.eval.labels}
    pool_ids = {q.id for q in evaluation}
    assert eval_ids <= pool_ids and not {label["id"] for label in one.train.labels} & pool_ids
    for (question, window), label in zip(one.train.texts, one.train.labels):
        words = window.split(" ")
        assert "  " not in question and len(words) <= WINDOW
        start, end = label["spans"][0]  # a training window always holds its first answer
        assert normalize_answer(" ".join(words[start:end])) == normalize_answer(label["answers"][0]) or \
            normalize_answer(label["answers"][0]) in normalize_answer(" ".join(words[start:end]))
    assert 0.8 < one.notes["eval_coverage"] <= 1.0


# -- the client's window ----------------------------------------------------------------------------------


def test_window_starts_cover_the_end_and_the_question_picks_the_window():
    assert window_starts(50, 80, 20) == [0]
    assert window_starts(130, 80, 20) == [0, 20, 40, 50]
    words = tuple(f"w{i}" for i in range(200))
    words = words[:150] + ("Clara",) + words[151:]
    question = Question("Where is Clara ?", words, ("w10",), ((10, 11),), 0, "x")
    start = choose_window(question, 80, 20)
    assert start <= 150 < start + 80
    assert choose_window(question, 80, 20, answer=(10, 11)) == 0  # training: only windows holding the answer


# -- WordPiece alignment ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def encoder_like():
    """minilm's (fast) WordPiece tokenizer, without loading the model."""
    from transformers import AutoTokenizer

    from bench.models.encoders import Encoder, locate

    class Shim:
        max_length = 128
        tokenizer = AutoTokenizer.from_pretrained(locate("minilm")[0])
        token_ids = Encoder.token_ids

    return Shim()


def test_answer_pieces_and_predictions_map_back_to_the_answer_words(encoder_like):
    from bench.privacy.mechanisms import client_token_ids

    texts = [("Who won?", "The Denver Broncos defeated the Carolina Panthers 24–10 at Levi's Stadium."),
             ("Who lost?", "nothing here")]
    labels = [{"answers": ["Carolina Panthers"], "spans": [[5, 7]]}, {"answers": ["x"], "spans": [None]}]
    task = SQuAD()
    pieces = task.token_labels(texts, labels, encoder_like)
    released = client_token_ids(encoder_like, [texts[0][1]])[0]
    tokens = encoder_like.tokenizer.convert_ids_to_tokens(released[pieces[0, 0]:pieces[0, 1] + 1].tolist())
    assert tokens == ["carolina", "panthers"]
    assert pieces[1].tolist() == [-1, -1]
    assert task.task_predictions(pieces, texts, encoder_like) == ["Carolina Panthers", ""]
    # a span inside a word's pieces predicts the whole word
    levis = [i for i, t in enumerate(encoder_like.tokenizer.convert_ids_to_tokens(released.tolist())) if t == "levi"]
    assert task.task_predictions(np.array([[levis[0], levis[0]]]), texts[:1], encoder_like) == ["Levi's"]


def test_an_answer_cut_off_by_truncation_is_not_a_training_target(encoder_like):
    window = " ".join(["word"] * 200 + ["Clara"])
    labels = [{"answers": ["Clara"], "spans": [[200, 201]]}]
    assert SQuAD().token_labels([("Who?", window)], labels, encoder_like).tolist() == [[-1, -1]]


# -- sensitive spans --------------------------------------------------------------------------------------


def test_spacy_character_spans_become_the_words_they_overlap():
    text = "Super Bowl 50 was played at Levi's Stadium in Santa Clara, California (USA)."
    entities = [(28, 42, "FAC"), (46, 57, "GPE"), (59, 69, "GPE"), (71, 74, "GPE")]
    assert entity_words(text, entities) == [(6, 8, "FAC"), (9, 11, "GPE"), (11, 12, "GPE"), (12, 13, "GPE")]
    assert entity_words(text, [(0, 10, "EVENT"), (6, 13, "EVENT")]) == [(0, 2, "EVENT")]  # overlaps keep the first


def test_sensitive_spans_are_spacy_entities_of_the_context_and_cached(tmp_path, monkeypatch):
    import bench.tasks.squad as squad

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    texts = (("Where?", "Super Bowl 50 was played at Levi's Stadium in Santa Clara , California ."),
             ("Who?", "Peyton Manning was the quarterback of the Denver Broncos ."))
    data = TaskData(Examples(texts, np.array([{}, {}], dtype=object)), Examples(texts[:1], np.array([{}])), "test")
    task = SQuAD()
    spans = task.sensitive_spans(data, "train", 0)
    assert all(s.segment == 1 and s.kind in task.span_kinds for s in spans)
    assert Span(9, 11, "GPE", 1) in spans and Span(12, 13, "GPE", 1) in spans
    assert [s.words(texts[1]) for s in task.sensitive_spans(data, "train", 1) if s.kind == "PERSON"] == \
        [["Peyton", "Manning"]]
    assert len(list(tmp_path.glob("spacy/*/*/*.json"))) == 2

    class Refuses:  # a second call reads the cache and never runs the pipeline
        meta = squad._spacy().meta

        def pipe(self, texts, batch_size):
            assert not list(texts)
            return iter(())

    monkeypatch.setattr(squad, "_spacy", lambda: Refuses())
    assert squad.spacy_entities([texts[0][1]])[0] == [(s.start, s.end, s.kind) for s in spans]
    with pytest.raises(BenchError):
        task.sensitive_spans(data, "test", 0)


# -- relabelling rewritten text ---------------------------------------------------------------------------

TEXT = ("Who won ?", "In 2016 the Denver Broncos beat the Carolina Panthers in Santa Clara .")
LABEL = {"answers": ["Denver Broncos", "the Denver Broncos", "Santa Clara, California"],
         "spans": [[3, 5], [2, 5], None], "id": "q"}


def rewrite(*edits):
    new = SQuAD().rewrite_label(LABEL, TEXT, list(edits))
    text, _ = apply_edits(TEXT, list(edits))
    return new, text[1].split(" ")


def test_an_edit_before_the_answer_moves_it_and_one_after_leaves_it():
    new, words = rewrite(Edit(Span(1, 2, "DATE", 1), ("last", "year")), Edit(Span(10, 12, "GPE", 1), ("Houston",)))
    assert new["spans"] == [[4, 6], [3, 6], None]
    assert new["answers"] == LABEL["answers"] and new["id"] == "q"
    assert words[4:6] == ["Denver", "Broncos"]


def test_an_edit_of_the_answer_rewrites_the_gold_answer():
    new, words = rewrite(Edit(Span(3, 5, "ORG", 1), ("New", "England", "Patriots")))
    assert new["spans"] == [[3, 6], [2, 6], None]
    assert new["answers"][:2] == ["New England Patriots", "the New England Patriots"]
    assert new["answers"][2] == LABEL["answers"][2]  # outside the window: nothing to rewrite


def test_a_partly_overlapping_edit_extends_the_answer_over_its_replacement():
    new, words = rewrite(Edit(Span(2, 4, "ORG", 1), ("a", "Boston", "team")))
    assert new["spans"] == [[2, 6], [2, 6], None]
    assert new["answers"][:2] == ["a Boston team Broncos"] * 2
    new, _ = rewrite(Edit(Span(4, 7, "ORG", 1), ("[MASK]",)))
    assert new["spans"] == [[3, 5], [2, 5], None]
    assert new["answers"][:2] == ["Denver [MASK]", "the Denver [MASK]"]


def test_question_edits_move_nothing_and_bad_edits_are_refused():
    new, _ = rewrite(Edit(Span(0, 1, "PERSON", 0), ("Whom",)))
    assert new == LABEL
    with pytest.raises(BenchError):
        SQuAD().rewrite_label(LABEL, TEXT, [Edit(Span(3, 5, "ORG", 1), ("x",)), Edit(Span(4, 6, "ORG", 1), ("y",))])
