"""The release store: what a cell released, kept so that a later attack on the same configuration runs alone.

An entry is a folder ``$BENCH_CACHE_DIR/releases/<key>/`` holding ``payload.npz`` (arrays, loaded without pickle)
and ``entry.json`` (everything else as JSON, arrays referred to by name), with a SHA-256 of both in ``entry.json``:
a changed byte makes the entry unreadable (``CorruptEntry``), never a wrong one. The key names the content (the
caller hashes the configuration into it), so an entry is written once, atomically, and never changed; a folder's
modification time is its last use. Past the size limit (``BENCH_RELEASE_STORE_GB``, default 5; 0 turns the store
off) the least recently used entries go. Values are nested lists, tuples, string-keyed or other dicts, strings,
numbers, None and NumPy arrays or scalars (``pack`` / ``unpack``). This module has no heavy imports.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.core.cache import cache_root, warn_unwritable
from bench.core.errors import BenchError
from bench.core.files import atomic_directory

LIMIT_VARIABLE = "BENCH_RELEASE_STORE_GB"
DEFAULT_GB = 5.0  # a token release of a few thousand sentences takes a few MB; a sentence one, a few hundred kB
FORMAT = 1  # of entry.json; a new format is a new key, so old entries are never misread
PAYLOAD, ENTRY = "payload.npz", "entry.json"


class CorruptEntry(Exception):
    """An entry that exists but cannot be trusted (unreadable, or its checksum does not match)."""


def limit_gb() -> float:
    """The size limit in GB from ``$BENCH_RELEASE_STORE_GB`` (default ``DEFAULT_GB``); bad values raise BenchError."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_GB
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise BenchError(f"{LIMIT_VARIABLE} must be a size in GB of at least 0 (0 turns the release store off), "
                         f"got {text!r}.")
    return value


@dataclass
class Entry:
    """A stored entry: its JSON part and its arrays."""

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]


class ReleaseStore:
    """Entries under ``root`` (default ``$BENCH_CACHE_DIR/releases``), at most ``limit_bytes`` in all."""

    def __init__(self, root: Path | str | None = None, limit_bytes: float | None = None) -> None:
        self.root = Path(root) if root is not None else cache_root() / "releases"
        self.limit_bytes = limit_gb() * 1e9 if limit_bytes is None else float(limit_bytes)
        if self.root.exists() and not self.root.is_dir():
            raise BenchError(f"release store {self.root} is a file, not a folder; move it or set BENCH_CACHE_DIR "
                             f"(or {LIMIT_VARIABLE}=0 to run without the store).")

    @classmethod
    def configured(cls) -> "ReleaseStore | None":
        """The store the environment sets up, or None when its limit is 0 (checked: BenchError on bad settings)."""
        store = cls()
        return store if store.limit_bytes > 0 else None

    def path(self, key: str) -> Path:
        """The folder of entry ``key`` (hex digits only, so it stays under ``root``)."""
        if not key or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"release store key {key!r} is not a hex digest")
        return self.root / key

    def has(self, key: str) -> bool:
        """Whether an entry is stored under ``key`` (not read, not checked)."""
        return (self.path(key) / ENTRY).is_file()

    def get(self, key: str) -> Entry | None:
        """The entry under ``key`` (marked as used), None when absent; ``CorruptEntry`` when it cannot be trusted."""
        folder = self.path(key)
        try:
            text = (folder / ENTRY).read_bytes()
            payload = (folder / PAYLOAD).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CorruptEntry(f"unreadable ({exc.strerror or exc})") from None
        try:
            stored = json.loads(text)
            meta, checksum = stored["meta"], stored["sha256"]
        except (ValueError, KeyError, TypeError):
            raise CorruptEntry("its entry.json is not the store's JSON") from None
        if checksum != _checksum(meta, payload):
            raise CorruptEntry("its checksum does not match its content")
        try:
            with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
        except Exception as exc:  # noqa: BLE001 - a bad archive of any kind is a corrupt entry
            raise CorruptEntry(f"its arrays cannot be read ({exc.__class__.__name__})") from None
        try:
            os.utime(folder)  # last use, for least-recently-used eviction
        except OSError:
            pass
        return Entry(meta, arrays)

    def put(self, key: str, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> bool:
        """Store an entry under ``key`` atomically (an existing one is kept), then evict past the limit; False when
        it was not stored (larger than the limit, or the folder cannot be written: warned once)."""
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        payload = buffer.getvalue()
        text = json.dumps({"meta": meta, "sha256": _checksum(meta, payload)}, sort_keys=True)
        if len(payload) + len(text) > self.limit_bytes:
            return False
        try:
            with atomic_directory(self.path(key)) as folder:
                (folder / PAYLOAD).write_bytes(payload)
                (folder / ENTRY).write_text(text, encoding="utf-8")
            self.evict(keep=key)
        except OSError as exc:
            warn_unwritable(self.root, exc)
            return False
        return True

    def remove(self, key: str) -> None:
        """Remove entry ``key`` (renamed away first, so no reader sees half of it)."""
        folder = self.path(key)
        if not folder.exists():
            return
        try:
            doomed = Path(tempfile.mkdtemp(dir=self.root, prefix=".removed-"))
            os.replace(folder, doomed / key)
        except OSError:
            return  # another process removed or replaced it first
        shutil.rmtree(doomed, ignore_errors=True)

    def entries(self) -> list[tuple[str, int, float]]:
        """``(key, bytes, last use)`` of every entry, least recently used first."""
        found = []
        if not self.root.is_dir():
            return found
        for folder in self.root.iterdir():
            if folder.name.startswith(".") or not folder.is_dir():
                continue
            try:
                size = sum(p.stat().st_size for p in folder.iterdir())
                found.append((folder.name, size, folder.stat().st_mtime))
            except OSError:
                continue  # removed meanwhile
        return sorted(found, key=lambda item: item[2])

    def evict(self, keep: str | None = None) -> None:
        """Remove the least recently used entries until the store is within its limit (``keep`` last)."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        for key, size, _ in sorted(entries, key=lambda item: item[0] == keep):  # stable: LRU order otherwise
            if total <= self.limit_bytes:
                break
            self.remove(key)
            total -= size


def _checksum(meta: dict[str, Any], payload: bytes) -> str:
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode("utf-8"))
    digest.update(b"\0")
    digest.update(payload)
    return digest.hexdigest()


# -- values as JSON with arrays beside it ---------------------------------------------------------------------


def pack(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """``value`` as JSON, its arrays moved into ``arrays`` (named ``a<n>``); ``TypeError`` for what cannot be
    stored without pickle (objects, object arrays)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":  # a number in JSON, with its dtype
        return {"$scalar": value.dtype.str, "value": value.item()}
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise TypeError("an object array cannot be stored without pickle")
        name = f"a{len(arrays)}"
        arrays[name] = array
        return {"$array": name, "scalar": isinstance(value, np.generic)}
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, tuple):
        return {"$tuple": [pack(v, arrays) for v in value]}
    if isinstance(value, list):
        if len(value) > 1 and all(isinstance(v, np.ndarray) and not v.dtype.hasobject for v in value) and \
                len({(v.dtype.str, v.shape[1:]) for v in value}) == 1 and value[0].ndim:  # one array and lengths
            return {"$ragged": pack(np.concatenate(value), arrays),
                    "lengths": pack(np.array([len(v) for v in value], dtype=np.int64), arrays)}
        if len(value) > 1 and all(isinstance(v, tuple) and len(v) == len(value[0]) > 0 for v in value) and \
                all(isinstance(x, np.ndarray) for v in value for x in v):  # pairs of arrays: one list per member
            return {"$zip": [pack([v[i] for v in value], arrays) for i in range(len(value[0]))]}
        return [pack(v, arrays) for v in value]
    if isinstance(value, dict):
        return {"$dict": [[pack(k, arrays), pack(v, arrays)] for k, v in value.items()]}
    raise TypeError(f"a {type(value).__name__} cannot be stored without pickle")


def unpack(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The inverse of ``pack``; ``KeyError`` / ``TypeError`` / ``ValueError`` on a skeleton it did not write."""
    if isinstance(value, list):
        return [unpack(v, arrays) for v in value]
    if not isinstance(value, dict):
        return value
    if "$scalar" in value:
        return np.array(value["value"], dtype=np.dtype(value["$scalar"]))[()]
    if "$zip" in value:
        return list(zip(*(unpack(v, arrays) for v in value["$zip"])))
    if "$array" in value:
        array = arrays[value["$array"]]
        return array[()] if value["scalar"] else array
    if "$tuple" in value:
        return tuple(unpack(v, arrays) for v in value["$tuple"])
    if "$ragged" in value:
        flat, lengths = unpack(value["$ragged"], arrays), unpack(value["lengths"], arrays)
        return list(np.split(flat, np.cumsum(lengths)[:-1])) if len(lengths) else []
    if "$dict" in value:
        return {unpack(k, arrays): unpack(v, arrays) for k, v in value["$dict"]}
    raise ValueError(f"unknown stored value {sorted(value)}")
