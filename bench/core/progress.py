"""Progress of long steps on stderr: what runs, how far it is, its rate and the time left.

On a terminal a transient rich bar shows each loop (description, bar, done/total, rate, elapsed, time left). Where
stderr is not a terminal (a background job's log, CI), a step says nothing for its first ``FIRST_LINE`` seconds,
then prints a plain line every ``LOG_EVERY`` seconds and one when it ends, so a step that takes over ten seconds is
never silent. ``BENCH_QUIET`` turns reporting off; ``reporting(False)`` too (``bench run --json``), and
``reporting(True)`` turns it on even under ``BENCH_QUIET`` (``--progress``). ``note`` prints a one-off line (a
resumed run, a saved model) under the same switch.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
FIRST_LINE = 10.0  # seconds a step runs before its first line in a log
LOG_EVERY = 60.0  # seconds between its next lines
_clock = time.monotonic  # the clock rates and intervals are measured with (a test fakes a slow step with it)
_forced: bool | None = None  # reporting(...): on or off whatever BENCH_QUIET says; None: BENCH_QUIET decides


def enabled() -> bool:
    """Whether progress is reported: ``reporting``'s choice, else on unless ``BENCH_QUIET`` is set."""
    return _forced if _forced is not None else not os.environ.get("BENCH_QUIET")


@contextmanager
def reporting(on: bool | None) -> Iterator[None]:
    """Report progress (True), or not (False), while the block runs, whatever ``BENCH_QUIET`` says; None: leave it
    to ``BENCH_QUIET``."""
    global _forced
    before, _forced = _forced, on
    try:
        yield
    finally:
        _forced = before


def note(message: str) -> None:
    """One line on stderr (a resumed run, a checkpoint, a saved model), when progress is reported."""
    if enabled():
        print(message, file=sys.stderr, flush=True)


def _console():
    """The stderr console for bars, or None (reporting off, or stderr is not a terminal: lines instead)."""
    from rich.console import Console

    console = Console(stderr=True)
    return console if enabled() and console.is_terminal else None


def track(items: Iterable[T], description: str, total: int | None = None, unit: str = "steps") -> Iterator[T]:
    """Iterate over ``items`` while reporting progress (a transient bar on a terminal, lines in a log)."""
    total = total if total is not None else len(items) if hasattr(items, "__len__") else None
    with progress_bar(description, float(total or 0), unit=unit) as update:
        done = 0
        for item in items:
            yield item
            done += 1
            update(float(done))


@contextmanager
def progress_bar(description: str, total: float, completed: float = 0.0, enabled: bool = True,
                 log_every: float | None = LOG_EVERY, unit: str | None = "steps") -> Iterator[Callable[..., None]]:
    """Progress of a loop that is not one pass over items (training under a step or time budget that may resume
    part-way, work counted in its own units); yields ``update(completed, description=None)``. ``completed`` starts
    where a resumed run starts: the rate and the time left are this run's. ``unit`` None: the work has no unit a
    reader counts (shown as a share). ``enabled=False`` or ``log_every=None`` (lines in a log) leave it silent."""
    console = _console() if enabled else None
    if console is None:
        update = _progress_lines(description, total, completed, log_every if enabled else None, unit)
        yield update
        update(None)  # the step ended: its last line, if it printed any
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [TextColumn("[progress.description]{task.description}"), BarColumn(),
               MofNCompleteColumn() if unit and total >= 1 and float(total).is_integer() else
               TextColumn("[progress.percentage]{task.percentage:>3.0f}%"),
               TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total or None, completed=completed, rate="")
        began = _clock()

        def update(done: float, description: str | None = None) -> None:
            rate = (done - completed) / max(_clock() - began, 1e-9)
            bar.update(task, completed=done, rate=_rate(rate, unit, total),
                       **({"description": description} if description else {}))

        yield update


def _rate(rate: float, unit: str | None, total: float) -> str:
    """``12.3 texts/s``, or ``4.5 texts/min`` below one a second; a share of the total without a unit."""
    if unit is None:
        return f"{rate / total * 6000:.2g}%/min" if rate > 0 and total else ""
    return f"{rate:,.3g} {unit}/s" if rate >= 1 else f"{rate * 60:,.3g} {unit}/min" if rate > 0 else ""


def _duration(seconds: float) -> str:
    """``3 min 20 s``, ``1 h 5 min``, ``42 s``."""
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


def _progress_lines(description: str, total: float, start: float, every: float | None,
                    unit: str | None = "steps") -> Callable[..., None]:
    """``update(completed, description=None)`` for a log: silent for ``FIRST_LINE`` seconds, then a line at most every
    ``every`` seconds with the share done, the rate and the time left at this run's rate (measured from ``start``: a
    resumed run's earlier work is not this run's rate); ``update(None)`` ends the step with a last line if it printed
    any. Prints nothing when reporting is off or without ``every``."""
    if not enabled() or not every:
        return lambda completed, description=None: None
    began = _clock()
    last = began - every + FIRST_LINE  # the first line comes FIRST_LINE seconds in
    state = {"done": start, "printed": False, "description": description}

    def update(completed: float | None, now_description: str | None = None) -> None:
        nonlocal last
        if now_description:
            state["description"] = now_description
        now = _clock()
        if completed is None:  # the end of the step
            if state["printed"]:
                print(f"{state['description']}: done, {_count(state['done'], total, unit)} in "
                      f"{_duration(now - began)}", file=sys.stderr, flush=True)
            return
        state["done"] = completed
        if now - last < every:
            return
        last = now
        state["printed"] = True
        rate = (completed - start) / max(now - began, 1e-9)
        share = f"{completed / total:.0%}, " if total and unit is not None else ""
        left = f", about {_duration((total - completed) / rate)} left" if total and rate > 0 else ""
        pace = _rate(rate, unit, total) or "starting"
        print(f"{state['description']}: {share}{_count(completed, total, unit)}, {pace}{left}", file=sys.stderr,
              flush=True)

    return update


def _count(done: float, total: float, unit: str | None) -> str:
    """``2,944/8,872 texts``, or ``2,944 texts`` without a known total; ``63%`` without a unit."""
    if unit is None:
        return f"{done / total:.0%} done" if total else "running"
    if total:
        return f"{done:,.0f}/{total:,.0f} {unit}"
    return f"{done:,.0f} {unit}"
