"""The result store: append-only JSON lines per defense, safe under concurrent writers.

Appends take a file lock and write one whole line in a single call, fsynced; a file whose last
line was cut off gets a newline first, so a damaged line can never swallow the next record.
Readers report a corrupt line (file and line number) and skip it; every other record survives.

Grid cells are claimed before they run (``claim``): a claim is an exclusive kernel lock (flock) on
``claims/<cell key digest>.lock`` under the results folder, held by the process running the cell. The
kernel drops it when that process ends, however it ends (``kill -9`` included), so a claim is never
stale and needs no timeout or process id: a lock file left behind by a dead process is no claim, and
the next run takes it at once. The file is removed once the cell's record is appended. (Needs a
filesystem with working flock, as every local one has; on NFS, one with lockd.)
This module has no heavy imports: the dashboard uses it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from filelock import FileLock, Timeout
from pydantic import ValidationError

from bench.core.errors import BenchError
from bench.core.registry import NAME
from bench.core.spec import RunSpec
from bench.results.record import ResultRecord


@dataclass
class CorruptLine:
    """A line that is not a valid record, with why."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: skipped a corrupt record ({self.reason})"


USER_RESULTS = "bench-results"  # where your runs go unless told otherwise; the committed board is results/
PUBLISHED_RESULTS = "results"


def published_results_dir() -> Path:
    """The committed board: this checkout's ``results/`` wherever the command runs (spelled ``results`` when the
    command runs in the checkout). Commands read it when asked (``--results-dir results``); the reference tables and
    their mappings are read from it when the results folder in use has none."""
    checkout = Path(__file__).resolve().parents[2] / PUBLISHED_RESULTS
    return Path(PUBLISHED_RESULTS) if Path(PUBLISHED_RESULTS).resolve() == checkout else checkout


def default_results_dir() -> Path:
    """The one default of every command: ``$BENCH_RESULTS_DIR``, else ``./bench-results``. Your runs stay apart
    from the published ``results/``, which a command reads or changes only when given ``--results-dir results``."""
    return Path(os.environ.get("BENCH_RESULTS_DIR") or USER_RESULTS)


AUDITS = "audits"  # <results>/audits/<name>.json: token-mechanism audits (bench audit --json)


class ResultStore:
    """Records under ``<root>/records/<defense>.jsonl`` and the leaderboard beside them."""

    def __init__(self, root: Path | str | None = None) -> None:
        if isinstance(root, str) and not root.strip():  # Path("") is the working folder: never a silent default
            raise BenchError("--results-dir is empty; name a results folder, or leave the option out for "
                             "$BENCH_RESULTS_DIR, else ./bench-results.")
        self.root = Path(root) if root is not None else default_results_dir()
        self.records_dir = self.root / "records"
        self.claims_dir = self.root / "claims"

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

    def check_writable(self, defenses: Iterable[str] = ()) -> None:
        """Refuse, before anything runs, a results folder that cannot take a record: a file in its place
        or a folder (or its nearest existing parent) without write permission; and for each of ``defenses``, a
        records file or lock file that is not a file (a folder, a dangling symbolic link), or a claims folder
        that is a file."""
        for folder in (self.root, self.records_dir, self.claims_dir):
            if folder.exists() and not folder.is_dir():
                raise BenchError(f"results folder {folder} is a file, not a folder; pass another --results-dir.")
        for defense in defenses:
            path = self.path_for(defense)
            for target in (path, Path(str(path) + ".lock")):
                if target.is_symlink() and not target.exists():
                    raise BenchError(f"records file {target} is a symbolic link to nothing; remove it or point it "
                                     "at a file.")
                if target.exists() and not target.is_file():
                    raise BenchError(f"records file {target} is not a file; move it away or pass another "
                                     "--results-dir.")
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

    def is_published(self) -> bool:
        """Whether this is the committed board (this checkout's ``results/``), however the folder is spelled."""
        return self.root.resolve() == published_results_dir().resolve()

    def check_exists(self) -> None:
        """Refuse a results folder that does not exist (a mistyped --results-dir) with one sentence."""
        if not self.root.is_dir():
            what = "is a file" if self.root.exists() else "does not exist"
            raise BenchError(f"results folder {self.root} {what}; pass the folder that holds records/ "
                             "(or set BENCH_RESULTS_DIR; the published board is --results-dir results).")

    def append(self, record: ResultRecord) -> Path:
        """Append one record atomically; returns the file written.

        A write that fails (a full disk, a quota) is undone: the file is cut back to its length before the
        append and a ``BenchError`` says what to do, so no partial line stays behind. Should even that cut
        fail, the torn line is skipped by readers and the next append starts on a fresh line.
        """
        line = record.model_dump_json() + "\n"
        ResultRecord.model_validate_json(line)  # never write what could not be read back
        path = self.path_for(record.defense)
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                start = os.fstat(fd).st_size  # stable: every writer holds the lock
                data = line.encode("utf-8")
                if start > 0 and not _ends_with_newline(path):
                    data = b"\n" + data
                try:
                    _write_all(fd, data)
                    os.fsync(fd)
                except OSError as exc:
                    try:
                        os.ftruncate(fd, start)
                        kept = "nothing of it was kept"
                    except OSError:
                        kept = "readers skip the torn line"
                    reason = os.strerror(exc.errno) if exc.errno else str(exc)
                    raise BenchError(f"could not append the record to {path} ({reason}; {kept}); free space (or "
                                     "fix the folder) and run again: a grid resumes at this cell.") from exc
            finally:
                os.close(fd)
        return path

    def claim_path(self, key: tuple) -> Path:
        """The lock file that claims the cell ``key`` (config hash, seed, component versions)."""
        digest = hashlib.sha256(repr(tuple(key)).encode("utf-8")).hexdigest()[:32]
        return self.claims_dir / f"{digest}.lock"

    @contextlib.contextmanager
    def claim(self, key: tuple, wait: bool | float = False) -> Iterator[bool]:
        """Claim cell ``key`` for this process while the block runs; yields False when another process holds it
        (``wait``: block until it is free instead, or at most ``wait`` seconds when a number). The holder must read
        the store again before running the cell, since the previous holder may have finished it; see the module
        docstring for the rule."""
        self.claims_dir.mkdir(parents=True, exist_ok=True)
        timeout = 0 if wait is False else -1 if wait is True else max(float(wait), 0.0)
        lock = FileLock(str(self.claim_path(key)), timeout=timeout)
        try:
            lock.acquire()
        except Timeout:
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    def finish_claim(self, key: tuple) -> None:
        """Remove a claim's file once the cell's record is stored (called while the claim is held)."""
        with contextlib.suppress(OSError):
            self.claim_path(key).unlink()

    def files(self) -> list[Path]:
        """Every records file, sorted."""
        return sorted(p for p in self.records_dir.glob("*.jsonl") if p.is_file()) if self.records_dir.is_dir() else []

    def scan(self) -> Iterator[ResultRecord | CorruptLine]:
        """Every record in every file, and a ``CorruptLine`` for each line that is not one."""
        for _, _, item in self._lines():
            yield item

    def _lines(self) -> Iterator[tuple[Path, int, ResultRecord | CorruptLine]]:
        for path in self.files():
            with open(path, encoding="utf-8", errors="replace") as handle:
                for number, text in enumerate(handle, start=1):
                    if not text.strip():
                        continue
                    try:
                        yield path, number, ResultRecord.model_validate_json(text)
                    except ValidationError as exc:
                        first = exc.errors()[0]
                        where = ".".join(str(p) for p in first.get("loc", ()))
                        reason = f"{where}: {first['msg']}" if where else first["msg"]
                        yield path, number, CorruptLine(path, number, reason)

    def read(self) -> tuple[list[ResultRecord], list[CorruptLine]]:
        """All valid records, and the corrupt lines that were skipped.

        Records that share a config hash must share their spec (all of it but the seed), since readers group by
        the hash: one whose spec differs is skipped and reported, so two configurations never merge. The spec
        that hashes to the shared hash is the configuration's; when none does, the first one read."""
        entries = list(self._lines())
        reference: dict[str, tuple[RunSpec, bool]] = {}
        for _, _, item in entries:
            if isinstance(item, ResultRecord):
                spec = _unseeded(item)
                hashes = spec.config_hash() == item.config_hash
                known = reference.get(item.config_hash)
                if known is None or (hashes and not known[1]):
                    reference[item.config_hash] = (spec, hashes)
        records: list[ResultRecord] = []
        problems: list[CorruptLine] = []
        for path, number, item in entries:
            if isinstance(item, ResultRecord) and _unseeded(item) != reference[item.config_hash][0]:
                item = CorruptLine(path, number, f"config_hash {item.config_hash} belongs to another spec; "
                                                 "skipped so that two configurations never merge")
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


def _unseeded(record: ResultRecord) -> RunSpec:
    """A record's spec with the seed set aside (what its config hash covers)."""
    return dataclasses.replace(record.run_spec, seed=0)


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (a short write is retried with the rest)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"
