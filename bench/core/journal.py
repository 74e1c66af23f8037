"""A checkpoint of per-item results of one long, deterministic computation, so that an interrupted run resumes.

The work is keyed by everything its results depend on (``identity``, hashed); each finished item is appended to
``$BENCH_CACHE_DIR/<namespace>/partial/<key>.jsonl`` as one JSON line and flushed at once. A rerun with the same
identity reads the finished items and computes only the rest, so its output is the one an uninterrupted run gives,
wherever the first run stopped. Only results that do not depend on the order of work may be journaled (the caller
draws its randomness before the journaled loop). A line cut off by a crash is dropped on reopening; the journal is
removed once the caller has stored the finished whole.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class Journal:
    """Append-only record of finished items: ``done`` maps an item's index to its JSON value, ``resumed`` counts
    the items an earlier run had finished."""

    def __init__(self, namespace: str, identity: Any) -> None:
        from bench.core.cache import cache_root, identity_key

        self.path: Path = cache_root() / namespace / "partial" / f"{identity_key(identity)}.jsonl"
        self.done: dict[int, Any] = {}
        self._stream = None
        self._read()
        self.resumed = len(self.done)

    def _read(self) -> None:
        try:
            raw = self.path.read_bytes()
        except OSError:
            return
        complete = raw[: raw.rfind(b"\n") + 1]  # a last line without its newline was cut off mid-write
        for line in complete.splitlines():
            try:
                index, value = json.loads(line)
                self.done[int(index)] = value
            except (ValueError, TypeError):
                continue  # a damaged line: that item is computed again
        if len(complete) != len(raw):
            try:
                with open(self.path, "r+b") as handle:
                    handle.truncate(len(complete))
            except OSError:
                pass

    def record(self, index: int, value: Any) -> None:
        """Keep ``value`` (JSON: numbers, strings, lists, None) as item ``index``'s result, on disk at once."""
        self.done[index] = value
        if self._stream is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._stream = open(self.path, "a", encoding="utf-8")
            except OSError:
                self._stream = False  # an unwritable cache: the run goes on without checkpoints
        if self._stream:
            self._stream.write(json.dumps([index, value]) + "\n")
            self._stream.flush()

    def close(self, finished: bool) -> None:
        """Close the file; remove it when the whole result is ``finished`` (and stored by the caller)."""
        if self._stream:
            self._stream.flush()
            os.fsync(self._stream.fileno())
            self._stream.close()
        self._stream = None
        if finished:
            self.path.unlink(missing_ok=True)
