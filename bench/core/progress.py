"""Progress bars on stderr (rich), quiet when ``BENCH_QUIET`` is set."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")


def _console():
    """The stderr console, or None when bars are off (``BENCH_QUIET``, or stderr is not a terminal)."""
    from rich.console import Console

    console = Console(stderr=True)
    return None if os.environ.get("BENCH_QUIET") or not console.is_terminal else console


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate over ``items`` while showing a transient progress bar (on a terminal only)."""
    console = _console()
    if console is None:
        yield from items
        return
    from rich.progress import track as rich_track

    yield from rich_track(items, description=description, total=total, transient=True, console=console)


@contextmanager
def progress_bar(description: str, total: float, completed: float = 0.0,
                 enabled: bool = True) -> Iterator[Callable[..., None]]:
    """A transient progress bar (on a terminal only, and only if ``enabled``) for a loop that is not one pass over
    items, such as training under a step or time budget that may resume part-way; yields
    ``update(completed, description=None)``."""
    console = _console() if enabled else None
    if console is None:
        yield lambda completed, description=None: None
        return
    from rich.progress import Progress

    with Progress(*Progress.get_default_columns(), console=console, transient=True) as bar:
        task = bar.add_task(description, total=total, completed=completed)

        def update(completed: float, description: str | None = None) -> None:
            bar.update(task, completed=completed, **({"description": description} if description else {}))

        yield update
