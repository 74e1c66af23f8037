"""Atomic file writes: a temporary file in the target's folder, fsynced, then renamed over the target.

A reader sees the old file or the new one, never half of one, and an interrupted write leaves the
target as it was. The one implementation every writer of results, caches and reports uses. A published folder
(``atomic_directory``) carries a manifest of its files' sizes and digests, and ``verified`` checks it before a
cached artefact is used: one that does not verify is removed and rebuilt. A ``Build`` names such an artefact
before it is built (``bench.engine.builds``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator

from bench.core.errors import BenchError


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
    """A temporary folder beside ``target`` to fill; on a clean exit its manifest (``MANIFEST``: each file's size
    and SHA-256) is written and it is renamed to ``target`` (unless another process put ``target`` there first: its
    copy is kept and this one removed), on an error it is removed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        yield temporary
        _write_manifest(temporary)
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


# -- published folders verify: a cached checkpoint that was cut short or altered is rebuilt, never used ----------

MANIFEST = ".manifest.json"  # written by atomic_directory: {relative path: [size, sha256]} of every other file
_verified: dict[tuple, bool] = {}  # (folder, each file's name, size and mtime) -> verified, so a process hashes once


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_manifest(folder: Path) -> None:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    entries = {p.relative_to(folder).as_posix(): [p.stat().st_size, _digest(p)] for p in files}
    (folder / MANIFEST).write_text(json.dumps(entries, indent=1, sort_keys=True), encoding="utf-8")


def _safetensors_whole(path: Path) -> bool:
    """A safetensors file is as long as its header says (8 bytes of header length, the header, the tensors)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > size - 8:
                return False
            header = json.loads(handle.read(length))
        ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
        return size == 8 + length + max(ends, default=0)
    except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error):
        return False


def problem_of(folder: Path | str, marker: str) -> str | None:
    """Why a published folder must not be used (its ``marker`` file missing, a file of its manifest missing or of
    another size or digest; in a folder published before manifests, a safetensors file shorter or longer than
    its header says), or None when it verifies."""
    folder = Path(folder)
    if not (folder / marker).is_file():
        return f"{marker} is missing"
    manifest = folder / MANIFEST
    if not manifest.is_file():  # published before manifests: what can be checked without one
        bad = next((p for p in sorted(folder.glob("*.safetensors")) if not _safetensors_whole(p)), None)
        return None if bad is None else f"{bad.name} is not a whole safetensors file"
    try:
        seen = (str(folder), tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                                          for p in folder.rglob("*") if p.is_file())))
        if _verified.get(seen):  # hashed already by this process, and no file changed since
            return None
        entries = json.loads(manifest.read_text(encoding="utf-8"))
        for name, (size, digest) in entries.items():
            path = folder / name
            if not path.is_file():
                return f"{name} is missing"
            if path.stat().st_size != size:
                return f"{name} has {path.stat().st_size} bytes, not the {size} it was published with"
            if _digest(path) != digest:
                return f"{name} does not match the digest it was published with"
    except (OSError, ValueError, TypeError) as exc:
        return f"its manifest cannot be read ({type(exc).__name__})"
    _verified[seen] = True
    return None


def verified(folder: Path | str, marker: str, what: str) -> bool:
    """True when the published ``folder`` verifies (``problem_of``); a folder that does not is said in one warning
    and removed, so the caller rebuilds it (False), and a missing one is simply False."""
    folder = Path(folder)
    if not folder.exists():
        return False
    problem = problem_of(folder, marker)
    if problem is None:
        return True
    print(f"warning: the cached {what} {folder} does not verify ({problem}); it is rebuilt, never used.",
          file=sys.stderr)
    aside = folder.with_name(f".{folder.name}-corrupt-{os.getpid()}")
    with contextlib.suppress(OSError):
        os.replace(folder, aside)  # one rename: a reader never sees half a removal
        shutil.rmtree(aside, ignore_errors=True)
    return False


@dataclass(frozen=True)
class Build:
    """One artefact a cell builds before it runs, when the cache lacks it."""

    what: str  # what it is, as the dry run names it
    folder: Path  # where the cache keeps it; its name is its key
    marker: str  # the file written last into the folder
    seconds: float | None  # expected on this machine; None: nothing of its kind cached here to time it

    def done(self) -> bool:
        """Whether the cache holds it whole (nothing is removed when it does not)."""
        return self.folder.is_dir() and problem_of(self.folder, self.marker) is None
