"""Sentence pairs through the pipeline: segments, hashes, cache keys, the mock encoder, regression mixing."""

import hashlib
import json

import numpy as np
import torch

from bench.core.cache import texts_key
from bench.core.examples import Examples, TaskData, as_text, flatten_segments
from bench.models.encoders import MockEncoder, fit_pair
from bench.models.training import targets_for

PAIRS = (("the film is dull", "the plot is tedious"), ("a warm story", "a sharp script"))


def test_flatten_segments_round_trips_pairs_and_passes_sentences_through():
    segments, regroup = flatten_segments(list(PAIRS))
    assert segments == ["the film is dull", "the plot is tedious", "a warm story", "a sharp script"]
    assert regroup([s.upper() for s in segments]) == [tuple(s.upper() for s in p) for p in PAIRS]
    sentences, same = flatten_segments(["one", "two"])
    assert sentences == ["one", "two"] and same(["x", "y"]) == ["x", "y"]
    assert as_text(PAIRS[0]) == "the film is dull the plot is tedious" and as_text("one") == "one"


def test_single_sentence_data_hash_is_unchanged():
    train = Examples(("a b", "c d"), np.array([0, 1]))
    evaluation = Examples(("e f",), np.array([1]))
    digest = hashlib.sha256()  # the formula records were written with before pairs existed
    for texts, labels in ((["a b", "c d"], [0, 1]), (["e f"], [1])):
        digest.update(json.dumps({"texts": texts, "labels": labels}, ensure_ascii=False).encode("utf-8"))
    assert TaskData(train, evaluation, "x").data_hash() == digest.hexdigest()


def test_pair_data_hash_depends_on_the_pairing():
    labels = np.array([0, 1])
    swapped = (PAIRS[0], (PAIRS[1][1], PAIRS[1][0]))
    hashes = {TaskData(Examples(texts, labels), Examples(texts, labels), "x").data_hash()
              for texts in (PAIRS, swapped, tuple(as_text(p) for p in PAIRS))}
    assert len(hashes) == 3


def test_corpus_keeps_distinct_pairs():
    texts = PAIRS + (PAIRS[0],)
    corpus, labels = TaskData(Examples(texts, np.array([0, 1, 0])), Examples((), np.array([])), "x").index_corpus()
    assert corpus == list(PAIRS) and labels.tolist() == [0, 1]


def test_cache_key_of_sentences_and_arrays_is_unchanged():
    settings = {"encoder": "m"}
    items = ["a b", np.arange(3)]
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8"))
    digest.update(b"a b\x1e")
    digest.update(b"int64(3,)" + np.arange(3).tobytes() + b"\x1e")
    assert texts_key(settings, items) == digest.hexdigest()


def test_cache_key_of_pairs_covers_both_parts_unambiguously():
    settings = {"encoder": "m"}
    keys = {
        texts_key(settings, [("a b", "c")]),
        texts_key(settings, [("a", "b c")]),
        texts_key(settings, [("ab", "c")]),
        texts_key(settings, [("a", "bc")]),
        texts_key(settings, [("c", "a b")]),
        texts_key(settings, ["a b c"]),
        texts_key(settings, ["a b", "c"]),
        texts_key(settings, [(np.arange(2), np.arange(3))]),
        texts_key(settings, [(np.arange(3), np.arange(2))]),
    }
    assert len(keys) == 9


def test_mock_encoder_reads_both_sentences_of_a_pair():
    encoder = MockEncoder()
    assert np.allclose(encoder.encode([PAIRS[0]]), encoder.encode([as_text(PAIRS[0])]))
    assert not np.allclose(encoder.encode([PAIRS[0]]), encoder.encode([PAIRS[0][0]]))


def test_fit_pair_cuts_the_longer_segment_first():
    a, b = np.arange(10), np.arange(3)
    assert [len(x) for x in fit_pair(a, b, 8)] == [5, 3]
    assert [len(x) for x in fit_pair(b, a, 8)] == [3, 5]
    assert [len(x) for x in fit_pair(np.arange(9), np.arange(7), 8)] == [4, 4]
    assert [len(x) for x in fit_pair(a, b, 20)] == [10, 3]
    first, _ = fit_pair(a, b, 8)
    assert first.tolist() == [0, 1, 2, 3, 4]  # the end is cut, as the tokenizer truncates


def test_texthide_mixes_a_regression_target_like_the_representations():
    from bench.defenses.texthide import TextHide

    scores = np.array([0.0, 1.5, 3.0, 4.2, 5.0, 2.5])
    targets = torch.from_numpy(targets_for(scores, 1))
    reps = targets.repeat(1, 8)  # every coordinate equals the example's score
    hidden, mixed = TextHide(m=0, k=3).hide_batch(reps, targets, torch.Generator().manual_seed(0))
    assert mixed.shape == (6, 1) and mixed.dtype == torch.float32
    assert torch.allclose(hidden[:, :1], mixed)  # the same weights and partners as the representations
    assert not torch.allclose(mixed, targets) and mixed.min() >= 0.0 and mixed.max() <= 5.0
