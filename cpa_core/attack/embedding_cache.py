"""An on-disk cache of text embeddings, so that a re-audit never re-encodes.

One ``.npy`` file holds the embeddings of one exact list of texts under one encoding key (the model
fingerprint plus the encoding settings)::

    <directory>/emb-<sha256(key)[:16]>-<sha256(texts)>.npy

The directory is the cache root's ``embeddings`` folder (:mod:`cpa_core.common.cache_dirs`); an explicit
directory wins over both. Writes are atomic (a temporary file in the same directory, then a rename),
so a reader never sees half a file. A file that cannot be read or does not have the expected shape
is ignored (and rewritten by the caller); a directory that cannot be written disables writing with a
warning. Nothing here ever logs or stores a text, only digests and counts.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from cpa_core.common.cache_dirs import cache_dir

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """The embeddings' folder under the cache root (``$CPA_CACHE_DIR/embeddings`` or ``~/.cache/cpa/embeddings``)."""
    return cache_dir("embeddings")


def texts_digest(texts: Sequence[str]) -> str:
    """SHA-256 of the exact list of texts (order, count and content; unambiguous framing)."""
    digest = hashlib.sha256(b"cpa-texts-v1\0")
    digest.update(len(texts).to_bytes(8, "little"))
    for text in texts:
        data = str(text).encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


class EmbeddingCache:
    """Embeddings on disk, one file per (encoding key, list of texts).

    Attributes
    ----------
    hits, misses, corrupt, writes : int
        Lookups answered, lookups not answered (of which ``corrupt`` found an unusable file) and files
        written, since this object was created.
    """

    def __init__(self, directory: str | Path | None = None):
        self.directory = Path(directory).expanduser() if directory else default_cache_dir()
        self.hits = self.misses = self.corrupt = self.writes = 0
        self._write_failed = False

    def path(self, key: str, digest: str) -> Path:
        model = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
        return self.directory / f"emb-{model}-{digest}.npy"

    def load(self, key: str, digest: str, rows: int, dim: int | None = None) -> np.ndarray | None:
        """The cached ``(rows, dim)`` float32 matrix, or ``None`` when absent or unusable."""
        path = self.path(key, digest)
        try:
            array = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            self.misses += 1
            return None
        except Exception as error:  # truncated, garbage, unreadable: ignore, the caller rewrites it
            log.warning("ignoring unreadable embedding cache file %s (%s)", path.name, type(error).__name__)
            self.misses += 1
            self.corrupt += 1
            return None
        usable = (isinstance(array, np.ndarray) and array.ndim == 2 and array.shape[0] == rows
                  and array.shape[1] > 0 and (dim is None or array.shape[1] == dim)
                  and np.issubdtype(array.dtype, np.floating) and bool(np.isfinite(array).all()))
        if not usable:
            log.warning("ignoring embedding cache file %s: unexpected shape, type or values", path.name)
            self.misses += 1
            self.corrupt += 1
            return None
        self.hits += 1
        return np.ascontiguousarray(array, dtype=np.float32)

    def save(self, key: str, digest: str, embeddings: np.ndarray) -> Path | None:
        """Write atomically; returns the path, or ``None`` when the directory cannot be written."""
        path = self.path(key, digest)
        temporary = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".npy", dir=self.directory)
            with os.fdopen(handle, "wb") as stream:
                np.save(stream, np.ascontiguousarray(embeddings, dtype=np.float32), allow_pickle=False)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path)
            temporary = None
        except OSError as error:
            if not self._write_failed:
                warnings.warn(f"cannot write the embedding cache in {self.directory} ({error.strerror or error}); "
                              "embeddings will be recomputed next time", RuntimeWarning, stacklevel=2)
                self._write_failed = True
            return None
        finally:
            if temporary is not None:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
        self.writes += 1
        return path
