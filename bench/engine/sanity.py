"""What a cell produced, checked before it is recorded: a release, a utility and an attack's guesses must be finite
numbers, and a token release must not collapse to one token; otherwise the cell is refused in one sentence.

Parameter ranges (``bench.core.params.within``) keep values a mechanism handles; these checks catch what slips
through (a plugin's mechanism, a training run that diverges inside its range), so that no broken cell is recorded
as a perfect defense or a perfect attack.
"""

from __future__ import annotations

import math
import types
from typing import Any

import numpy as np

from bench.core.components import OutputDefense, RepresentationDefense, TokenDefense
from bench.core.errors import BenchError
from bench.core.releases import GradientRelease, Release, ReleaseKind

MAX_DEPTH = 4  # nesting of lists, tuples and dicts searched for numbers


def non_finite(value: Any, depth: int = 0) -> bool:
    """True when ``value`` (a number, a NumPy or torch array, or lists, tuples and dicts of them) holds NaN or
    infinity; strings and other objects count as finite."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, bytes)):
        return False
    if isinstance(value, float):
        return not math.isfinite(value)
    # NaN and infinity carry through a sum, so a finite sum clears every element (one reduction, not an
    # elementwise test: the check runs on every hidden training batch); a sum that overflows is checked elementwise
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "fc" or value.size == 0:
            return False
        with np.errstate(over="ignore", invalid="ignore"):
            return not np.isfinite(value.sum()) and not bool(np.isfinite(value).all())
    if type(value).__module__.startswith("torch") and hasattr(value, "isfinite"):
        return (bool(value.is_floating_point()) and value.numel() > 0 and not math.isfinite(value.sum().item())
                and not bool(value.isfinite().all()))
    if depth >= MAX_DEPTH:
        return False
    if isinstance(value, dict):
        return any(non_finite(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(non_finite(v, depth + 1) for v in value)
    return False


def require_finite(what: str, value: Any, fix: str) -> None:
    """Raise a one-sentence ``BenchError`` naming ``what`` when ``value`` holds NaN or infinity."""
    if non_finite(value):
        raise BenchError(f"{what} holds NaN or infinite values, so nothing is recorded; {fix}")


def _release_values(release: Release) -> Any:
    data = release.data
    if isinstance(data, GradientRelease):
        return [data.gradients, data.targets]
    return data


def check_release(spec, release: Release, owned_texts: list | None = None) -> None:
    """A release must hold finite numbers; a token release of varied text must not be a single repeated token."""
    where = f"the {release.kind} release of defense '{spec.defense}'"
    require_finite(where, _release_values(release), "its parameters lie outside what the mechanism handles "
                                                    "numerically: try values nearer its defaults.")
    if release.kind is ReleaseKind.TEXT and owned_texts is not None:
        released = _distinct_tokens(release.data)
        if released is not None and len(released[0]) == 1 and released[1] >= 2 and _distinct_words(owned_texts) > 1:
            raise BenchError(f"{where} is one token repeated {released[1]} times for texts of many words, which the "
                             "mechanism cannot produce with sound arithmetic, so nothing is recorded; try parameter "
                             "values nearer its defaults.")


def _distinct_tokens(data: Any) -> tuple[set, int] | None:
    """(distinct tokens, tokens) of a token release: id arrays or space-joined words; None for other data."""
    if not isinstance(data, (list, tuple)) or not data:
        return None
    seen: set = set()
    count = 0
    for row in data:
        if isinstance(row, str):
            tokens = row.split()
        elif isinstance(row, np.ndarray) and row.dtype.kind in "iu":
            tokens = row.tolist()
        else:
            return None
        seen.update(tokens)
        count += len(tokens)
    return seen, count


def _distinct_words(texts: list) -> int:
    words: set = set()
    for text in texts:
        parts = text if isinstance(text, (list, tuple)) else [text]
        for part in parts:
            if isinstance(part, str):
                words.update(part.split())
            elif isinstance(part, (list, tuple)):
                words.update(str(w) for w in part)
        if len(words) > 1:
            break
    return len(words)


def check_client_part(spec, output, data) -> None:
    """After the client and server parts: finite utility (and probe) metrics, and sound releases made so far."""
    require_finite(f"the utility of task '{spec.task}' under defense '{spec.defense}'", [output.utility, output.probe],
                   "the server's training diverged or its predictions are degenerate: try parameter values nearer "
                   "their defaults (--train-args lr=, the defense's arguments).")
    for release in output.releases.values():
        check_release(spec, release, _owned_texts(release, data))


def check_attack(spec, release: Release, data, guesses: Any, random_guesses: Any) -> None:
    """After the attack: the attacked release (a deferred one was built for it), its guesses and its random
    reference hold finite numbers."""
    check_release(spec, release, _owned_texts(release, data))
    for what, found in (("guesses", guesses), ("random-guess reference", random_guesses)):
        values = found if isinstance(found, (np.ndarray, list, tuple, dict)) else getattr(found, "__dict__", None)
        require_finite(f"the {what} of attack '{spec.attack}'", values,
                       "its parameters lie outside what it handles numerically (e.g. a learning rate too large): "
                       "try values nearer its defaults.")


def _owned_texts(release: Release, data) -> list | None:
    """The texts the release's rows were made from (None when the release has no such split)."""
    owned = getattr(data, release.split, None)
    texts = getattr(owned, "texts", None)
    if texts is None or release.owners is None:
        return None
    return [texts[int(i)] for i in np.asarray(release.owners)[:1000]]


# -- what a defense's mechanism returns, checked as it returns it ----------------------------------------------


def mechanism_output(owner: str, method: str, value: Any, rows: int, kind: str = "array") -> None:
    """A mechanism's return value must be an array (NumPy or torch) of ``rows`` rows holding finite numbers;
    otherwise one sentence naming the defense and the method."""
    shape = getattr(value, "shape", None)
    if shape is None or isinstance(value, (str, bytes)):
        raise BenchError(f"{owner}.{method} returned {type(value).__name__}, not an {kind} of {rows} rows; it must "
                         "return one row per input row.")
    if len(shape) == 0 or shape[0] != rows:
        raise BenchError(f"{owner}.{method} returned {shape[0] if len(shape) else 0} rows for {rows} input rows; it "
                         "must return one row per input row.")
    if non_finite(value):
        raise BenchError(f"{owner}.{method} returned NaN or infinite values, so nothing is recorded; check its "
                         "arithmetic for these parameters.")


def token_output(owner: str, value: Any, rows: int) -> None:
    """A token mechanism's ``privatize`` must return a list of ``rows`` NumPy arrays (released ids, or vectors)
    holding finite numbers; otherwise one sentence naming the defense."""
    who = f"the token mechanism of {owner}"
    if not isinstance(value, (list, tuple)):
        raise BenchError(f"{who} returned {type(value).__name__} from privatize, not a list of {rows} id arrays; it "
                         "must return one array per input sentence.")
    if len(value) != rows:
        raise BenchError(f"{who} returned {len(value)} sentences from privatize for {rows}; it must return one "
                         "array per input sentence.")
    for row in value:
        if not isinstance(row, np.ndarray) or row.dtype.kind not in "iuf":
            raise BenchError(f"{who} returned a {type(row).__name__} for a sentence, not a NumPy array of ids (or "
                             "vectors); it must return one array per input sentence.")
    if non_finite(list(value)):
        raise BenchError(f"{who} returned NaN or infinite values from privatize, so nothing is recorded; check its "
                         "arithmetic for these parameters.")


def guard(defense: Any) -> Any:
    """Wrap, on this instance, the methods whose results leave the client (``hide``, ``hide_batch``,
    ``hide_inference``, ``client_transform``'s transforms, ``answer``, the ``privatize`` of each token mechanism
    it builds) so that each result is checked as it is returned (``mechanism_output``, ``token_output``); returns
    ``defense``."""
    owner = f"defense '{getattr(type(defense), 'registry_name', type(defense).__name__)}'"

    def rows_of(value: Any) -> int:
        return int(getattr(value, "shape", [len(value)])[0])

    if isinstance(defense, RepresentationDefense):
        hide_batch, hide_inference, client_transform = (defense.hide_batch, defense.hide_inference,
                                                        defense.client_transform)

        def checked_batch(transform, name):
            def run(reps, targets, generator, *more, **named):
                out = transform(reps, targets, generator, *more, **named)
                if not isinstance(out, tuple) or len(out) != 2:
                    raise BenchError(f"{owner}.{name} returned {type(out).__name__}; it must return (hidden "
                                     "representations, targets).")
                mechanism_output(owner, name, out[0], rows_of(reps))
                mechanism_output(owner, name + " (targets)", out[1], rows_of(targets))
                return out
            return run

        def checked_inference(reps, generator, *more, **named):
            out = hide_inference(reps, generator, *more, **named)
            mechanism_output(owner, "hide_inference", out, rows_of(reps))
            return out

        defense.hide_batch = checked_batch(hide_batch, "hide_batch")
        defense.hide_inference = checked_inference
        defense.client_transform = lambda client: checked_batch(client_transform(client), "client_transform")
    if isinstance(defense, OutputDefense):
        answer = defense.answer

        def checked_answer(logits, rng, *more, **named):
            out = answer(logits, rng, *more, **named)
            mechanism_output(owner, "answer", out, rows_of(logits))
            return out

        defense.answer = checked_answer
    if isinstance(defense, TokenDefense):
        token_mechanism = defense.token_mechanism

        def checked_privatize(mechanism, ids, space, rng, *rest, **keywords):
            out = type(mechanism).privatize(mechanism, ids, space, rng, *rest, **keywords)
            token_output(owner, out, len(ids))
            return out

        def checked_mechanism(*more, **named):
            mechanism = token_mechanism(*more, **named)
            # a bound method: a deep copy of the mechanism (privacy-adaptive pretraining fits its own) checks
            # the copy's privatize, not the original's
            mechanism.privatize = types.MethodType(checked_privatize, mechanism)
            return mechanism

        defense.token_mechanism = checked_mechanism
    return defense
