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


@dataclasses.dataclass(frozen=True)
class Range:
    """The interval in which a numeric parameter keeps its mechanism numerically meaningful."""

    low: float
    high: float
    low_open: bool
    high_open: bool
    text: str  # as declared, e.g. "(0, 1e30]"

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


_RANGE = re.compile(r"^\s*([\[(])\s*([^,\s]+)\s*,\s*([^,\s\])]+)\s*([\])])\s*$")


def parse_range(text: str) -> Range:
    """``"(0, 1e30]"`` -> a ``Range`` (brackets closed, parentheses open; both bounds finite numbers)."""
    match = _RANGE.match(text)
    if not match:
        raise ValueError(f"a range is written like (0, 1e30] or [1, 1024], got {text!r}")
    low, high = float(match.group(2)), float(match.group(3))
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise ValueError(f"range {text!r} needs finite bounds, low <= high")
    return Range(low, high, match.group(1) == "(", match.group(4) == ")", text.strip())


def within(default: Any, interval: str, *, later: bool = False, infinite: bool = False) -> Any:
    """Declare a numeric parameter (a dataclass field with this default) and the interval in which its mechanism
    is numerically meaningful, e.g. ``eps: float = within(14.0, "(0, 1e30]")``; ``build_component`` refuses a value
    outside it before anything runs. ``later=True`` also marks it ``added_later``; ``infinite=True`` also admits
    inf (as ``allows_infinity``). A default of None or a word (``auto``) stands outside the range."""
    interval_ = parse_range(interval)
    if default is not None and not isinstance(default, str) and default not in interval_:
        raise ValueError(f"default {default!r} lies outside its range {interval}")
    metadata = {"range": interval_, **({"added_later": True} if later else {}),
                **({"allows_infinity": True} if infinite else {})}
    return dataclasses.field(default=default, metadata=metadata)


def declared_range(field: dataclasses.Field) -> Range | None:
    """The range declared beside a parameter with ``within``, else None."""
    return field.metadata.get("range")


def check_ranges(owner: str, instance: Any) -> None:
    """Refuse, in one sentence, a numeric parameter of ``instance`` outside its declared range."""
    for field in dataclasses.fields(instance):
        interval = declared_range(field)
        value = getattr(instance, field.name)
        if interval is None or isinstance(value, (bool, str)) or not isinstance(value, (int, float)):
            continue
        if math.isinf(value) and field.metadata.get("allows_infinity"):
            continue
        if value not in interval:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            raise BenchError(f"{owner} parameter {field.name} must lie in {interval.text}, the range in which it is "
                             f"numerically meaningful, got {shown}.")


class NotFinite(BenchError):
    """NaN, or infinity where a parameter does not allow it: a number out of bounds, never a word."""


def _finite(owner: str, name: str, value: Any, allow_inf: bool) -> Any:
    """Refuse NaN, and infinity unless the field allows it, in a float value."""
    if isinstance(value, float) and not math.isfinite(value):
        if math.isnan(value) or not allow_inf:
            raise NotFinite(f"{owner} parameter {name} must be a finite number, got {value}.")
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
                except NotFinite:
                    raise  # "nan" or "inf" is a number out of bounds, not a word
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
                raise NotFinite(f"{owner} parameter {name} must be a finite number, got '{value}'.")
            return result
        return annotation(value)
    except (TypeError, ValueError):
        kind = getattr(annotation, "__name__", str(annotation))
        raise BenchError(f"{owner} parameter {name} must be {kind}, got '{value}'.") from None


def build_component(cls: type, args: Mapping[str, Any] | str | None) -> Any:
    """Instantiate a dataclass component from user arguments, with type checks and suggestions.

    The component's ``__post_init__`` validates values and raises ``BenchError``; then every parameter must lie in
    the range declared beside it (``within``).
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
    instance = cls(**kwargs)
    check_ranges(owner, instance)
    return instance


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
