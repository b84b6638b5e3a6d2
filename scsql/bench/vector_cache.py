"""Vectors the benchmarks computed, kept on disk so a rerun of ``scsql bench
retrieval`` on the same corpus does not embed it again (the full SciFact
corpus takes over half an hour on two busy cores).

A cache is one append-only file per model, ``<dir>/<model>.vectors``: records
of the sha256 of the text (32 bytes) then the vector (float32). The key holds
the model's name and the exact text, so a changed text or another model is a
miss. Nothing is downloaded: the vectors are the ones this machine computed.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

import numpy as np

DIGEST = 32


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scsql" / "bench-vectors"


def key(model: str, text: str) -> bytes:
    return hashlib.sha256(model.encode() + b"\0" + text.encode()).digest()


class CachedProvider:
    """A provider that answers from the cache and embeds only the misses
    with PROV, appending them to the cache."""

    def __init__(self, prov, directory: Path):
        self.prov = prov
        self.name = prov.name
        self.path = Path(directory) / (re.sub(r"[^A-Za-z0-9_.-]", "_", prov.name) + ".vectors")
        self.hits = self.misses = 0
        self._vectors: dict[bytes, np.ndarray] = {}
        self._read_to = 0
        if self.path.is_file():
            size = DIGEST + 4 * prov.dims
            if self.path.stat().st_size % size:  # a record cut short by a crash: drop it before appending
                os.truncate(self.path, self.path.stat().st_size // size * size)
            self._read()
            print(f"vector cache {self.path}: {len(self._vectors)} vectors", file=sys.stderr)

    def _read(self) -> None:
        """Read the records appended since the last read (by this or another process)."""
        size = DIGEST + 4 * self.prov.dims
        try:
            with self.path.open("rb") as f:
                f.seek(self._read_to)
                data = f.read()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % size  # a record being written is read next time
        for at in range(0, whole, size):
            self._vectors[data[at:at + DIGEST]] = np.frombuffer(data, np.float32, self.prov.dims, at + DIGEST)
        self._read_to += whole

    @property
    def dims(self) -> int:
        return self.prov.dims

    @property
    def loaded(self) -> bool:
        return self.prov.loaded

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [key(self.name, t) for t in texts]
        if any(k not in self._vectors for k in keys):
            self._read()  # another run may have stored them meanwhile
        fresh_keys: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            if k not in self._vectors:
                fresh_keys.setdefault(k, i)
        if fresh_keys:
            vectors = np.asarray(self.prov.embed([texts[i] for i in fresh_keys.values()]), dtype=np.float32)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # One write to a file opened for appending: records of runs that
            # share the cache never interleave.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, b"".join(k + v.tobytes() for k, v in zip(fresh_keys, vectors, strict=True)))
            finally:
                os.close(fd)
            for k, v in zip(fresh_keys, vectors, strict=True):
                self._vectors[k] = v
        self.misses += len(fresh_keys)
        self.hits += len(texts) - len(fresh_keys)
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, k in enumerate(keys):
            out[i] = self._vectors[k]
        return out
