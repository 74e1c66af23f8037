"""Progress bars on stderr (rich), quiet when ``BENCH_QUIET`` is set. Where stderr is not a terminal (a background
job's log), a loop longer than ``LOG_EVERY`` seconds prints a plain progress line that often instead."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
LOG_EVERY = 600.0  # seconds between progress lines in a log


def _console():
    """The stderr console, or None when bars are off (``BENCH_QUIET``, or stderr is not a terminal)."""
    from rich.console import Console

    console = Console(stderr=True)
    return None if os.environ.get("BENCH_QUIET") or not console.is_terminal else console


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate over ``items`` while showing a transient progress bar (on a terminal; in a log, a line every
    ``LOG_EVERY`` seconds)."""
    console = _console()
    if console is None:
        total = total if total is not None else len(items) if hasattr(items, "__len__") else None
        update = _progress_lines(description, float(total or 0), 0.0, LOG_EVERY)
        for done, item in enumerate(items):
            update(float(done))
            yield item
        return
    from rich.progress import track as rich_track

    yield from rich_track(items, description=description, total=total, transient=True, console=console)


@contextmanager
def progress_bar(description: str, total: float, completed: float = 0.0, enabled: bool = True,
                 log_every: float | None = LOG_EVERY) -> Iterator[Callable[..., None]]:
    """A transient progress bar (on a terminal only, and only if ``enabled``) for a loop that is not one pass over
    items, such as training under a step or time budget that may resume part-way; yields
    ``update(completed, description=None)``. Where stderr is not a terminal (a background job's log), a plain line
    at most every ``log_every`` seconds (None: none) stands in for the bar: the share done and the time left at this
    run's rate."""
    console = _console() if enabled else None
    if console is None:
        yield _progress_lines(description, total, completed, log_every if enabled else None)
        return
    from rich.progress import Progress

    with Progress(*Progress.get_default_columns(), console=console, transient=True) as bar:
        task = bar.add_task(description, total=total, completed=completed)

        def update(completed: float, description: str | None = None) -> None:
            bar.update(task, completed=completed, **({"description": description} if description else {}))

        yield update


def _progress_lines(description: str, total: float, start: float, every: float | None) -> Callable[..., None]:
    """``update(completed, description=None)`` that prints a progress line to stderr at most every ``every``
    seconds, its time left extrapolated from the work done since ``start`` (a resumed run's earlier work is not
    this run's rate); one that prints nothing under ``BENCH_QUIET``, without ``every`` or without a known total."""
    if os.environ.get("BENCH_QUIET") or not every or not total:
        return lambda completed, description=None: None
    began = last = time.monotonic()

    def update(completed: float, now_description: str | None = None) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < every:
            return
        last = now
        rate = (completed - start) / max(now - began, 1e-9)
        left = f", about {(total - completed) / rate / 60:.0f} min left at this run's rate" if rate > 0 else ""
        print(f"{now_description or description}: {completed / total:.0%} done{left}",
              file=sys.stderr, flush=True)

    return update
