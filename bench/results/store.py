"""The result store: append-only JSON lines per defense, safe under concurrent writers.

Appends take a file lock and write one whole line in a single call, fsynced; a file whose last
line was cut off gets a newline first, so a damaged line can never swallow the next record.
Readers report a corrupt line (file and line number) and skip it; every other record survives.
This module has no heavy imports: the dashboard uses it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from filelock import FileLock
from pydantic import ValidationError

from bench.core.errors import BenchError
from bench.core.registry import NAME
from bench.results.record import ResultRecord


@dataclass
class CorruptLine:
    """A line that is not a valid record, with why."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: skipped a corrupt record ({self.reason})"


def default_results_dir() -> Path:
    """``$BENCH_RESULTS_DIR``, else ``./results``."""
    return Path(os.environ.get("BENCH_RESULTS_DIR", "results"))


class ResultStore:
    """Records under ``<root>/records/<defense>.jsonl`` and the leaderboard beside them."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root) if root is not None else default_results_dir()
        self.records_dir = self.root / "records"

    def path_for(self, defense: str) -> Path:
        """The JSON-lines file of one defense; a name that is not a registry name (so could leave
        ``records/``) is refused."""
        if not isinstance(defense, str) or not NAME.match(defense):
            raise BenchError(f"defense name {defense!r} cannot name a records file: it must be lower-case letters "
                             "and digits joined by '-' or '_'.")
        path = self.records_dir / f"{defense}.jsonl"
        if path.resolve().parent != self.records_dir.resolve():  # belt and braces: never outside records/
            raise BenchError(f"defense name {defense!r} would write outside {self.records_dir}.")
        return path

    def check_writable(self) -> None:
        """Refuse, before anything runs, a results folder that cannot take a record: a file in its place
        or a folder (or its nearest existing parent) without write permission."""
        for folder in (self.root, self.records_dir):
            if folder.exists() and not folder.is_dir():
                raise BenchError(f"results folder {folder} is a file, not a folder; pass another --results-dir.")
        target = next(p for p in (self.records_dir, *self.records_dir.parents) if p.exists())
        if not target.is_dir():
            raise BenchError(f"results folder {self.root} cannot be created: {target} is a file.")
        if not os.access(target, os.W_OK | os.X_OK):
            raise BenchError(f"results folder {self.root} cannot be written ({target} is not writable); "
                             "pass a writable --results-dir.")
        for path in self.files():
            if not os.access(path, os.W_OK):
                raise BenchError(f"records file {path} is not writable; fix its permissions or pass another "
                                 "--results-dir.")

    def check_exists(self) -> None:
        """Refuse a results folder that does not exist (a mistyped --results-dir) with one sentence."""
        if not self.root.is_dir():
            what = "is a file" if self.root.exists() else "does not exist"
            raise BenchError(f"results folder {self.root} {what}; pass the folder that holds records/ "
                             "(or set BENCH_RESULTS_DIR).")

    def append(self, record: ResultRecord) -> Path:
        """Append one record atomically; returns the file written."""
        line = record.model_dump_json() + "\n"
        ResultRecord.model_validate_json(line)  # never write what could not be read back
        path = self.path_for(record.defense)
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            with open(path, "ab") as handle:
                if handle.tell() > 0 and not _ends_with_newline(path):
                    handle.write(b"\n")
                handle.write(line.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
        return path

    def files(self) -> list[Path]:
        """Every records file, sorted."""
        return sorted(self.records_dir.glob("*.jsonl")) if self.records_dir.is_dir() else []

    def scan(self) -> Iterator[ResultRecord | CorruptLine]:
        """Every record in every file, and a ``CorruptLine`` for each line that is not one."""
        for path in self.files():
            with open(path, encoding="utf-8", errors="replace") as handle:
                for number, text in enumerate(handle, start=1):
                    if not text.strip():
                        continue
                    try:
                        yield ResultRecord.model_validate_json(text)
                    except ValidationError as exc:
                        first = exc.errors()[0]
                        where = ".".join(str(p) for p in first.get("loc", ()))
                        reason = f"{where}: {first['msg']}" if where else first["msg"]
                        yield CorruptLine(path, number, reason)

    def read(self) -> tuple[list[ResultRecord], list[CorruptLine]]:
        """All valid records, and the corrupt lines that were skipped."""
        records: list[ResultRecord] = []
        problems: list[CorruptLine] = []
        for item in self.scan():
            (records if isinstance(item, ResultRecord) else problems).append(item)
        return records, problems

    def completed(self) -> set[tuple[str, int, str]]:
        """(config_hash, seed, component versions) of every stored cell, for resuming grids."""
        records, _ = self.read()
        return {(r.config_hash, r.seed, r.component_versions()) for r in records}

    @property
    def leaderboard_path(self) -> Path:
        """Where ``bench summarize`` writes the aggregated table."""
        return self.root / "leaderboard.csv"


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"
