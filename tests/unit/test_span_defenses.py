"""Span defenses (mask, ndd), the engine's span step and the span-recovery attack.

The MLM here is a tiny randomly initialised BERT (2 layers, 32 dimensions) with minilm's WordPiece
tokenizer: plumbing only. Its NDD figures and fillings mean nothing about semantics; they exercise
selection, sampling, beam search and the bookkeeping of slots.
"""

import types

import numpy as np
import pytest
import torch

from bench import BenchError, Edit, Span
from bench.core.spans import apply_edits, non_overlapping
from bench.engine.spans import SpanBatch, locate_slots, select_spans, span_pool

from .tiny_models import tiny_masked_lm


@pytest.fixture(scope="module")
def tiny_mlm():
    return tiny_masked_lm()


@pytest.fixture
def patched_mlm(tiny_mlm, monkeypatch):
    from bench.models import mlm as mlm_module

    monkeypatch.setattr(mlm_module, "shared_mlm", lambda name, task=None, device="cpu": tiny_mlm)
    monkeypatch.setattr(mlm_module, "mlm_facts", lambda name, task=None, device="cpu": {"mlm": name, "mlm_top1": 0.0})
    return tiny_mlm


class FakeTask:
    """Sentences whose capitalised words are PER spans, for selection tests."""

    registry_name = "fake"
    span_kinds = ("PER", "LOC")

    def span_fragment(self, label, text, span):
        return ("fragment", span.start)


def test_apply_edits_places_new_words_and_rejects_overlaps():
    text = "a b c d e"
    new, placed = apply_edits(text, [Edit(Span(3, 5, "X"), ("y",)), Edit(Span(0, 1, "X"), ("p", "q"))])
    assert new == "p q b c y"
    assert placed == [Span(0, 2, "X"), Span(4, 5, "X")]
    with pytest.raises(BenchError, match="overlap"):
        apply_edits(text, [Edit(Span(0, 2, "X"), ("y",)), Edit(Span(1, 3, "X"), ("z",))])
    with pytest.raises(BenchError, match="outside"):
        apply_edits(text, [Edit(Span(4, 6, "X"), ("y",))])
    pair, placed = apply_edits(("q w", "a b c"), [Edit(Span(1, 2, "X", 1), ("z", "z"))])
    assert pair == ("q w", "a z z c") and placed == [Span(1, 3, "X", 1)]


def test_non_overlapping_keeps_inner_phrases():
    spans = [Span(0, 5, "S"), Span(0, 2, "NP"), Span(3, 5, "VP"), Span(3, 4, "NP")]
    assert non_overlapping(spans) == [Span(0, 2, "NP"), Span(3, 4, "NP")]


def test_selection_by_kind_and_fraction():
    spans = [[Span(0, 1, "PER"), Span(2, 3, "LOC")] for _ in range(50)]
    chosen = select_spans(FakeTask(), spans, ("PER",), 1.0, np.random.default_rng(0))
    assert all(c == [Span(0, 1, "PER")] for c in chosen)
    third = select_spans(FakeTask(), spans, (), 1 / 3, np.random.default_rng(0))
    assert sum(map(len, third)) == round(100 / 3)
    with pytest.raises(BenchError, match="no span kind 'NP'"):
        select_spans(FakeTask(), spans, ("NP",), 1.0, np.random.default_rng(0))


def test_pool_holds_each_distinct_phrase_once_with_its_fragment():
    texts = ["Ann met Bob", "Ann left"]
    spans = [[Span(0, 1, "PER"), Span(2, 3, "PER")], [Span(0, 1, "PER")]]
    pool = span_pool(FakeTask(), texts, [None, None], spans)
    assert pool == {"PER": [(("Ann",), ("fragment", 0)), (("Bob",), ("fragment", 2))]}


def test_slots_locate_rewritten_spans_and_their_original_pieces(tiny_mlm):
    tokenizer = tiny_mlm.tokenizer
    original = ["peter blackburn visited brussels"]
    rewritten = ["[MASK] [MASK] visited brussels"]

    def ids(texts):
        from bench.privacy.mechanisms import released_token_ids

        keep = released_token_ids(tokenizer)
        out = [np.asarray(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
        return [x[np.isin(x, keep)] for x in out]

    slots, truth = locate_slots(ids(rewritten), ids(original), original, [[Span(0, 2, "PER")]], rewritten,
                                [[Span(0, 2, "PER")]], tokenizer, 128)
    assert slots == [[(0, 0, 2, "PER")]]
    assert truth == [[tuple(tokenizer("peter blackburn", add_special_tokens=False)["input_ids"])]]


def batch_of(texts, spans, pool=None):
    return SpanBatch(texts, [None] * len(texts), spans, pool or {})


def test_mask_writes_one_mask_per_word():
    from bench.defenses.mask import SpanMask

    edits = SpanMask().rewrite(batch_of(["a b c"], [[Span(0, 2, "PER")]]), np.random.default_rng(0))
    assert edits == [[Edit(Span(0, 2, "PER"), ("[MASK]", "[MASK]"))]]


def test_ndd_selection_keeps_the_smallest_ndd_and_never_the_original(patched_mlm):
    from bench.defenses.ndd import NDDDistortion

    texts = ["peter blackburn visited the european commission in brussels on thursday ."] * 3
    spans = [[Span(0, 2, "PER")]] * 3
    pool = {"PER": [(("peter", "blackburn"), None), (("john", "smith"), None), (("mary",), None),
                    (("the", "big", "red", "company"), None), (("ann", "lee"), None)]}
    chosen = NDDDistortion(mode="substitutive", k=4, mlm="minilm", allow_untrained=True)
    edits = chosen.rewrite(batch_of(texts, spans, pool), np.random.default_rng(0))
    assert all(e[0].words != ("peter", "blackburn") for e in edits)
    assert chosen.stats["ndd_chosen_mean"] <= chosen.stats["ndd_first_candidate_mean"]
    # the kept candidate is the argmin of NDD among what was drawn: recompute for the first sentence
    from bench.models.ndd import ndd_scores

    tokenizer = patched_mlm.tokenizer
    encode = lambda words: np.asarray(tokenizer(list(words), is_split_into_words=True,  # noqa: E731
                                                add_special_tokens=False)["input_ids"])
    others = [p for p in pool["PER"] if p[0] != ("peter", "blackburn")]
    drawn = [others[int(i)] for i in np.random.default_rng(0).choice(len(others), size=4, replace=False)]
    scores = ndd_scores(patched_mlm, encode(texts[0].split()), (0, 2), [encode(w) for w, _ in drawn], 0.9)
    assert edits[0][0].words == drawn[int(np.argmin(scores))][0]


@pytest.mark.parametrize("cell, setting, expected", [("fp32", "cell", "fp32"), ("bf16", "cell", "bf16"),
                                                      ("fp32", "bf16", "bf16"), ("bf16", "fp32", "fp32")])
def test_ndd_mlm_runs_at_its_own_precision_and_the_cell_keeps_its_own(patched_mlm, monkeypatch, cell, setting,
                                                                      expected):
    from bench.defenses.ndd import NDDDistortion
    from bench.models import encoders
    from bench.models import ndd as metric

    seen, plain = [], metric._log_probs_at

    def spy(mlm, rows, where):
        seen.append(encoders.cell_precision())
        return plain(mlm, rows, where)

    monkeypatch.setattr(metric, "_log_probs_at", spy)
    texts = ["peter blackburn visited the european commission in brussels ."] * 2
    pool = {"PER": [(("john", "smith"), None), (("mary",), None), (("ann", "lee"), None)]}
    defense = NDDDistortion(mode="substitutive", k=3, mlm="minilm", allow_untrained=True, mlm_precision=setting)
    with encoders.on_device("cpu", cell):
        defense.rewrite(batch_of(texts, [[Span(0, 2, "PER")]] * 2, pool), np.random.default_rng(0))
        assert encoders.cell_precision() == cell  # the server and the attack that follow run at the cell's
    assert seen and set(seen) == {expected}
    assert defense.stats["ndd_mlm_precision"] == expected
    identity = defense.rewrite_identity("fake")  # the journal and the rewrite cache key on it
    assert ("mlm_precision" in identity["args"]) == (setting != "cell")


def test_rewrite_cache_replays_a_rewrite_exactly_and_misses_on_any_change(patched_mlm, tmp_path, monkeypatch):
    from bench.defenses.ndd import NDDDistortion
    from bench.engine.spans import cached_rewrite

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    texts = ["peter blackburn visited the european commission in brussels on thursday .", "ann lee left ."]
    spans = [[Span(0, 2, "PER")], [Span(0, 2, "PER")]]
    pool = {"PER": [(("peter", "blackburn"), None), (("john", "smith"), None), (("mary",), None),
                    (("ann", "lee"), None), (("the", "old", "man"), None)]}
    calls = []

    class Counting(NDDDistortion):
        def rewrite(self, batch, rng):
            calls.append(1)
            return super().rewrite(batch, rng)

    def run(seed=0, **args):
        defense = Counting(mode="substitutive", k=3, mlm="minilm", allow_untrained=True, **args)
        rng = np.random.default_rng(seed)
        edits = cached_rewrite(defense, batch_of(texts, spans, pool), rng)
        return edits, defense.stats, rng.integers(1 << 30)  # what the cell draws next

    first, stats, after = run()
    again, replayed, after_again = run()
    assert len(calls) == 1 and again == first and after_again == after  # the generator resumes where it stopped
    assert replayed == {**stats, "rewrite_from_cache": True}
    run(seed=1)
    run(mu=0.5)
    assert len(calls) == 3  # another random state, another parameter: rewritten
    bias = patched_mlm.model.cls.predictions.bias
    saved = bias.detach().clone()
    try:
        with torch.no_grad():
            bias += 1.0
        run()
    finally:
        with torch.no_grad():
            bias.copy_(saved)
    assert len(calls) == 4  # the same name with other weights: rewritten


WINDOW_WORDS = "yesterday in the city hall of old brussels peter blackburn met the european commission again ."
SENTENCES = ("yesterday it rained all day in brussels .", "then peter blackburn met the european commission again !",
             "nobody came.Nothing happened")  # a full stop inside a word starts no sentence


@pytest.mark.parametrize("args, words, span, alone, inside", [
    # window 3 around words 8-9: the MLM sees words 5-12 alone, the span at 3-4 of them
    ({"window": 3}, WINDOW_WORDS, Span(8, 10, "PER"), " ".join(WINDOW_WORDS.split()[5:13]), (3, 5)),
    # scope=sentence: the MLM sees the span's sentence alone
    ({"scope": "sentence"}, " ".join(SENTENCES), Span(9, 11, "PER"), SENTENCES[1], (1, 3)),
])
def test_ndd_scores_a_window_or_the_sentence_as_if_it_stood_alone(patched_mlm, args, words, span, alone, inside):
    from bench.defenses.ndd import NDDDistortion, _Pieces
    from bench.models.ndd import ndd_scores

    options = [(("john", "smith"), None), (("mary",), None), (("ann", "lee"), None)]
    pieces = _Pieces(patched_mlm.tokenizer)
    limited = NDDDistortion(mode="substitutive", mlm="minilm", allow_untrained=True, **args)
    got = limited._choose(patched_mlm, pieces, words, span, options, {})
    ids, word_of = pieces.of(alone, 0)
    at = np.flatnonzero((word_of >= inside[0]) & (word_of < inside[1]))
    expected = ndd_scores(patched_mlm, ids, (int(at[0]), int(at[-1]) + 1), [pieces.encode(w) for w, _ in options], 0.9)
    assert got.index == int(np.argmin(expected))
    np.testing.assert_allclose([got.score, got.first], [expected.min(), expected[0]], rtol=1e-6)
    whole = NDDDistortion(mode="substitutive", mlm="minilm", allow_untrained=True)
    unlimited = whole._choose(patched_mlm, pieces, words, span, options, {})
    assert not np.allclose([unlimited.score, unlimited.first], [got.score, got.first])


def test_sentences_around_a_span():
    from bench.data.sentences import sentence_around

    words = tuple(" ".join(SENTENCES).split())
    assert sentence_around(words, 9, 11) == (8, 17)
    assert sentence_around(words, 19, 20) == (17, 20)  # "came.Nothing" starts no sentence
    assert sentence_around(words, 7, 9) == (0, 17)  # a span across two sentences keeps both
    assert sentence_around(("one",), 0, 1) == (0, 1)


def test_ndd_generative_fills_as_many_pieces_and_random_takes_the_first(patched_mlm):
    from bench.defenses.ndd import NDDDistortion

    texts = ["he met peter blackburn in brussels yesterday ."]
    spans = [[Span(2, 4, "PER"), Span(5, 6, "LOC")]]
    defense = NDDDistortion(mode="generative", select="random", k=3, mlm="minilm", allow_untrained=True)
    (edits,) = defense.rewrite(batch_of(texts, spans), np.random.default_rng(1))
    tokenizer = patched_mlm.tokenizer
    for edit, original in zip(edits, ("peter blackburn", "brussels")):
        assert edit.words and not edit.words[0].startswith("##")
        pieces = tokenizer(" ".join(edit.words), add_special_tokens=False)["input_ids"]
        assert len(pieces) >= 1 and edit.words != tuple(original.split())
    assert "ndd_chosen_mean" not in defense.stats  # random selection scores nothing


@pytest.mark.parametrize("args, message", [
    ({"k": 0}, "k must be in 1..64"), ({"mu": 0.0}, r"mu must lie in \(0, 1\]"), ({"mu": 1.5}, "mu must lie"),
    ({"mode": "copy"}, "mode must be one of"), ({"select": "best"}, "select must be one of"),
    ({"mlm": "mock"}, "is not a masked LM"), ({"mlm": "minilm"}, "untrained prediction head"),
    ({"fraction": 0.0}, "fraction must lie"), ({"window": -1}, "window must be >= 0"),
    ({"scope": "paragraph"}, "scope must be one of"), ({"window": 5, "scope": "sentence"}, "not both"),
    ({"mlm_precision": "fp16"}, "mlm_precision must be cell, fp32 or bf16"),
])
def test_ndd_rejects_bad_parameters(args, message):
    from bench.defenses.ndd import NDDDistortion

    with pytest.raises(BenchError, match=message):
        NDDDistortion(**args)


@pytest.mark.parametrize("kwargs, message", [
    ({"task": "sst2", "defense": "mask"}, "declares none"),
    ({"task": "conll2003", "defense": "mask", "defense_args": "kinds=NP"}, "no span kind 'NP'"),
    ({"task": "sst2", "defense": "none", "attack": "span-recovery"}, "declares none"),
    ({"task": "conll2003", "defense": "mask", "attack": "inversion"}, "cannot be paired"),
])
def test_cells_that_cannot_work_are_refused_before_they_run(kwargs, message):
    from bench.engine.runner import make_spec

    with pytest.raises(BenchError, match=message):
        make_spec(encoder="minilm", **kwargs)


def _release_of(tokenizer, sentences, slots, **extra):
    rows = [np.asarray(tokenizer.convert_tokens_to_ids(s.split()), dtype=np.int64) for s in sentences]
    return types.SimpleNamespace(data=rows, slots=slots, mechanism=None, span_prior=extra.get("span_prior"),
                                 span_public=extra.get("span_public")), rows


def _public(mlm):
    return types.SimpleNamespace(task="fake", encoder=types.SimpleNamespace(tokenizer=mlm.tokenizer, device="cpu"))


def test_span_recovery_reaches_a_span_of_more_pieces_than_its_slot(tiny_mlm, monkeypatch):
    """One [MASK] stands for one word of two pieces ("blackburn" = black ##burn): an MLM that likes those pieces
    fills them at length 2 whatever the slot's length (the attack before filled only the slot's one piece)."""
    import copy

    from bench import Truth
    from bench.attacks.span_recovery import SpanRecovery
    from bench.models import mlm as mlm_module

    biased = copy.deepcopy(tiny_mlm)
    tokenizer = biased.tokenizer
    black, burn = tokenizer.convert_tokens_to_ids(["black", "##burn"])
    with torch.no_grad():
        bias = biased.model.cls.predictions.decoder.bias
        bias[black] += 60.0
        bias[burn] += 59.0
    monkeypatch.setattr(mlm_module, "shared_mlm", lambda name, task=None, device="cpu": biased)
    monkeypatch.setattr(mlm_module, "mlm_facts", lambda name, task=None, device="cpu": {"mlm": name})
    release, _ = _release_of(tokenizer, ["yesterday peter [MASK] met the commission ."], [[(0, 1, 3, "PER")]])
    release.slots = [[(0, 2, 3, "PER")]]
    truth = Truth([], np.zeros(0), np.zeros(0), spans=[[(black, burn)]])
    attack = SpanRecovery(k=8)
    scores = attack.score(attack.attack(release, _public(biased)), truth, None)
    assert scores["top_k"] == 1.0 and scores["verbatim"] == 0.0


def test_span_recovery_searches_the_whole_release_and_keeps_the_masked_word_count(patched_mlm, monkeypatch):
    """A span substituted into another sentence is a candidate everywhere; a slot of three [MASK]s takes only
    three-word candidates, so with a flat MLM and no prior the released three-word span ranks first."""
    import bench.attacks.span_recovery as span_recovery
    from bench import Truth
    from bench.attacks.span_recovery import SpanRecovery

    def flat(mlm, rows, row_index, columns):
        return np.full((len(row_index), int(mlm.model.config.vocab_size)), -10.0, dtype=np.float32)

    monkeypatch.setattr(span_recovery, "_log_probs_at", flat)
    tokenizer = patched_mlm.tokenizer
    release, rows = _release_of(tokenizer, ["[MASK] [MASK] [MASK] met the commission .",
                                            "the minister met john smith jones ."], None)
    release.slots = [[(0, 0, 3, "PER")], [(0, 3, 6, "PER")]]
    original = tuple(int(t) for t in rows[1][3:6])
    truth = Truth([], np.zeros(0), np.zeros(0), spans=[[original], [original]])
    attack = SpanRecovery(k=1, pieces=2, weight=1.0)
    guesses = attack.attack(release, _public(patched_mlm))
    assert guesses.fillings[0][0] == [original]
    assert attack.score(guesses, truth, None)["recovered"] == 1.0


def test_span_recovery_chooses_its_mlm_weight_on_public_spans_and_can_fall_back_on_the_prior(patched_mlm):
    """With a random MLM the weight chosen on the public spans is the one that ranks them best; the prior alone
    (weight 0) is among the choices, so on the public spans the attack never ranks below the frequency guess."""
    from bench.attacks.span_recovery import SpanRecovery

    tokenizer = patched_mlm.tokenizer
    names = ["paris", "london", "berlin", "rome"]
    sentences = [f"we flew to {names[i % 4]} today ." for i in range(24)]
    public_rows = [np.asarray(tokenizer(s, add_special_tokens=False)["input_ids"]) for s in sentences]
    ids = [tuple(tokenizer.convert_tokens_to_ids([n])) for n in names]
    prior = {"LOC": [(ids[0], 6), (ids[1], 6), (ids[2], 6), (ids[3], 6)]}
    public = {"rows": public_rows, "slots": [[(0, 3, 4, "LOC")] for _ in sentences], "words": [[1]] * 24}
    release, _ = _release_of(tokenizer, ["we flew to [MASK] today ."], None, span_prior=prior, span_public=public)
    release.slots = [[(0, 3, 4, "LOC")]]
    attack = SpanRecovery(k=4)
    attack.attack(release, _public(patched_mlm))
    notes = attack.run_notes
    chosen = notes["span_recovery_calibration_top_k"]
    assert notes["span_recovery_weight_chosen_on"] == 24
    assert chosen[str(notes["span_recovery_weight"])] == max(chosen.values()) >= chosen["0.0"] == 1.0


def test_span_recovery_scores_verbatim_mlm_and_frequency_guesses():
    from bench import Truth
    from bench.attacks.span_recovery import SlotGuesses, SpanRecovery

    rows = [np.array([5, 6, 7, 8]), np.array([9, 9, 4])]
    slots = [[(0, 0, 2, "PER"), (0, 3, 4, "LOC")], [(0, 0, 1, "PER")]]
    guesses = SlotGuesses(rows, slots, [[None, None], [None]], [[[(1, 2)], [(3,)]], [[(7, 7)]]])
    truth = Truth([], np.zeros(0), np.zeros(0), spans=[[(5, 6), (3,)], [(1, 1)]])
    scores = SpanRecovery().score(guesses, truth, None)
    # span 1 still verbatim; span 2 found among the ranked candidates only; span 3 found by neither
    assert scores == {"recovered": 2 / 3, "verbatim": 1 / 3, "top_k": 1 / 3}
    release = types.SimpleNamespace(slots=slots, span_prior={"PER": [((5, 6), 9), ((1, 1), 3)]})
    random = SpanRecovery(k=2).random_guess(release, None, np.random.default_rng(0))
    assert SpanRecovery().score(random, truth, None) == {"recovered": 2 / 3, "verbatim": 1 / 3, "top_k": 2 / 3}



def test_interrupted_ndd_rewrite_resumes_from_its_checkpoint_with_the_same_choices(patched_mlm, tmp_path,
                                                                                     monkeypatch):
    from bench.defenses.ndd import NDDDistortion

    texts = ["peter blackburn visited the european commission in brussels on thursday .", "ann lee left .",
             "john smith met mary jones in rome .", "the old man saw tom ."]
    spans = [[Span(0, 2, "PER")], [Span(0, 2, "PER")], [Span(0, 2, "PER"), Span(3, 5, "PER")], [Span(4, 5, "PER")]]
    pool = {"PER": [(("peter", "blackburn"), None), (("john", "smith"), None), (("mary",), None),
                    (("ann", "lee"), None), (("the", "old", "man"), None), (("tom",), None)]}
    real_choose = NDDDistortion._choose
    scored, stop_after = [], [None]

    def counting(self, *args):
        if stop_after[0] is not None and len(scored) == stop_after[0]:
            raise KeyboardInterrupt  # the user stops the run
        scored.append(1)
        return real_choose(self, *args)

    monkeypatch.setattr(NDDDistortion, "_choose", counting)

    def rewrite(cache):
        monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / cache))
        defense = NDDDistortion(mode="substitutive", k=3, mlm="minilm", allow_untrained=True)
        return defense.rewrite(batch_of(texts, spans, pool), np.random.default_rng(0)), defense.stats

    whole, whole_stats = rewrite("whole")
    assert len(scored) == 5 and not list((tmp_path / "whole").rglob("*.jsonl"))  # a finished rewrite keeps no journal
    scored.clear()
    stop_after[0] = 3
    with pytest.raises(KeyboardInterrupt):
        rewrite("split")
    journals = list((tmp_path / "split").rglob("*.jsonl"))
    assert len(journals) == 1 and len(journals[0].read_text().splitlines()) == 3
    with open(journals[0], "a") as handle:
        handle.write('[3, [0, 0.1')  # a line cut off by a crash mid-write: dropped, that span scored again
    scored.clear()
    stop_after[0] = None
    resumed, resumed_stats = rewrite("split")
    assert len(scored) == 2  # only the spans the first run had not finished
    assert resumed == whole
    assert resumed_stats.pop("ndd_spans_from_checkpoint") == 3
    # the masked copies count what this run scored: the resumed run scored 2 of the 5 spans
    assert 0 < resumed_stats["ndd_masked_copies_run"] < whole_stats["ndd_masked_copies_run"]
    assert whole_stats["ndd_masked_copies_run"] <= whole_stats["ndd_masked_copies_exhaustive"]
    per_run = ("ndd_rewrite_seconds", "ndd_masked_copies_run", "ndd_masked_copies_exhaustive")
    drop = lambda stats: {k: v for k, v in stats.items() if k not in per_run}  # noqa: E731
    assert drop(resumed_stats) == drop(whole_stats)
    assert not journals[0].exists()


def test_ndd_progress_counts_each_span_as_the_square_of_its_pieces_and_a_resumed_run_starts_past_its_checkpoint(
        patched_mlm, tmp_path, monkeypatch):
    import contextlib

    import bench.defenses.ndd as ndd_module
    from bench.defenses.ndd import NDDDistortion

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    texts = ["peter blackburn visited the european commission in brussels on thursday .", "ann lee left .",
             "john smith met mary jones in rome ."]
    spans = [[Span(0, 2, "PER")], [Span(0, 2, "PER")], [Span(0, 2, "PER"), Span(3, 5, "PER")]]
    pool = {"PER": [(("peter", "blackburn"), None), (("john", "smith"), None), (("mary",), None),
                    (("ann", "lee"), None), (("tom",), None)]}
    pieces = [len(patched_mlm.tokenizer(t.split(), is_split_into_words=True, add_special_tokens=False)["input_ids"])
              for t in texts]
    work = [pieces[0] ** 2, pieces[1] ** 2, pieces[2] ** 2, pieces[2] ** 2]  # one entry per span, in order
    bars = []

    @contextlib.contextmanager
    def recording(description, total, completed=0.0, enabled=True, log_every=None, unit="steps"):
        bars.append({"total": total, "start": completed, "updates": []})
        yield lambda done, description=None: bars[-1]["updates"].append(done)

    monkeypatch.setattr(ndd_module, "progress_bar", recording)
    real_choose, stop = NDDDistortion._choose, [None]

    def stopping(self, *args):
        if stop[0] is not None and not stop[0]:
            raise KeyboardInterrupt
        if stop[0]:
            stop[0] -= 1
        return real_choose(self, *args)

    monkeypatch.setattr(NDDDistortion, "_choose", stopping)

    def rewrite():
        NDDDistortion(mode="substitutive", k=3, mlm="minilm", allow_untrained=True).rewrite(
            batch_of(texts, spans, pool), np.random.default_rng(0))

    rewrite()
    assert work[0] > 7 * work[1]  # a span of an 11-piece sentence is 7.5 times the work of a 4-piece one
    assert bars[0] == {"total": sum(work), "start": 0.0, "updates": list(np.cumsum([0] + work[:-1]))}
    stop[0] = 2
    with pytest.raises(KeyboardInterrupt):
        rewrite()
    stop[0] = None
    rewrite()  # resumes: the first two spans come from the checkpoint
    assert bars[2] == {"total": sum(work), "start": work[0] + work[1], "updates": [work[0] + work[1], sum(work[:3])]}


@pytest.mark.skipif(not __import__("bench.core.examples", fromlist=["data_dir"]).data_dir().joinpath(
    "conll2003", "eng.train").is_file(), reason="CoNLL-2003 files missing")
def test_substitution_draws_from_public_text_by_default_and_from_the_client_only_when_asked():
    """No released substitute is an entity string of the client's training split unless public text holds it too;
    pool=own releases the client's own entities, moved to other sentences."""
    from bench.core.registry import TASKS
    from bench.core.spans import segment_words
    from bench.defenses.ndd import NDDDistortion
    from bench.engine.spans import rewrite_split, substitution_pool, task_spans

    task = TASKS.get("conll2003")()
    data = task.load(n_train=150, n_eval=50, seed=0)
    private = {tuple(s.words(data.train.texts[i])) for i, spans in enumerate(task_spans(task, data, "train"))
               for s in spans}
    public = {words for entries in substitution_pool(task, data, [], [], [], "public").values()
              for words, _ in entries}
    leaked = {}
    for pool in ("public", "own"):
        done = rewrite_split(NDDDistortion(mode="substitutive", select="random", pool=pool), task, data, "train",
                             np.random.default_rng(0))
        released = {tuple(segment_words(text, s.segment)[s.start:s.end])
                    for text, placed in zip(done.texts, done.placed) for s in placed}
        leaked[pool] = (released & private) - public
    assert not leaked["public"]
    assert len(leaked["own"]) > 20  # the client's rare entities, released elsewhere
