"""NDD (bench.models.ndd): the batched scorer equals the plain loop, and its definition's edge cases.

Plumbing on a tiny random model: a 2-layer, 32-dimensional BertForMaskedLM with random weights (a wide
initialisation so that masked distributions differ clearly between sentences; float64 so that the 1e-6
comparison tests the bookkeeping, not float32 summation order) and minilm's WordPiece tokenizer, wrapped
like ``MaskedLM``. The figures say nothing about semantics, only that the batching,
caching, alignment and weighting compute Eq. 6-12 exactly.
"""

import numpy as np
import pytest

from bench import BenchError
from bench.models.ndd import OriginalDistributions, ndd_scores, ndd_scores_loop, ndd_select, unchanged_positions

from .tiny_models import tiny_masked_lm


@pytest.fixture(scope="module")
def tiny_mlm():
    return tiny_masked_lm(max_positions=64, float64=True)


def ids(mlm, text):
    return np.asarray(mlm.tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)


CASES = [  # sentence, span (token indices, half-open), candidate texts
    ("peter blackburn visited the european commission in brussels on thursday .", (0, 2),
     ["john smith", "a", "the big red fire engine company", "peter blackburn"]),
    ("the european commission said on thursday it disagreed with german advice .", (1, 3),
     ["un", "world health organisation of nations", "european commission", "bank"]),
    ("rain fell over the hills of northern england", (6, 8), ["wales", "the south of france", "x"]),
    ("germany won", (0, 2), ["france", "the netherlands and belgium"]),  # the whole sentence: NDD = 0
    ("he met them in paris yesterday", (4, 5), ["new york city", "rome", ""]),  # "" = deletion
]


@pytest.mark.parametrize("sentence, span, texts", CASES)
def test_batched_equals_plain_loop(tiny_mlm, sentence, span, texts):
    original = ids(tiny_mlm, sentence)
    candidates = [ids(tiny_mlm, t) for t in texts]
    assert span[1] <= len(original)
    loop = ndd_scores_loop(tiny_mlm, original, span, candidates, mu=0.8)
    for batch_size in (3, 64):  # 3: chunks that cut through candidates; 64: all in one pass
        batched = ndd_scores(tiny_mlm, original, span, candidates, mu=0.8, batch_size=batch_size)
        np.testing.assert_allclose(batched, loop, rtol=0, atol=1e-6)
    if span[1] - span[0] < len(original):
        assert np.max(loop) > 1e-2  # the model is not flat: the comparison can tell positions apart
        assert np.ptp(loop) > 1e-3


SELECTION_CASES = CASES + [
    ("the european commission said on thursday it disagreed with german advice to consumers", (4, 6),
     ["a", "rome", "the world bank", "john smith", "it", "new york city", "un", "on thursday"]),
    ("peter blackburn visited the european commission in brussels on thursday .", (7, 8),
     ["rome", "rome", "brussels", "the south of france", "paris", "", "x", "bank"]),  # a duplicate, the span itself
]


@pytest.mark.parametrize("first_round", [1, 4])
def test_selection_keeps_the_argmin_of_every_score_and_runs_fewer_copies(tiny_mlm, first_round):
    # dropping a candidate whose partial sum (a lower bound: every KL >= 0) exceeds a complete score never drops
    # the argmin; candidate 0 is always scored whole (its score is recorded as what selection without NDD keeps)
    run, exhaustive = 0, 0
    for sentence, span, texts in SELECTION_CASES:
        original = ids(tiny_mlm, sentence)
        candidates = [ids(tiny_mlm, t) for t in texts]
        for mu in (0.5, 0.9):
            scores = ndd_scores(tiny_mlm, original, span, candidates, mu)
            for batch_size in (3, 64):
                choice = ndd_select(tiny_mlm, original, span, candidates, mu, batch_size=batch_size,
                                    first_round=first_round)
                assert choice.index == int(np.argmin(scores))  # the first of equal minima, as argmin
                assert choice.score == pytest.approx(scores.min(), rel=1e-12, abs=1e-12)
                assert choice.first == pytest.approx(scores[0], rel=1e-12, abs=1e-12)
                assert choice.copies <= choice.copies_exhaustive
                run, exhaustive = run + choice.copies, exhaustive + choice.copies_exhaustive
    assert run < exhaustive  # some candidate was dropped before all its positions ran


def test_selection_checks_its_round_size(tiny_mlm):
    original = ids(tiny_mlm, "he met them in paris yesterday")
    with pytest.raises(BenchError, match="first_round must be at least 1"):
        ndd_select(tiny_mlm, original, (4, 5), [ids(tiny_mlm, "rome")], 0.9, first_round=0)


def test_cache_is_reused_across_spans_and_checked(tiny_mlm):
    original = ids(tiny_mlm, "the european commission said on thursday it disagreed with german advice .")
    cache = OriginalDistributions(tiny_mlm, original, batch_size=4)
    assert cache.log_probs.shape == (len(original), len(tiny_mlm.tokenizer))
    for span in [(0, 1), (1, 3), (len(original) - 1, len(original))]:
        candidates = [ids(tiny_mlm, "the world bank"), ids(tiny_mlm, "it")]
        np.testing.assert_allclose(ndd_scores(tiny_mlm, original, span, candidates, 0.5, original=cache),
                                   ndd_scores_loop(tiny_mlm, original, span, candidates, 0.5), rtol=0, atol=1e-6)
    with pytest.raises(BenchError, match="different sentence"):
        ndd_scores(tiny_mlm, original[:-1], (0, 1), [original[:1]], 0.5, original=cache)


def test_identical_replacement_scores_zero(tiny_mlm):
    original = ids(tiny_mlm, "peter blackburn visited the european commission in brussels")
    for span in [(0, 2), (3, 6), (7, 8)]:
        same = original[span[0]: span[1]]
        scores = ndd_scores(tiny_mlm, original, span, [same, ids(tiny_mlm, "somebody else entirely")], 0.9)
        assert abs(scores[0]) < 1e-9 and scores[1] > 1e-3


def test_weights_follow_mu(tiny_mlm):
    positions, distance, weight = unchanged_positions(8, 3, 5, mu=0.5)
    assert positions.tolist() == [0, 1, 2, 5, 6, 7]
    assert distance.tolist() == [3, 2, 1, 1, 2, 3]  # min(|k - i|, |k - j|), i = 3, j = 4
    np.testing.assert_allclose(weight, 0.5 ** distance)
    assert np.all(unchanged_positions(8, 3, 5, mu=1.0)[2] == 1.0)  # mu = 1: equal weights
    kept = unchanged_positions(8, 3, 5, mu=0.5, tol=0.2)
    assert kept[0].tolist() == [1, 2, 5, 6]  # weights 0.125 < tol left out

    original = ids(tiny_mlm, "the european commission said on thursday it disagreed with german advice .")
    span, candidates = (1, 3), [ids(tiny_mlm, "world health organisation")]
    total = ndd_scores(tiny_mlm, original, span, candidates, 1.0)[0]  # mu = 1: the plain sum of the KLs
    half = ndd_scores(tiny_mlm, original, span, candidates, 0.5)[0]
    small = ndd_scores(tiny_mlm, original, span, candidates, 1e-3)[0]
    assert total > half > small > 0
    # per distance d the KLs are scaled by mu ** d: keep d = 1 only (via tol) under two mu, compare
    adjacent = ndd_scores(tiny_mlm, original, span, candidates, 0.5, tol=0.5)[0] / 0.5
    assert ndd_scores(tiny_mlm, original, span, candidates, 0.9, tol=0.85)[0] / 0.9 == pytest.approx(adjacent)
    two = ndd_scores(tiny_mlm, original, span, candidates, 0.5, tol=0.25)[0]  # d <= 2
    second = (two - 0.5 * adjacent) / 0.25
    assert ndd_scores(tiny_mlm, original, span, candidates, 0.8, tol=0.6)[0] == \
        pytest.approx(0.8 * adjacent + 0.64 * second)
    assert two <= half + 1e-12  # skipping (tol > 0) gives a lower bound of the exact value


@pytest.mark.parametrize("call, message", [
    (lambda m, o: ndd_scores(m, o, (0, 1), [], 0.5), "at least one candidate"),
    (lambda m, o: ndd_scores(m, o, (0, 1), [o[:1]], 0.0), "mu must lie in"),
    (lambda m, o: ndd_scores(m, o, (0, 1), [o[:1]], 1.5), "mu must lie in"),
    (lambda m, o: ndd_scores(m, o, (2, 99), [o[:1]], 0.5), "is not a non-empty span"),
    (lambda m, o: ndd_scores(m, o, (3, 3), [o[:1]], 0.5), "is not a non-empty span"),
    (lambda m, o: ndd_scores(m, o, (-1, 2), [o[:1]], 0.5), "is not a non-empty span"),
    (lambda m, o: ndd_scores(m, o, (0, 1), [o[:1]], 0.5, tol=1.0), "tol must lie in"),
    (lambda m, o: ndd_scores_loop(m, o, (0, 1), [], 0.5), "at least one candidate"),
    (lambda m, o: ndd_scores(m, o[:0], (0, 1), [o[:1]], 0.5), "empty"),
])
def test_bad_input_raises_one_sentence(tiny_mlm, call, message):
    original = ids(tiny_mlm, "germany beat france")
    with pytest.raises(BenchError, match=message) as info:
        call(tiny_mlm, original)
    text = str(info.value)
    assert text.endswith(".") and "\n" not in text


def test_duplicates_run_once_and_the_span_itself_scores_exactly_zero(tiny_mlm, monkeypatch):
    import bench.models.ndd as ndd

    original = ids(tiny_mlm, "he met them in paris yesterday")
    rome, york = ids(tiny_mlm, "rome"), ids(tiny_mlm, "new york city")
    seen, real = [], ndd._log_probs_at

    def counting(mlm, rows, where):
        seen.append(len(rows))
        return real(mlm, rows, where)

    monkeypatch.setattr(ndd, "_log_probs_at", counting)
    cache = OriginalDistributions(tiny_mlm, original)
    seen.clear()
    scores = ndd_scores(tiny_mlm, original, (4, 5), [rome, original[4:5], york, rome], 0.7, original=cache)
    assert sum(seen) == 2 * (len(original) - 1)  # two distinct edits, one masked copy per unchanged position
    assert scores[1] == 0.0 and scores[0] == scores[3]
    np.testing.assert_allclose(scores, ndd_scores_loop(tiny_mlm, original, (4, 5), [rome, original[4:5], york, rome],
                                                       0.7), rtol=0, atol=1e-6)


def test_conll_reader_and_iob1_entities(tmp_path):
    from bench.performance.ndd import entities, read_conll

    path = tmp_path / "eng.train"
    path.write_text("-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\nGerman JJ I-NP I-MISC\n"
                    "call NN I-NP O\n\nPeter NNP I-NP I-PER\nBlackburn NNP I-NP I-PER\nand CC O O\n"
                    "Anna NNP I-NP B-PER\nx NN O I-LOC\n", encoding="utf-8")
    sentences = read_conll(path)
    assert [words for words, _ in sentences] == [["EU", "rejects", "German", "call"],
                                                 ["Peter", "Blackburn", "and", "Anna", "x"]]
    assert entities(sentences[0][1]) == [("ORG", 0, 1), ("MISC", 2, 3)]
    assert entities(sentences[1][1]) == [("PER", 0, 2), ("PER", 3, 4), ("LOC", 4, 5)]
    with pytest.raises(BenchError, match="does not exist"):
        read_conll(tmp_path / "missing")


def test_perf_rows_time_the_scorer_the_loop_and_the_selection(tiny_mlm, monkeypatch):
    # plumbing of `bench perf --ndd` on three CoNLL-03 sentences with the tiny model: the selection row decides the
    # batched scores' argmin in every sentence and runs at most the batched scorer's copies
    from rich.console import Console

    from bench.performance import ndd as ndd_perf

    monkeypatch.setattr(ndd_perf, "load_mlm", lambda name, *args, **kwargs: tiny_mlm)
    row = ndd_perf.run_ndd_perf("tiny", sentences=3, loop_sentences=1, candidates=3, mu=0.9, selection_bf16=True)
    assert row["select_agrees"] == 3 and 0 < row["select_copies"] <= row["select_copies_exhaustive"]
    assert row["max_abs_difference"] < 1e-6 and row["mu"] == 0.9
    assert 0 <= row["select_bf16_agrees"] <= 3 and row["select_bf16_s"] > 0
    # the ceiling: the forward passes alone, converted with the copies exact scoring needs
    assert row["ceiling_copies"] >= 3 and row["ceiling_copies_per_s"] > 0 and row["ceiling_subset_speedup"] > 0
    assert row["ceiling_candidates_per_s"] == pytest.approx(row["ceiling_copies_per_s"] * 9 / row["masked_rows"])
    assert "of that ceiling" in ndd_perf.ndd_table(row).caption
    console = Console(width=200, record=True)
    console.print(ndd_perf.ndd_table(row))
    text = console.export_text()
    assert "selection: the argmin only" in text and "chose the batched argmin in 3/3" in text
    assert "selection under bf16 autocast" in text and f"in {row['select_bf16_agrees']}/3" in text
