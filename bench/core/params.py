"""Component parameters: dataclass fields, parsed from ``key=value,key=value`` strings."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import re
import types
import typing
from typing import Any, Mapping

from bench.core.errors import BenchError


def parse_arg_string(text: str | None) -> dict[str, str]:
    """Split ``"m=256,k=4"`` into ``{"m": "256", "k": "4"}``."""
    if not text:
        return {}
    pairs: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BenchError(f"argument '{item}' is not of the form key=value.")
        key = key.strip()
        if key in pairs:
            raise BenchError(f"argument '{key}' is given twice ({key}={pairs[key]} and {key}={value.strip()}); "
                             "give it once.")
        pairs[key] = value.strip()
    return pairs


def allows_infinity(default: Any) -> Any:
    """Declare a float parameter that accepts inf and -inf (a dataclass field with this default).

    Every other float parameter must be finite; NaN is never accepted.
    """
    return dataclasses.field(default=default, metadata={"allows_infinity": True})


def _finite(owner: str, name: str, value: Any, allow_inf: bool) -> Any:
    """Refuse NaN, and infinity unless the field allows it, in a float value."""
    if isinstance(value, float) and not math.isfinite(value):
        if math.isnan(value) or not allow_inf:
            raise BenchError(f"{owner} parameter {name} must be a finite number, got {value}.")
    return value


def _coerce(owner: str, name: str, value: Any, annotation: Any, allow_inf: bool = False) -> Any:
    """Convert a string (or a YAML scalar) to the field's annotated type; floats must be finite unless
    ``allow_inf`` (NaN never passes)."""
    return _finite(owner, name, _convert(owner, name, value, annotation, allow_inf), allow_inf)


def _convert(owner: str, name: str, value: Any, annotation: Any, allow_inf: bool) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        if len(options) > 1:  # e.g. ``int | str``: the first type the value fits
            for option in options:
                try:
                    return _coerce(owner, name, value, option, allow_inf)
                except BenchError:
                    continue
            kinds = " or ".join(getattr(o, "__name__", str(o)) for o in options)
            raise BenchError(f"{owner} parameter {name} must be {kinds}, got {value!r}.")
        annotation = options[0]
    if not isinstance(value, str):
        if isinstance(value, bool) and annotation is not bool:
            raise BenchError(f"{owner} parameter {name} must be {annotation.__name__}, got {value!r}.")
        if annotation is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if annotation in (int, float, bool, str) and not isinstance(value, annotation):
            raise BenchError(f"{owner} parameter {name} must be {annotation.__name__}, got {value!r}.")
        return value
    try:
        if annotation is bool:
            lowered = value.lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if annotation is int:
            return int(value)
        if annotation is float:
            result = float(value)
            if math.isnan(result) or (math.isinf(result) and not allow_inf):
                raise BenchError(f"{owner} parameter {name} must be a finite number, got '{value}'.")
            return result
        return annotation(value)
    except (TypeError, ValueError):
        kind = getattr(annotation, "__name__", str(annotation))
        raise BenchError(f"{owner} parameter {name} must be {kind}, got '{value}'.") from None


def build_component(cls: type, args: Mapping[str, Any] | str | None) -> Any:
    """Instantiate a dataclass component from user arguments, with type checks and suggestions.

    The component's ``__post_init__`` validates values and raises ``BenchError``.
    """
    if isinstance(args, str) or args is None:
        args = parse_arg_string(args)
    owner = getattr(cls, "registry_name", cls.__name__)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in args.items():
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            known = ", ".join(fields) or "none"
            raise BenchError(f"{owner} has no parameter '{key}' (its parameters: {known}).{hint}")
        allow_inf = bool(fields[key].metadata.get("allows_infinity"))
        kwargs[key] = _coerce(owner, key, value, hints[key], allow_inf)
    return cls(**kwargs)


def added_later(default: Any) -> Any:
    """Declare a parameter added after records existed (a dataclass field with this default).

    While it holds its default it is left out of the resolved arguments, so a configuration
    that existed before it keeps its config hash and its stored records keep counting.
    """
    return dataclasses.field(default=default, metadata={"added_later": True})


def component_args(instance: Any) -> dict[str, Any]:
    """The resolved parameters of a component: every field with its value, defaults included,
    except a parameter ``added_later`` that still holds its default."""
    return {
        f.name: getattr(instance, f.name)
        for f in dataclasses.fields(instance)
        if f.init and not (f.metadata.get("added_later") and getattr(instance, f.name) == f.default)
    }


def _field_comments(cls: type) -> dict[str, str]:
    """The one-line comment after each field declaration, read from the class source."""
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        for match in _FIELD_COMMENT.finditer(source):
            comments[match.group(1)] = match.group(2).strip()
    return comments


_FIELD_COMMENT = re.compile(r"^\s+(\w+)\s*:[^\n#]*=[^\n#]*#\s*(.+)$", re.MULTILINE)


def describe_parameters(cls: type) -> list[tuple[str, str, Any, str]]:
    """(name, type, default, comment) of each parameter, for ``bench list``."""
    hints = typing.get_type_hints(cls)
    comments = _field_comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        kind = getattr(hints[f.name], "__name__", str(hints[f.name]))
        rows.append((f.name, kind, default, comments.get(f.name, "")))
    return rows


def require(condition: bool, message: str) -> None:
    """Raise ``BenchError(message)`` unless ``condition`` holds; used by ``__post_init__`` checks."""
    if not condition:
        raise BenchError(message)
