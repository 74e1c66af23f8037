"""Progress bars on stderr (rich), quiet when ``BENCH_QUIET`` is set."""

from __future__ import annotations

import os
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate over ``items`` while showing a transient progress bar (on a terminal only)."""
    from rich.console import Console

    console = Console(stderr=True)
    if os.environ.get("BENCH_QUIET") or not console.is_terminal:
        yield from items
        return
    from rich.progress import track as rich_track

    yield from rich_track(items, description=description, total=total, transient=True, console=console)
