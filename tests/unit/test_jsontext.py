"""Readable JSON: the same value back, flat arrays on one line, objects indented."""

import json

import pytest

from bench.core.jsontext import readable_json, strict_json

VALUE = {"tokens": list(range(1000)), "names": ["a", "b\"c", "é"], "empty": [], "none": {},
         "per_eta": [{"eta": 10.0, "n_w": [1, 2, 3], "nested": {"x": [0.5, None, True]}}, [1, [2, 3]]],
         "scalar": 3.25}


def test_the_text_reads_back_as_the_same_value():
    assert json.loads(readable_json(VALUE)) == VALUE


def test_flat_arrays_take_one_line_and_objects_are_indented():
    text = readable_json(VALUE)
    lines = text.splitlines()
    assert ' "tokens": [0, 1, 2,' in lines[1] and lines[1].endswith("999],")
    assert len(lines) < 40  # json.dumps(indent=1) gives more than 1,000
    assert '   "eta": 10.0,' in lines  # three levels deep: three spaces
    assert text == readable_json(json.loads(text))


def test_scalar_options_pass_through():
    with pytest.raises(ValueError):
        readable_json({"x": [float("nan")]}, allow_nan=False)
    assert readable_json({"x": "é"}, ensure_ascii=False) == '{\n "x": "é"\n}'


def test_strict_json_writes_non_finite_numbers_as_null_or_spells_infinity():
    value = {"a": [float("inf"), float("-inf")], "b": float("nan"), "c": 1.5}
    assert json.loads(strict_json(value)) == {"a": [None, None], "b": None, "c": 1.5}
    spelled = json.loads(strict_json(value, spell_infinity=True))
    assert spelled == {"a": ["inf", "-inf"], "b": None, "c": 1.5}
    assert [float(v) for v in spelled["a"]] == [float("inf"), float("-inf")]  # read back as numbers
