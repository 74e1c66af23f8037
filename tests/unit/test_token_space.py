"""Word-vector token spaces: reading GloVe text files, splitting text, rendering releases."""

import numpy as np
import pytest

from bench import BenchError
from bench.privacy.token_space import WordVectorSpace, _read_vectors


def glove(tmp_path, lines):
    path = tmp_path / "vectors.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _read_vectors.cache_clear()
    return str(path)


def test_reads_vectors_and_skips_a_word2vec_header(tmp_path):
    space = WordVectorSpace(glove(tmp_path, ["3 2", "the 0.1 0.2", "film 1 2", ". -1 0.5"]))
    assert space.words == ["the", "film", "."]
    assert space.table.shape == (3, 2) and space.table.dtype == np.float32
    assert space.candidates.tolist() == [0, 1, 2]


def test_splits_words_looks_up_lowercase_and_marks_missing_words(tmp_path):
    space = WordVectorSpace(glove(tmp_path, ["the 0 1", "film 1 0", ". 1 1"]))
    assert space.client_ids(["The film .", "the opera"])[1].tolist() == [0, -1]
    assert space.client_ids(["The film ."])[0].tolist() == [0, 1, 2]
    replaced = space.client_ids(["the opera"], np.random.default_rng(0))[0]
    assert replaced[0] == 0 and 0 <= replaced[1] < 3  # a missing word becomes a drawn vocabulary word
    assert space.render([np.array([1, 0, 2])]) == ["film the ."]


def test_released_words_are_read_back_one_position_each(tmp_path):
    """GloVe's own words such as 's and u.s. are one released word each; split as client text they would be
    several, shifting every later position the inversion attack compares."""
    space = WordVectorSpace(glove(tmp_path, ["it 0 1", "'s 1 0", "u.s. 1 1", "good 0 0"]))
    released = space.render([np.array([0, 1, 2, 3])])
    assert space.released_ids(released)[0].tolist() == [0, 1, 2, 3]
    assert len(space.client_ids(released)[0]) > 4  # what reading it as client text did
    from bench.attacks.inversion import _released_ids
    from bench.core.releases import Release, ReleaseKind

    release = Release(ReleaseKind.TEXT, released, np.arange(1))
    assert _released_ids(release, space)[0].tolist() == [0, 1, 2, 3]  # the inversion attack reads it so


@pytest.mark.parametrize(
    "lines, message",
    [
        (["the 0 1", "film 1"], "has 1 values; earlier rows have 2"),
        (["the zero one"], "numeric values"),
        ([""], "holds no vectors"),
    ],
)
def test_bad_files_are_refused_in_one_sentence(tmp_path, lines, message):
    with pytest.raises(BenchError, match=message):
        WordVectorSpace(glove(tmp_path, lines))


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(BenchError, match="does not exist"):
        WordVectorSpace(str(tmp_path / "nope.txt"))
