"""On-disk cache of encoded features, keyed by encoder, revision, settings and a hash of the texts."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from bench.core.files import atomic_writer


def cache_root() -> Path:
    """``$BENCH_CACHE_DIR`` when set and not empty, else ``~/.cache/bench``."""
    return Path(os.environ.get("BENCH_CACHE_DIR") or Path.home() / ".cache" / "bench").expanduser()


def cached_infos(kind: str, marker: str) -> Iterator[dict]:
    """What the ``marker`` JSON file of each artefact cached under ``kind`` (``adapted``, ``mlm``) says; an
    unreadable one is passed over."""
    for file in (cache_root() / kind).glob(f"*/{marker}"):
        try:
            yield json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue


def identity_key(identity: Any) -> str:
    """SHA-256 (32 hex digits) of a picklable identity: the key of a cached or checkpointed result that depends on
    exactly those inputs."""
    import pickle

    return hashlib.sha256(pickle.dumps(identity, protocol=4)).hexdigest()[:32]


def texts_key(settings: dict[str, Any], texts: Iterable[str | np.ndarray]) -> str:
    """SHA-256 of the encoder settings and the exact inputs, in order.

    Inputs are texts, or arrays (token ids, token vectors) hashed with their dtype and shape, or
    pairs of either (the key of a single item is unchanged by pair support).
    """
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8"))
    for item in texts:
        for number, part in enumerate(item if isinstance(item, tuple) else (item,)):
            if number:
                digest.update(b"\x1f")  # between the two segments of a pair
            if isinstance(part, str):
                digest.update(part.encode("utf-8"))
            else:
                array = np.ascontiguousarray(part)
                digest.update(f"{array.dtype}{array.shape}".encode())
                digest.update(array.tobytes())
        digest.update(b"\x1e")
    return digest.hexdigest()


class FeatureCache:
    """Arrays stored as ``.npy`` files; writes are atomic so a crash never leaves half a file."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root  # None: resolve $BENCH_CACHE_DIR at each access

    @property
    def root(self) -> Path:
        """The folder that holds the feature files."""
        return (self._root or cache_root()) / "features"

    def _path(self, namespace: str, key: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in namespace)
        return self.root / safe / f"{key}.npy"

    def get(self, namespace: str, key: str) -> np.ndarray | None:
        """The cached array, or None when absent or unreadable."""
        path = self._path(namespace, key)
        if not path.exists():
            return None
        try:
            return np.load(path, allow_pickle=False)
        except Exception:  # noqa: BLE001 - zero-byte (EOFError), truncated or corrupt: recompute and overwrite
            return None

    def put(self, namespace: str, key: str, array: np.ndarray) -> None:
        """Store ``array`` atomically (write a temporary file, then rename)."""
        try:
            with atomic_writer(self._path(namespace, key), "wb") as handle:
                np.save(handle, array, allow_pickle=False)
        except OSError as exc:  # read-only, full, or a file where the folder should be: run on without it
            warn_unwritable(self.root, exc)


_warned = False  # one warning per process for an unwritable cache


def warn_unwritable(folder: Path, exc: OSError) -> None:
    """Say once per process that the cache cannot be written and the run goes on without it."""
    global _warned
    if not _warned:
        _warned = True
        print(f"warning: the cache {folder} cannot be written ({exc.__class__.__name__}: {exc.strerror or exc}); "
              "running without it (set BENCH_CACHE_DIR to a writable folder).", file=sys.stderr)


def scratch_instead(folder: Path) -> Path:
    """``folder`` created if it can be; else (warned once) a temporary folder removed when the process ends."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".probe-")  # unique: concurrent callers never share it
        os.close(handle)
        os.unlink(probe)
        return folder
    except OSError as exc:
        import atexit
        import shutil

        warn_unwritable(folder, exc)
        scratch = Path(tempfile.mkdtemp(prefix="bench-cache-"))
        atexit.register(shutil.rmtree, scratch, True)
        return scratch
