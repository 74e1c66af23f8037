"""Atomic file writes: a temporary file in the target's folder, fsynced, then renamed over the target.

A reader sees the old file or the new one, never half of one, and an interrupted write leaves the
target as it was. The one implementation every writer of results, caches and reports uses.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator


@contextlib.contextmanager
def atomic_writer(path: Path | str, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file for ``path`` (``mode`` "w" for text, "wb" for bytes); on a clean exit it is
    fsynced and renamed into place with the usual permissions, on an error it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, mode, **({"encoding": "utf-8", "newline": ""} if "b" not in mode else {})) as stream:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(stream.fileno(), 0o666 & ~umask)  # mkstemp makes it private; results are shared files
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def output_file(path: Path | str, what: str) -> Path:
    """``path`` checked as a file this process can write (its folder created), before any work is spent on what
    goes into it; a folder, or a folder that cannot be made or written, raises ``BenchError`` (one sentence)."""
    from bench.core.errors import BenchError

    path = Path(path)
    if path.is_dir():
        raise BenchError(f"{what} {path} is a folder; give a file name.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchError(f"cannot write {what} {path}: its folder cannot be made ({exc.strerror}).") from None
    if not os.access(path.parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise BenchError(f"cannot write {what} {path}: permission denied.")
    return path


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write ``text`` to ``path`` through ``atomic_writer``."""
    with atomic_writer(path) as handle:
        handle.write(text)


def read_utf8(path: Path | str, encoding: str = "utf-8") -> str:
    """The text of a data or configuration file; bytes that are not UTF-8 raise ``BenchError`` naming the
    file and the line (one sentence, never a traceback)."""
    from bench.core.errors import BenchError

    path = Path(path)
    raw = path.read_bytes()
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise BenchError(f"{path}:{line} is not UTF-8 text (byte 0x{raw[exc.start]:02x}); re-save the file as "
                         "UTF-8 or restore the original download.") from None


@contextlib.contextmanager
def atomic_directory(target: Path | str) -> Iterator[Path]:
    """A temporary folder beside ``target`` to fill; on a clean exit it is renamed to ``target`` (unless another
    process put ``target`` there first: its copy is kept and this one removed), on an error it is removed."""
    import shutil

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        yield temporary
        if target.exists():
            shutil.rmtree(temporary)
            return
        try:
            os.replace(temporary, target)
        except OSError:
            if not target.is_dir():  # not a lost race: a real failure
                raise
            shutil.rmtree(temporary)  # another process published between the check and the rename: it won
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
