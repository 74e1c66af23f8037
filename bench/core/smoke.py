"""The smoke budget of ``bench run --check``: what a cell builds once, built small and kept apart from real runs.

A spec with ``smoke`` set (``--check``) runs its cell inside ``smoke_budget()``. There every artefact the cell
would build once and cache is built at a budget that only exercises the plumbing: the offline MLM
(``minilm-mlm`` becomes ``minilm-mlm@<MLM_STEPS>``, trained on a slice of the public corpus), privacy-adaptive and
further pretraining (a slice of their corpus; their steps are the spec's), NDD and mask rewrites (of the cell's few
examples). Each cache key then carries a smoke mark (``mark``), which no real run's key has, so a real run never
reads a smoke artefact nor a smoke run a real one; outside the budget keys are what they always were. The builders
``note`` what they used, and the record's notes list it (``smoke_budget``).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

MLM_STEPS = 20  # optimizer steps of the offline MLM at the smoke budget (minilm-mlm@20)
MLM_LAYERS = 1  # its transformer layers (the encoder's first): every pass of the MLM in the cell is that much cheaper
MLM_BATCH = 4  # its packed sequences per step
MLM_SEQ_LEN = 32  # its tokens per packed sequence
SENTENCES = 512  # public sentences a smoke build trains on (offline MLM, adaptation)
HELD_OUT = 16  # held-out sentences a smoke build is measured on
NOTE = "smoke_budget"  # the record's note that lists what was built at the smoke budget

_USED: ContextVar[list[str] | None] = ContextVar("smoke_budget", default=None)


@contextmanager
def smoke_budget(on: bool = True) -> Iterator[list[str]]:
    """Run the block at the smoke budget (``on``) or at the full one; yields the list ``note`` fills."""
    used: list[str] = []
    token = _USED.set(used if on else None)
    try:
        yield used
    finally:
        _USED.reset(token)


def active() -> bool:
    """Whether the running cell is at the smoke budget."""
    return _USED.get() is not None


def mark(payload: dict[str, Any]) -> dict[str, Any]:
    """A cache key's payload, with the smoke mark at the smoke budget (unchanged otherwise)."""
    return {**payload, "smoke": True} if active() else payload


def note(artefact: str) -> None:
    """Say that ``artefact`` (e.g. ``minilm-mlm@20 (key ...)``) was used at the smoke budget (once per cell)."""
    used = _USED.get()
    if used is not None and artefact not in used:
        used.append(artefact)


def describe(record_notes: dict[str, Any]) -> str | None:
    """The output's line for a record made at the smoke budget, else None."""
    if NOTE not in record_notes:
        return None
    used = record_notes[NOTE]
    return "smoke budget: " + ("; ".join(used) if used else "no cached artefact built") + \
        " (never used by a real run; this record is not for the board)"
