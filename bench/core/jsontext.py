"""JSON text for result files that people read and diff: nested objects indented, flat arrays on one line.

``json.dump(indent=...)`` puts every element of an array on its own line, so a per-token array of the whole
vocabulary (29,523 numbers) became 29,523 lines. Here an array whose elements are all scalars stays on one line;
objects and arrays of objects are indented as ``json.dump`` indents them. ``json.load`` reads both the same.
"""

from __future__ import annotations

import json
from typing import Any


def readable_json(value: Any, indent: int = 1, **options: Any) -> str:
    """``value`` as JSON text, indented by ``indent`` spaces per level, every array of scalars on one line;
    ``options`` go to ``json.dumps`` for the scalars (``allow_nan``, ``default``, ``ensure_ascii``)."""

    def render(item: Any, level: int) -> str:
        inner, outer = " " * (indent * (level + 1)), " " * (indent * level)
        if isinstance(item, dict) and item:
            fields = (f"{inner}{json.dumps(str(key), **options)}: {render(field, level + 1)}"
                      for key, field in item.items())
            return "{\n" + ",\n".join(fields) + "\n" + outer + "}"
        if isinstance(item, (list, tuple)) and any(isinstance(element, (dict, list, tuple)) for element in item):
            return "[\n" + ",\n".join(inner + render(element, level + 1) for element in item) + "\n" + outer + "]"
        return json.dumps(item, separators=(", ", ": "), **options)

    return render(value, 0)


def strict_json(value: Any, spell_infinity: bool = False, **options: Any) -> str:
    """``value`` as JSON that strict parsers read: a NaN or an infinity is written as null (``json.dumps`` would
    write the bare ``NaN`` that JSON does not have), or with ``spell_infinity`` an infinity as the string "inf" or
    "-inf" (``float()`` reads it back); ``options`` go to ``json.dumps``."""
    import math

    def finite(item: Any) -> Any:
        if isinstance(item, float) and not math.isfinite(item):
            return ("inf" if item > 0 else "-inf") if spell_infinity and math.isinf(item) else None
        if isinstance(item, dict):
            return {key: finite(field) for key, field in item.items()}
        if isinstance(item, (list, tuple)):
            return [finite(element) for element in item]
        return item

    return json.dumps(finite(value), allow_nan=False, **options)
