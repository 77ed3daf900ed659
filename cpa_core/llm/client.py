"""The LLM client layer: any OpenAI-compatible chat endpoint, with a persistent response cache.

Every LLM attacker (clue extraction, forced choice, attribute prediction) goes through
:class:`LLMClient`. It talks to OpenAI, vLLM, Ollama or llama.cpp with the official ``openai`` client:
only ``base_url``, ``model`` and the API key change. The key is read from an environment variable when
the client is created; it is never stored in the settings, written to the cache, logged or exported.

Every answer is stored on disk (SQLite in WAL mode) *before* :meth:`LLMClient.complete` returns it,
keyed by a hash of (endpoint, model, prompt, sample index, seed, decoding settings). Re-running or
recalibrating costs no call, and an interrupted run resumes where it stopped: each answer is committed
as soon as it arrives, so nothing already paid for is asked again.

Calls run on a bounded thread pool, with a timeout per call and retries with exponential backoff (plus
jitter, and the server's ``Retry-After`` when it sends one) on rate limits (429), server errors (5xx),
timeouts, connection errors and malformed replies. Other errors (400, 401, 403, 404, ...) stop the run
at once with an :class:`LLMError` naming the status and what to check. A call budget is checked before
the first call (:meth:`LLMClient.estimate_calls` is the dry run). Logs carry counts, ids and timings
only: never a prompt, a document, an answer or a key.

**Failed answers are never cached.** An answer is usable when its text is not empty, it ended normally
(``finish_reason`` one of :data:`NORMAL_FINISH`: ``stop``, or another server's word for it) and it is at most
:data:`MAX_ANSWER_CHARS` characters. An empty or null answer, one cut at ``max_tokens`` (``length``), filtered
(``content_filter``), ended for any other reason or without one, or over-long, and an HTTP response over
:data:`MAX_RESPONSE_BYTES`, is a *failed answer*: it is not stored, any earlier entry of its request is removed,
and :meth:`LLMClient.complete` returns it in its place as an :class:`LLMResponse` with empty text and ``failure``
saying why (a few words, never the content). It is not retried within the run: the same request, seed and
decoding settings would most likely fail the same way and pay again (raise ``max_tokens`` or change the model
instead); the attackers count it as an answer naming nothing (an invalid pick or sample), so it shows in their
counters and in the verdict's "LLM answers" check, and the next run asks it again. An entry already in the cache
that is not usable (written before this rule: empty, truncated, filtered) is read as missing and asked again, so
an old poisoned cache heals itself. The client counts failed answers in ``failed_answers_`` and, by reason, in
``failures_``; each ``complete`` logs one line with the counts by reason.

**Bounded answers.** The client reads at most :data:`MAX_RESPONSE_BYTES` bytes of any HTTP response (a response
event hook on the HTTP client, its own or the one given: a body announced or found longer is abandoned and the
connection closed), asks for uncompressed bodies (``Accept-Encoding: identity``) and refuses a compressed one,
whose decoded size no byte count bounds; the answer text stored is at most :data:`MAX_ANSWER_CHARS` characters,
and a cache entry at most :data:`~cpa_core.llm.response_cache.MAX_ENTRY_CHARS`. An endpoint that ignores
``max_tokens`` thus costs at most a few megabytes per call in flight, and nothing in the cache.

**Refreshing the cache.** ``refresh_cache`` (``--refresh-llm-cache``) ignores the answers cached before the
run: each request is asked once more and its answer replaces the cached one (a request asked again within the
same run, e.g. by a dry run then the attack, is answered from the fresh entry). It is a run's choice, not a
setting of the calls: it is left out of :meth:`LLMSettings.params`, hence of the manifest and the configuration id.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import re
import sqlite3
import sys
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from cpa_core.common.cache_dirs import cache_dir
from cpa_core.common.errors import ConfigError, LLMBudgetError, LLMError
from cpa_core.common.params import Param
from cpa_core.common.progress import Progress
from cpa_core.llm.response_cache import MAX_ENTRY_CHARS, ResponseCache

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
RETRYABLE_STATUS = frozenset({408, 409, 429})  # and every 5xx
NO_KEY = "no-key-set"  # sent when the key variable is unset: local servers accept any key
NORMAL_FINISH = frozenset({"stop", "eos", "eos_token", "stop_sequence"})
"""The ``finish_reason`` of an answer that ended normally: OpenAI's ``stop``, and the words some other servers use
for it (``eos`` and ``eos_token`` at the end of sequence, ``stop_sequence`` at a stop string). Any other reason
(``length``, ``content_filter``, ``tool_calls``, none at all, ...) makes the answer a failed one."""
MAX_RESPONSE_BYTES = 8 * 2**20
"""The most bytes read of one HTTP response (8 MiB): far above any answer of a few hundred tokens, even with 20
log-probability alternatives per token; a longer body is abandoned and the request is a failed answer."""
MAX_ANSWER_CHARS = 100_000
"""The longest answer text used and cached, in characters (about 25,000 tokens); a longer one is a failed answer."""
_WORD = re.compile(r"[A-Za-z0-9_.-]{1,32}")  # a server's word (finish_reason, encoding) safe to show


# The HTTP libraries log request URLs (which may carry credentials) at INFO and request bodies (prompts)
# at DEBUG: the client keeps them at WARNING whatever the application's log level.
HTTP_LOGGERS = ("openai", "httpx", "httpx2", "httpcore", "httpcore2")


def quiet_http_loggers() -> None:
    for name in HTTP_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def default_cache_dir() -> str:
    """The LLM answers' folder under the cache root (``$CPA_CACHE_DIR/llm`` or ``~/.cache/cpa/llm``)."""
    return str(cache_dir("llm"))


def check_url(url: str) -> None:
    """An endpoint URL must be http(s) with a host and a valid port (else a ConfigError naming what is wrong)."""
    shown = redact_url(url) if "://" in url else url[:80]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"[llm] base_url: expected an http:// or https:// URL with a host, found '{shown}'")
    try:
        parts.port  # noqa: B018  (raises on a port outside 0-65535)
    except ValueError:
        raise ConfigError(f"[llm] base_url: the port must lie between 1 and 65535, found '{shown}'") from None


def redact_url(url: str) -> str:
    """The URL without user info, query or fragment (they may carry credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:  # an invalid port: shown as written
        port = parts.netloc.rpartition(":")[2]
    if port:
        host = f"{host}:{port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def sample_seed(base_seed: int, *parts: object) -> int:
    """A reproducible 31-bit seed for one sample, e.g. ``sample_seed(seed, doc_id, attribute, j)``.

    Different parts give independent-looking seeds; the seed depends only on what is passed (never on a
    label), so sampling stays independent per document and is recorded by ``base_seed``.
    """
    text = json.dumps([int(base_seed), *[str(p) for p in parts]], ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


LLM_PARAMS = (
    Param("base_url", "text", None, "LLM endpoint (OpenAI-compatible)",
          "The base URL of the chat-completions server. The API key is read from the environment, never stored.",
          optional=True, option="--llm-url"),
    Param("model", "text", None, "LLM model", "The model name at the endpoint.", optional=True,
          option="--llm-model"),
    Param("api_key_env", "text", "OPENAI_API_KEY", "API key variable",
          "The environment variable holding the API key (the key itself is never stored)."),
    Param("temperature", "float", 0.8, "Decoding temperature", "Sampling temperature of the LLM.", min=0),
    Param("top_p", "float", 0.95, "Decoding top_p", "Nucleus sampling mass of the LLM.", min=0, max=1),
    Param("max_tokens", "int", 256, "Answer length limit", "Tokens per answer.", min=1, optional=True),
    Param("timeout_s", "float", 120.0, "Timeout (s)", "Seconds before a call is abandoned and retried.", above=0),
    Param("max_retries", "int", 5, "Retries", "Retries of a call after a timeout, 429 or 5xx.", min=0),
    Param("backoff_base_s", "float", 1.0, "Backoff base (s)", "First retry delay; it doubles at each retry.", min=0),
    Param("backoff_max_s", "float", 60.0, "Longest backoff (s)", "The longest delay between retries.", min=0),
    Param("concurrency", "int", 4, "Concurrent calls", "Calls in flight at once.", min=1),
    Param("call_budget", "int", None, "Call budget", "Refuse a run needing more calls than this.", min=0,
          optional=True, option="--call-budget"),
    Param("cache_dir", "text", None, "Answer cache folder", "Default: the cache root's 'llm' folder.",
          optional=True),
    Param("refresh_cache", "bool", False, "Refresh the answer cache",
          "Ignore the answers cached before this run: ask every request again and replace its cached answer "
          "(a run's choice: it changes no declared setting and no configuration id).",
          option="--refresh-llm-cache", flag=True),
)
"""The ``[llm]`` table: the endpoint and how to call it (the fields of :class:`LLMSettings`)."""


RUN_SETTINGS = ("cache_dir", "refresh_cache")
"""The settings of :class:`LLMSettings` that say how this run uses its cache, not what it asks: never in
:meth:`LLMSettings.params`, the manifest or the configuration id."""


@dataclass(frozen=True, repr=False)
class LLMSettings:
    """Where and how to call the model. Holds the *name* of the key's environment variable, never the key."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.8
    top_p: float = 0.95
    max_tokens: int | None = 256
    timeout_s: float = 120.0
    max_retries: int = 5
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    concurrency: int = 4
    call_budget: int | None = None
    cache_dir: str = field(default_factory=default_cache_dir)
    refresh_cache: bool = False

    def __post_init__(self):
        if not self.base_url or not self.model:
            raise ConfigError("[llm]: the LLM settings need a base_url and a model")
        if self.concurrency < 1:
            raise ConfigError(f"[llm] concurrency must be at least 1, found {self.concurrency}")
        if self.max_retries < 0:
            raise ConfigError(f"[llm] max_retries must be non-negative, found {self.max_retries}")
        if self.call_budget is not None and self.call_budget < 0:
            raise ConfigError(f"[llm] call_budget must be non-negative, found {self.call_budget}")
        if not 0.0 <= self.top_p <= 1.0:
            raise ConfigError(f"[llm] top_p must lie in [0, 1], found {self.top_p}")
        if self.temperature < 0:
            raise ConfigError(f"[llm] temperature must be non-negative, found {self.temperature}")
        check_url(self.base_url)

    @property
    def endpoint(self) -> str:
        """The base URL as it enters the cache key (trailing slash removed)."""
        return self.base_url.rstrip("/")

    def params(self) -> dict:
        """Every setting that defines the calls, for the manifest and the configuration id: the URL without
        credentials, the key variable's name, no key, and neither this machine's cache folder nor whether this run
        refreshes it (the calls are the same)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in RUN_SETTINGS}
        out["base_url"] = redact_url(self.base_url)
        return out

    def __repr__(self) -> str:  # the URL may carry credentials
        return f"LLMSettings({', '.join(f'{k}={v!r}' for k, v in self.params().items())})"


@dataclass(frozen=True)
class LLMRequest:
    """One chat completion to draw.

    ``sample_index`` and ``seed`` tell samples of the same prompt apart (both enter the cache key).
    ``temperature``, ``top_p`` and ``max_tokens`` override the settings when given. ``logprobs`` asks for
    the log-probability of each generated token and the ``top_logprobs`` most likely alternatives
    (0 when not given: some servers need the two together).
    """

    messages: tuple[Mapping[str, str], ...]
    sample_index: int = 0
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None

    def __post_init__(self):
        messages = tuple({"role": str(m["role"]), "content": str(m["content"])} for m in self.messages)
        if not messages:
            raise ValueError("an LLM request needs at least one message")
        object.__setattr__(self, "messages", messages)
        if self.top_logprobs is not None and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs=True")
        if self.logprobs and self.top_logprobs is None:
            object.__setattr__(self, "top_logprobs", 0)

    @property
    def prompt_sha256(self) -> str:
        text = json.dumps(list(self.messages), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its log-probability and the most likely alternatives at its position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class LLMResponse:
    """One answer. ``cached`` is True when it came from the cache (no call was made).

    ``failure`` says why an answer could not be used (e.g. ``"truncated answer (finish_reason 'length')"``,
    never its content); its text is then empty and it was not cached (see the module's docstring).
    """

    text: str
    finish_reason: str | None
    key: str
    logprobs: tuple[TokenLogprob, ...] | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached: bool = False
    failure: str | None = None

    @property
    def ok(self) -> bool:
        """The answer is usable (not a failed one)."""
        return self.failure is None

    def top_logprobs(self, position: int = 0) -> dict[str, float]:
        """Token -> log-probability at a position: the alternatives plus the generated token."""
        if not self.logprobs or position >= len(self.logprobs):
            return {}
        entry = self.logprobs[position]
        out = dict(entry.top)
        out.setdefault(entry.token, entry.logprob)
        return out

    def to_json(self) -> str:
        data = asdict(self)
        for name in ("cached", "key", "failure"):
            data.pop(name)
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, key: str, cached: bool = True) -> "LLMResponse":
        data = json.loads(text)
        if not isinstance(data["text"], str):
            raise TypeError("the answer's text is not a string")
        logprobs = data.get("logprobs")
        if logprobs is not None:
            logprobs = tuple(TokenLogprob(t["token"], float(t["logprob"]), tuple((a, float(b)) for a, b in t["top"]))
                             for t in logprobs)
        return cls(text=data["text"], finish_reason=data.get("finish_reason"), key=key, logprobs=logprobs,
                   model=data.get("model"), prompt_tokens=data.get("prompt_tokens"),
                   completion_tokens=data.get("completion_tokens"), cached=cached)


def answer_problem(text: str, finish_reason: str | None) -> str | None:
    """Why an answer cannot be used, in a few words (never its content), or ``None`` when it can: it is over
    :data:`MAX_ANSWER_CHARS` characters, it did not end normally (:data:`NORMAL_FINISH`), or it is empty."""
    if len(text) > MAX_ANSWER_CHARS:
        return f"answer over {MAX_ANSWER_CHARS:,} characters"
    if finish_reason not in NORMAL_FINISH:
        if finish_reason == "length":
            return "truncated answer (finish_reason 'length')"
        if finish_reason == "content_filter":
            return "filtered answer (finish_reason 'content_filter')"
        if finish_reason is None:
            return "answer without a finish_reason"
        if _WORD.fullmatch(finish_reason):
            return f"answer ended by finish_reason '{finish_reason}'"
        return "answer ended by an unrecognised finish_reason"
    if not text.strip():
        return "empty answer"
    return None


class ResponseRefused(Exception):
    """An HTTP response the client stops reading: over :data:`MAX_RESPONSE_BYTES` bytes, or compressed although
    none was asked for. ``reason`` says which (never the content)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _byte_stream_base(stream: Any) -> type | None:
    """The ``SyncByteStream`` class of the HTTP library (httpx or httpx2) whose response body ``stream`` is."""
    for name in ("httpx", "httpx2"):
        base = getattr(sys.modules.get(name), "SyncByteStream", None)
        if base is not None and isinstance(stream, base):
            return base
    return None


@lru_cache(maxsize=None)
def _bounded_stream_class(base: type) -> type:
    """A response body stream of ``base``'s library that raises :class:`ResponseRefused` past ``limit`` bytes."""

    class BoundedStream(base):
        def __init__(self, inner: Any, limit: int):
            self._inner, self._limit = inner, limit

        def __iter__(self):
            received = 0
            for chunk in self._inner:
                received += len(chunk)
                if received > self._limit:
                    raise ResponseRefused(f"response over {self._limit:,} bytes")
                yield chunk

        def close(self) -> None:
            self._inner.close()

    return BoundedStream


def bound_response(response: Any) -> None:
    """The response event hook that bounds every body read (httpx and httpx2 clients alike).

    Refuses at once a body announced (``Content-Length``) over :data:`MAX_RESPONSE_BYTES` bytes or compressed (the
    client asks for none: a compressed body's decoded size is not bounded by its bytes), and makes the body's stream
    raise :class:`ResponseRefused` as soon as more bytes arrive than the bound (the connection is then closed).
    """
    limit = MAX_RESPONSE_BYTES
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        shown = f"'{encoding}'" if _WORD.fullmatch(encoding) else "an unknown encoding"
        raise ResponseRefused(f"response compressed with {shown}, which the client did not ask for (its size "
                              "cannot be bounded)")
    length = response.headers.get("content-length", "").strip()
    if length.isdigit() and int(length) > limit:
        raise ResponseRefused(f"response over {limit:,} bytes")
    base = _byte_stream_base(response.stream)
    if base is not None:
        response.stream = _bounded_stream_class(base)(response.stream, limit)


def bounded_http_client(http_client: Any) -> Any:
    """``http_client`` (an ``httpx.Client`` or ``httpx2.Client``) with :func:`bound_response` among its response
    hooks (added once; the client is changed in place and returned)."""
    hooks = http_client.event_hooks
    responses = list(hooks.get("response", []))
    if bound_response not in responses:
        http_client.event_hooks = {**hooks, "response": [*responses, bound_response]}
    return http_client


class _Stopped(Exception):
    """The run was stopped (another request failed, or an interrupt) before this request was sent."""


class _Retryable(Exception):
    """A failed attempt worth retrying; ``reason`` is safe to log (no content)."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason, self.retry_after = reason, retry_after


def _get(obj: Any, name: str) -> Any:
    """A field of a response object, whether the SDK built a model or left a plain dict."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _retry_after(error: Exception) -> float | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        value = float(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def _error_detail(error: Exception) -> str:
    """The server's short error identifiers (type/code/param), never its message: it may echo the input."""
    body = getattr(error, "body", None)
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    if not isinstance(body, Mapping):
        return ""
    bits = []
    for name in ("type", "code", "param"):
        value = body.get(name)
        if isinstance(value, (str, int)) and 0 < len(str(value)) <= 64 and " " not in str(value):
            bits.append(f"{name}={value}")
    return f" [{', '.join(bits)}]" if bits else ""


class LLMClient:
    """Chat completions through the ``openai`` client, cached on disk, bounded, retried and budgeted.

    Parameters
    ----------
    settings : LLMSettings
    http_client : httpx.Client or httpx2.Client, optional
        Passed to ``openai.OpenAI`` (tests inject a ``MockTransport``), after adding the hook that bounds every
        response read (:func:`bound_response`); default: the ``openai`` client's own kind, with that hook.
    sleep : callable, optional
        Called with the backoff delay in seconds (tests record it instead of sleeping).
    rng : random.Random, optional
        Jitter source.

    Counters (cumulative over the client's life): ``calls_made_`` HTTP requests sent (retries included),
    ``retries_`` of which retries, ``cache_hits_`` requests answered from the cache, ``failed_answers_`` failed
    answers returned (not cached) and ``failures_`` the same by reason.
    """

    def __init__(self, settings: LLMSettings, http_client: Any = None, *,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        import openai

        quiet_http_loggers()
        self.settings = settings
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._key_present = bool(os.environ.get(settings.api_key_env))
        if not self._key_present:
            log.info("environment variable %s is not set: calling %s without an API key", settings.api_key_env,
                     redact_url(settings.base_url))
        try:
            self.cache = ResponseCache(settings.cache_dir)
        except (OSError, sqlite3.Error) as error:
            raise LLMError(f"cannot open the LLM response cache in {settings.cache_dir}: {error}") from None
        http = bounded_http_client(http_client if http_client is not None else openai.DefaultHttpxClient())
        self._client = openai.OpenAI(base_url=settings.base_url,
                                     api_key=os.environ.get(settings.api_key_env) or NO_KEY,
                                     http_client=http, max_retries=0, timeout=settings.timeout_s,
                                     default_headers={"Accept-Encoding": "identity"})
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._fresh: set[str] = set()  # with refresh_cache: the keys answered by this client, cached since
        self.calls_made_ = 0
        self.cache_hits_ = 0
        self.retries_ = 0
        self.failed_answers_ = 0
        self.failures_: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"LLMClient(base_url={redact_url(self.settings.base_url)!r}, model={self.settings.model!r})"

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.cache.close()
        self._client.close()

    def params(self) -> dict:
        return self.settings.params()

    @property
    def call_budget(self) -> int | None:
        """The most calls a run may make (``None``: unlimited)."""
        return self.settings.call_budget

    # ----------------------------------------------------------------- keys, dry run
    def decoding(self, request: LLMRequest) -> dict:
        """The effective decoding settings of a request (they enter the cache key)."""
        s = self.settings
        return {"temperature": s.temperature if request.temperature is None else request.temperature,
                "top_p": s.top_p if request.top_p is None else request.top_p,
                "max_tokens": s.max_tokens if request.max_tokens is None else request.max_tokens,
                "logprobs": request.logprobs,
                "top_logprobs": request.top_logprobs if request.logprobs else None}

    def key(self, request: LLMRequest) -> str:
        """sha256 of (format, endpoint, model, prompt hash, sample index, seed, decoding settings)."""
        material = {"format": CACHE_FORMAT, "endpoint": self.settings.endpoint, "model": self.settings.model,
                    "prompt": request.prompt_sha256, "sample": request.sample_index, "seed": request.seed,
                    "decoding": self.decoding(request)}
        text = json.dumps(material, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def estimate_calls(self, requests: Sequence[LLMRequest]) -> int:
        """Dry run: how many distinct requests are not cached yet, i.e. the calls a run would make."""
        keys = list(dict.fromkeys(self.key(r) for r in requests))
        return len(keys) - len(self._cached(keys))

    def _cached(self, keys: Sequence[str], say: bool = False) -> dict[str, LLMResponse]:
        """The usable cached answers among these keys: an unreadable entry, or one that is not usable (an empty,
        truncated or filtered answer cached before such answers were refused), counts as missing and is asked
        again; with ``refresh_cache``, only the answers this client received count."""
        if self.settings.refresh_cache:
            keys = [key for key in keys if key in self._fresh]
        out: dict[str, LLMResponse] = {}
        unusable = 0
        for key, stored in self.cache.get_many(keys).items():
            try:
                response = LLMResponse.from_json(stored, key, cached=True)
            except (ValueError, KeyError, TypeError):
                log.warning("cache entry %s is unreadable: it will be asked again", key[:12])
                continue
            if answer_problem(response.text, response.finish_reason) is not None:
                unusable += 1
                continue
            out[key] = response
        if unusable and say:
            log.info("%d cached answers are empty, truncated, filtered or over-long: they will be asked again",
                     unusable)
        return out

    # ----------------------------------------------------------------- running
    def complete(self, requests: Sequence[LLMRequest], progress: Progress | None = None,
                 step: str = "LLM requests") -> list[LLMResponse]:
        """One response per request, in order; cached ones cost no call.

        Raises
        ------
        LLMBudgetError
            Before any call, when the uncached requests exceed ``settings.call_budget``.
        LLMError
            When a call fails for good. Answers received before the failure are cached.
        """
        started = time.monotonic()
        keys = [self.key(r) for r in requests]
        cached = self._cached(keys, say=True)
        todo: dict[str, LLMRequest] = {}
        for key, request in zip(keys, requests):
            if key not in cached and key not in todo:
                todo[key] = request
        budget = self.settings.call_budget
        if budget is not None and len(todo) > budget:
            raise LLMBudgetError(
                f"this run needs {len(todo)} LLM calls ({len(requests) - len(todo)} of {len(requests)} requests "
                f"are cached) but the call budget is {budget}: raise the budget or attack fewer documents/samples")
        results = dict(cached)
        hits = sum(1 for k in keys if k in cached)
        with self._lock:
            self.cache_hits_ += hits
        log.info("%s: %d requests to %s (%s), %d cached, %d to call, concurrency %d", step, len(requests),
                 redact_url(self.settings.base_url), self.settings.model, hits, len(todo), self.settings.concurrency)
        waiting = {}
        for key in keys:
            waiting[key] = waiting.get(key, 0) + 1
        done = hits
        if progress is not None:
            progress(done, len(requests), step)
        if todo:
            self._stop.clear()
            pool = ThreadPoolExecutor(max_workers=min(self.settings.concurrency, len(todo)),
                                      thread_name_prefix="cpa-llm")
            futures: dict[Future, str] = {pool.submit(self._call, key, req): key for key, req in todo.items()}
            try:
                pending = set(futures)
                while pending:
                    # a short timeout keeps this thread responsive to an interrupt while calls hang
                    finished, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
                    errors = [f.exception() for f in finished if not f.cancelled()]
                    errors = [e for e in errors if e is not None and not isinstance(e, _Stopped)]
                    if errors:
                        raise errors[0]
                    for future in finished:
                        if future.cancelled() or future.exception() is not None:
                            continue  # stopped because another request failed: that error comes next
                        key = futures[future]
                        results[key] = future.result()
                        done += waiting[key]
                        if progress is not None:
                            progress(done, len(requests), step)
            except BaseException as stop:
                # Stop the queue; every answer received is already cached, so a re-run resumes from here. On an
                # error, the calls in flight finish (and are cached); on an interrupt (Ctrl-C) they are abandoned
                # at once: the HTTP connections are closed instead of waiting up to the timeout.
                self._stop.set()
                interrupted = isinstance(stop, KeyboardInterrupt)
                if interrupted:
                    self._client.close()
                pool.shutdown(wait=not interrupted, cancel_futures=True)
                answered = sum(1 for f in futures if f.done() and not f.cancelled() and f.exception() is None)
                log.info("%s: stopped after %d of %d calls; the answers received are cached", step, answered,
                         len(todo))
                raise
            pool.shutdown(wait=True)
            if any(k not in results for k in todo):
                raise LLMError(f"{step}: the run was stopped before every request was answered")
            failed = Counter(results[k].failure for k in todo if results[k].failure is not None)
            if failed:
                log.warning("%s: %d of %d answers failed (%s): not cached, asked again on the next run", step,
                            sum(failed.values()), len(todo), "; ".join(f"{n} {why}" for why, n in failed.most_common()))
        log.info("%s: done in %.1f s (%d calls made, %d retries so far)", step, time.monotonic() - started,
                 self.calls_made_, self.retries_)
        return [results[k] for k in keys]

    def _call(self, key: str, request: LLMRequest) -> LLMResponse:
        """One request with retries; the answer is committed to the cache before it is returned."""
        s = self.settings
        attempts = s.max_retries + 1
        last = ""
        for attempt in range(attempts):
            if self._stop.is_set():
                raise _Stopped()
            if attempt:
                with self._lock:
                    self.retries_ += 1
            with self._lock:
                self.calls_made_ += 1
            t0 = time.monotonic()
            try:
                response = self._attempt(key, request)
            except BaseException as failure:
                if not isinstance(failure, _Retryable):
                    self._stop.set()  # fatal: no worker starts another request
                    raise
                last = failure.reason
                if attempt + 1 >= attempts:
                    break
                delay = min(s.backoff_max_s, s.backoff_base_s * 2 ** attempt) * (0.5 + 0.5 * self._rng.random())
                if failure.retry_after is not None:
                    delay = max(delay, min(failure.retry_after, s.backoff_max_s))
                log.warning("LLM request %s: %s after %.1f s; retry %d/%d in %.1f s", key[:12], failure.reason,
                            time.monotonic() - t0, attempt + 1, s.max_retries, delay)
                self._sleep(delay)
                continue
            problem = response.failure or answer_problem(response.text, response.finish_reason)
            stored = response.to_json() if problem is None else ""
            if len(stored) > MAX_ENTRY_CHARS:
                problem = f"answer over {MAX_ENTRY_CHARS:,} characters with its log-probabilities"
            try:
                if problem is None:
                    self.cache.put(key, stored)
                else:  # an earlier answer to this request (unusable, or refreshed) is never served again
                    self.cache.discard(key)
            except sqlite3.Error as error:
                self._stop.set()
                raise LLMError(f"cannot write the LLM response cache {self.cache.path}: {error}") from None
            if problem is not None:
                return self._failed(key, response, problem)
            if self.settings.refresh_cache:
                with self._lock:
                    self._fresh.add(key)
            log.debug("LLM request %s: answered in %.2f s", key[:12], time.monotonic() - t0)
            return response
        self._stop.set()
        raise LLMError(f"LLM endpoint {redact_url(s.base_url)} (model '{s.model}') failed {attempts} times "
                       f"for request {key[:12]}; last error: {last}. Check that the server is up and not "
                       "overloaded, or raise max_retries / timeout_s")

    def _failed(self, key: str, response: LLMResponse, problem: str) -> LLMResponse:
        """The failed answer returned in place of ``response`` (counted, never cached)."""
        with self._lock:
            self.failed_answers_ += 1
            self.failures_[problem] = self.failures_.get(problem, 0) + 1
        log.debug("LLM request %s: %s; not cached", key[:12], problem)
        return LLMResponse(text="", finish_reason=response.finish_reason, key=key, model=response.model,
                           prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens,
                           failure=problem)

    def _attempt(self, key: str, request: LLMRequest) -> LLMResponse:
        import openai

        s = self.settings
        decoding = self.decoding(request)
        kwargs: dict[str, Any] = {"model": s.model, "messages": list(request.messages),
                                  "temperature": decoding["temperature"], "top_p": decoding["top_p"]}
        if decoding["max_tokens"] is not None:
            kwargs["max_tokens"] = decoding["max_tokens"]
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.logprobs:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = request.top_logprobs
        where = f"LLM endpoint {redact_url(s.base_url)}"
        try:
            completion = self._client.chat.completions.create(**kwargs)
        except ResponseRefused as refused:  # too long, or compressed: a failed answer, not worth a retry
            return LLMResponse(text="", finish_reason=None, key=key, failure=refused.reason)
        except openai.APITimeoutError as error:
            raise _Retryable(f"timeout after {s.timeout_s:g} s") from error
        except openai.APIConnectionError as error:
            if isinstance(error.__cause__, ResponseRefused):  # an openai version that wraps every error
                return LLMResponse(text="", finish_reason=None, key=key, failure=error.__cause__.reason)
            raise _Retryable("connection error") from error
        except openai.APIStatusError as error:
            status = error.status_code
            detail = _error_detail(error)
            if status in RETRYABLE_STATUS or status >= 500:
                raise _Retryable(f"HTTP {status}{detail}", _retry_after(error)) from error
            if status == 401:
                state = "is set" if self._key_present else "is not set"
                hint = f"check the API key in environment variable {s.api_key_env} (it {state})"
            elif status == 403:
                hint = f"the key in {s.api_key_env} is not allowed to use model '{s.model}'"
            elif status == 404:
                hint = f"check base_url and the model name '{s.model}'"
            elif status in (400, 413, 422):
                hint = ("the server rejected the request: check the decoding settings (logprobs, top_logprobs, "
                        "max_tokens) and that the prompt fits the model's context")
            else:
                hint = "the server refused the request"
            raise LLMError(f"{where}: HTTP {status}{detail} for request {key[:12]}: {hint}") from None
        except ValueError as error:  # body is not JSON
            raise _Retryable("malformed response (not JSON)") from error
        except openai.OpenAIError as error:
            raise LLMError(f"{where}: {type(error).__name__} for request {key[:12]}") from None
        return self._parse(key, completion)

    @staticmethod
    def _parse(key: str, completion: Any) -> LLMResponse:
        choices = _get(completion, "choices")
        if not isinstance(choices, (list, tuple)) or not choices:
            raise _Retryable("malformed response (no choices)")
        choice = choices[0]
        message = _get(choice, "message")
        text = _get(message, "content") if message is not None else None
        if text is None and message is not None:
            text = ""  # e.g. a refusal or an empty answer
        if not isinstance(text, str):
            raise _Retryable("malformed response (no message text)")
        finish = _get(choice, "finish_reason")
        logprobs = None
        content = _get(_get(choice, "logprobs"), "content") if _get(choice, "logprobs") is not None else None
        if content is not None:
            try:
                logprobs = tuple(
                    TokenLogprob(str(_get(t, "token")), float(_get(t, "logprob")),
                                 tuple((str(_get(a, "token")), float(_get(a, "logprob")))
                                       for a in (_get(t, "top_logprobs") or ())))
                    for t in content)
            except (TypeError, ValueError):
                raise _Retryable("malformed response (logprobs)") from None
        usage = _get(completion, "usage")
        prompt_tokens = _get(usage, "prompt_tokens") if usage is not None else None
        completion_tokens = _get(usage, "completion_tokens") if usage is not None else None
        model = _get(completion, "model")
        return LLMResponse(text=text, finish_reason=finish if isinstance(finish, str) else None, key=key,
                           logprobs=logprobs, model=model if isinstance(model, str) else None,
                           prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
                           completion_tokens=completion_tokens if isinstance(completion_tokens, int) else None)
