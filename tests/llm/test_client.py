"""The LLM client layer against a scripted OpenAI-compatible endpoint (the real ``openai`` client on an
``httpx.MockTransport``); the prompt templates and answer parsers: tests/llm/test_prompts.py.

Covers: request shape, the on-disk cache and its key, retries with backoff (429, 5xx, timeouts,
connection errors, malformed bodies), non-retryable errors, an interrupted run that resumes without
asking any answered request again (in-process; after a SIGKILL: tests/integration/test_llm_client_sigkill.py),
bounded concurrency, the call budget and its dry run, progress, and that neither the API key nor any content
leaks into files, params or logs. The endpoint and its settings: tests/llm_endpoint.py.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time

import httpx
import pytest
from llm_endpoint import (
    BASE_URL,
    DOC_TEXT,
    KEY_ENV,
    SECRET,
    FakeEndpoint,
    api_key,  # noqa: F401 (the autouse fixture)
    client_for,
    completion_body,
    requests_for,
    settings,
)

from cpa_core.common.errors import ConfigError, CPAError, LLMBudgetError, LLMError
from cpa_core.llm.client import LLMClient, LLMRequest, LLMResponse, LLMSettings, redact_url, sample_seed
from cpa_core.llm.prompts import (
    ATTRIBUTE_V1,
    FORCED_CHOICE_V1,
    format_options,
)


# ---------------------------------------------------------------------------------------------- calls
def test_success_sends_settings_and_parses_the_answer(tmp_path):
    endpoint = FakeEndpoint()
    reqs = requests_for(3)
    with client_for(tmp_path, endpoint) as client:
        out = client.complete(reqs)
    assert [r.text for r in out] == [FakeEndpoint.answer_text(b) for b in
                                     sorted(endpoint.bodies, key=lambda b: [r.seed for r in reqs].index(b["seed"]))]
    assert all(r.finish_reason == "stop" and not r.cached and r.completion_tokens == 3 for r in out)
    body = endpoint.bodies[0]
    assert body["model"] == "test-model" and body["temperature"] == 0.8 and body["top_p"] == 0.95
    assert body["max_tokens"] == 256 and "logprobs" not in body
    assert {b["seed"] for b in endpoint.bodies} == {r.seed for r in reqs}
    assert endpoint.headers[0]["authorization"] == f"Bearer {SECRET}"
    assert endpoint.timeouts[0]["read"] == 5.0 and endpoint.timeouts[0]["connect"] == 5.0  # settings.timeout_s
    assert client.calls_made_ == 3 and client.retries_ == 0 and client.cache_hits_ == 0


def test_no_requests_no_calls(tmp_path):
    endpoint = FakeEndpoint()
    with client_for(tmp_path, endpoint, call_budget=0) as client:
        assert client.complete([]) == [] and client.estimate_calls([]) == 0
    assert endpoint.bodies == []


def test_second_run_is_served_from_the_cache(tmp_path):
    endpoint = FakeEndpoint()
    reqs = requests_for(4, samples=2)
    with client_for(tmp_path, endpoint) as client:
        first = client.complete(reqs)
    assert len(endpoint.bodies) == 8
    with client_for(tmp_path, endpoint) as again:
        assert again.estimate_calls(reqs) == 0
        second = again.complete(reqs)
        assert again.calls_made_ == 0 and again.cache_hits_ == 8
    assert len(endpoint.bodies) == 8
    assert [r.text for r in second] == [r.text for r in first] and all(r.cached for r in second)
    assert [r.key for r in second] == [r.key for r in first]


def test_cache_key_covers_seed_sample_and_decoding(tmp_path):
    endpoint = FakeEndpoint()
    messages = ATTRIBUTE_V1.render(text=DOC_TEXT, attribute="occupation", choices="")
    base = LLMRequest(messages=messages, sample_index=0, seed=11)
    with client_for(tmp_path, endpoint) as client:
        client.complete([base])
        variants = [LLMRequest(messages=messages, sample_index=1, seed=11),
                    LLMRequest(messages=messages, sample_index=0, seed=12),
                    LLMRequest(messages=messages, sample_index=0, seed=11, temperature=0.2),
                    LLMRequest(messages=messages, sample_index=0, seed=11, top_p=0.5),
                    LLMRequest(messages=messages, sample_index=0, seed=11, max_tokens=8),
                    LLMRequest(messages=messages, sample_index=0, seed=11, logprobs=True, top_logprobs=3),
                    LLMRequest(messages=ATTRIBUTE_V1.render(text=DOC_TEXT, attribute="age", choices=""), seed=11)]
        assert client.estimate_calls(variants) == len(variants)
        client.complete(variants)
        assert len(endpoint.bodies) == 1 + len(variants)
        # the same request again, and twice within one run: no call
        out = client.complete([base, LLMRequest(messages=messages, sample_index=0, seed=11), variants[0]])
        assert len(endpoint.bodies) == 1 + len(variants) and all(r.cached for r in out)
        duplicated = LLMRequest(messages=messages, sample_index=5, seed=99)
        client.complete([duplicated, duplicated])
        assert len(endpoint.bodies) == 2 + len(variants)
    # another model or endpoint is another key
    for overrides in ({"model": "other-model"}, {"base_url": "http://other.test/v1"}, {"temperature": 0.3}):
        with client_for(tmp_path, endpoint, **overrides) as other:
            assert other.estimate_calls([base]) == 1
    with client_for(tmp_path, endpoint, base_url=BASE_URL + "/") as same:  # a trailing slash is the same endpoint
        assert same.estimate_calls([base]) == 0


def test_logprobs_are_requested_and_parsed(tmp_path):
    endpoint = FakeEndpoint()
    request = LLMRequest(messages=FORCED_CHOICE_V1.render(text=DOC_TEXT, options=format_options(["x", "y"]),
                                                          labels="A, B"), seed=3, logprobs=True, top_logprobs=2)
    with client_for(tmp_path, endpoint) as client:
        (out,) = client.complete([request])
        (cached,) = client.complete([request])
    assert endpoint.bodies[0]["logprobs"] is True and endpoint.bodies[0]["top_logprobs"] == 2
    assert out.logprobs is not None and len(out.logprobs) == len(out.text.split())
    first = out.logprobs[0]
    assert first.token == "answer" and first.logprob == -0.5 and first.top == (("answer#0", -1.0), ("answer#1", -2.0))
    assert out.top_logprobs(0) == {"answer#0": -1.0, "answer#1": -2.0, "answer": -0.5}
    assert out.top_logprobs(99) == {}
    assert cached.cached and cached.logprobs == out.logprobs
    # logprobs alone sends top_logprobs=0 (llama.cpp needs both); top_logprobs alone is a mistake
    assert LLMRequest(messages=request.messages, logprobs=True).top_logprobs == 0
    with pytest.raises(ValueError):
        LLMRequest(messages=request.messages, top_logprobs=2)


# ---------------------------------------------------------------------------------------------- retries
@pytest.mark.parametrize("failure", [
    429, 500, 503, 408,
    httpx.ReadTimeout("read timed out"),
    httpx.ConnectError("connection refused"),
    b"{not json",
    b'{"object": "chat.completion"}',                      # JSON without choices
    b'{"choices": [{"message": {"content": 42}}]}',        # content of the wrong type
], ids=["429", "500", "503", "408", "timeout", "connect", "not-json", "no-choices", "bad-content"])
def test_transient_failures_are_retried_with_backoff(tmp_path, failure):
    endpoint = FakeEndpoint(script=[failure, failure])
    sleeps: list[float] = []
    with client_for(tmp_path, endpoint, sleeps, backoff_base_s=1.0) as client:
        (out,) = client.complete(requests_for(1))
    assert out.text.startswith("answer") and len(endpoint.bodies) == 3
    assert client.retries_ == 2 and client.calls_made_ == 3
    assert len(sleeps) == 2 and 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0  # exponential, jittered


def test_retry_after_header_is_honoured_and_capped(tmp_path):
    def limited(seconds):
        return lambda request: httpx.Response(429, headers={"retry-after": seconds}, json={"error": {}})
    endpoint = FakeEndpoint(script=[limited("7"), limited("3600")])
    sleeps: list[float] = []
    with client_for(tmp_path, endpoint, sleeps, backoff_base_s=0.1, backoff_max_s=30.0) as client:
        client.complete(requests_for(1))
    assert sleeps == [7.0, 30.0]


def test_persistent_server_error_gives_up_after_max_retries(tmp_path, caplog):
    endpoint = FakeEndpoint(script=[500] * 10)
    sleeps: list[float] = []
    with caplog.at_level(logging.DEBUG, logger="cpa_core.llm"):
        with client_for(tmp_path, endpoint, sleeps, max_retries=3) as client:
            with pytest.raises(LLMError) as info:
                client.complete(requests_for(1))
            assert client.estimate_calls(requests_for(1)) == 1  # nothing cached
    assert len(endpoint.bodies) == 4 and len(sleeps) == 3
    assert isinstance(info.value, CPAError)
    message = str(info.value)
    assert "HTTP 500" in message and "4 times" in message and "llm.test" in message
    assert "echo of the prompt" not in message and DOC_TEXT not in message and SECRET not in message
    assert DOC_TEXT not in caplog.text and "echo of the prompt" not in caplog.text


@pytest.mark.parametrize("status, hint", [(401, KEY_ENV), (403, KEY_ENV), (404, "model name 'test-model'"),
                                          (400, "decoding settings"), (422, "decoding settings")])
def test_client_errors_fail_at_once_with_a_clear_message(tmp_path, status, hint):
    endpoint = FakeEndpoint(script=[status] * 5)
    sleeps: list[float] = []
    with client_for(tmp_path, endpoint, sleeps, concurrency=1) as client:
        with pytest.raises(LLMError) as info:
            client.complete(requests_for(3))
    assert len(endpoint.bodies) == 1 and sleeps == []  # no retry, and the queue stops
    message = str(info.value)
    assert f"HTTP {status}" in message and hint in message
    assert SECRET not in message and DOC_TEXT not in message and "echo of the prompt" not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_missing_key_is_reported_as_unset(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    endpoint = FakeEndpoint(script=[401])
    with client_for(tmp_path, endpoint) as client:
        with pytest.raises(LLMError, match=f"{KEY_ENV} \\(it is not set\\)"):
            client.complete(requests_for(1))
    endpoint = FakeEndpoint()  # local servers take any key: the run works without one
    with client_for(tmp_path, endpoint) as client:
        assert client.complete(requests_for(1))[0].text.startswith("answer")


def test_answers_received_before_a_fatal_error_are_kept(tmp_path):
    endpoint = FakeEndpoint(script=[None, None, 401])
    with client_for(tmp_path, endpoint, concurrency=1) as client:
        with pytest.raises(LLMError):
            client.complete(requests_for(5))
        assert client.estimate_calls(requests_for(5)) == 3


# ---------------------------------------------------------------------------------------------- resuming
class Killed(BaseException):
    """Stands for a KeyboardInterrupt or a dying process in the middle of a run."""


def test_interrupted_run_resumes_without_asking_answered_requests_again(tmp_path):
    reqs = requests_for(12, samples=2)
    script = [None] * 9 + [Killed()]
    endpoint = FakeEndpoint(script=script, delay=0.005)
    with client_for(tmp_path, endpoint, concurrency=3) as client:
        with pytest.raises(Killed):
            client.complete(reqs)
    first_run = len(endpoint.bodies)
    assert 10 <= first_run < 24  # stopped early: the queue was cancelled
    done_before = len(endpoint.answered)
    with client_for(tmp_path, endpoint, concurrency=3) as client:
        assert client.estimate_calls(reqs) == 24 - done_before
        out = client.complete(reqs)
        assert client.cache_hits_ == done_before
    assert len(out) == 24 and len({r.key for r in out}) == 24
    counts: dict = {}
    for identity in endpoint.answered:
        counts[identity] = counts.get(identity, 0) + 1
    assert len(counts) == 24 and max(counts.values()) == 1  # no answered request asked twice
    assert len(endpoint.bodies) == 24 + 1  # plus the one request that was "killed"


# ---------------------------------------------------------------------------------------------- limits
def test_concurrency_is_bounded(tmp_path):
    endpoint = FakeEndpoint(delay=0.02)
    with client_for(tmp_path, endpoint, concurrency=3) as client:
        client.complete(requests_for(24))
    assert endpoint.max_in_flight == 3  # the calls overlapped, never more than 3 at once


def test_concurrency_one_is_sequential(tmp_path):
    endpoint = FakeEndpoint(delay=0.005)
    with client_for(tmp_path, endpoint, concurrency=1) as client:
        client.complete(requests_for(6))
    assert endpoint.max_in_flight == 1


def test_budget_is_checked_before_any_call(tmp_path):
    endpoint = FakeEndpoint()
    reqs = requests_for(5, samples=2)
    with client_for(tmp_path, endpoint, call_budget=6) as client:
        assert client.estimate_calls(reqs) == 10
        with pytest.raises(LLMBudgetError, match="needs 10 LLM calls .* budget is 6"):
            client.complete(reqs)
        assert endpoint.bodies == [] and client.calls_made_ == 0
        client.complete(reqs[:6])  # within budget
        assert client.estimate_calls(reqs) == 4  # the dry run counts only what is not cached
        client.complete(reqs)  # 4 uncached calls fit the budget now
    assert len(endpoint.bodies) == 10
    with client_for(tmp_path, endpoint, call_budget=0) as client:
        assert len(client.complete(reqs)) == 10  # everything cached: a zero budget is enough


def test_progress_reports_counts(tmp_path):
    endpoint = FakeEndpoint()
    seen: list[tuple] = []
    reqs = requests_for(6)
    with client_for(tmp_path, endpoint) as client:
        client.complete(reqs[:2])
        client.complete(reqs, progress=lambda done, total, step: seen.append((done, total, step)))
    assert seen[0] == (2, 6, "LLM requests") and seen[-1] == (6, 6, "LLM requests")
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)


# ---------------------------------------------------------------------------------------------- secrecy
def test_key_and_content_stay_out_of_files_params_and_logs(tmp_path, caplog):
    endpoint = FakeEndpoint(script=[429])
    reqs = requests_for(3)
    with caplog.at_level(logging.DEBUG):
        with client_for(tmp_path, endpoint, base_url="http://user:pw-secret@llm.test/v1?token=tok-secret") as client:
            out = client.complete(reqs)
            text = repr(client) + repr(client.settings) + json.dumps(client.params()) + str(client.settings)
    assert SECRET not in text and "pw-secret" not in text and "tok-secret" not in text
    assert client.params()["base_url"] == "http://llm.test/v1" and client.params()["api_key_env"] == KEY_ENV
    cache_bytes = b"".join(p.read_bytes() for p in (tmp_path / "cache").iterdir() if p.is_file())
    assert SECRET.encode() not in cache_bytes and b"pw-secret" not in cache_bytes
    assert DOC_TEXT.encode() not in cache_bytes  # the cache keeps answers, not prompts
    logged = caplog.text
    for secret in (SECRET, "pw-secret", "tok-secret", DOC_TEXT, "night nurse", out[0].text):
        assert secret not in logged
    assert "3 requests" in logged and "retry 1/3" in logged


def test_params_and_helpers():
    s = LLMSettings(base_url="https://api.example.com/v1/", model="m", cache_dir="/tmp/x")
    params = s.params()
    assert params["temperature"] == 0.8 and params["top_p"] == 0.95 and params["api_key_env"] == "OPENAI_API_KEY"
    assert "api_key" not in params and s.endpoint == "https://api.example.com/v1"
    assert redact_url("https://u:p@h:8080/v1?k=s#f") == "https://h:8080/v1"
    for bad in ({"concurrency": 0}, {"max_retries": -1}, {"top_p": 1.5}, {"call_budget": -1}, {"model": ""}):
        with pytest.raises(ConfigError):
            LLMSettings(**{"base_url": "http://h/v1", "model": "m", **bad})
    assert sample_seed(1, "d1", 0) == sample_seed(1, "d1", 0)
    assert len({sample_seed(1, f"d{i}", j) for i in range(50) for j in range(4)}) == 200
    assert 0 <= sample_seed(2**40, "x") < 2**31
    with pytest.raises(ValueError):
        LLMRequest(messages=())


def test_default_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CPA_CACHE_DIR", str(tmp_path / "c"))
    assert LLMSettings(base_url="http://h/v1", model="m").cache_dir == str(tmp_path / "c" / "llm")
    monkeypatch.delenv("CPA_CACHE_DIR")
    assert LLMSettings(base_url="http://h/v1", model="m").cache_dir.endswith(os.path.join(".cache", "cpa", "llm"))


def test_response_json_round_trip():
    r = LLMResponse(text="B", finish_reason="length", key="k" * 64, model="m", prompt_tokens=3)
    back = LLMResponse.from_json(r.to_json(), r.key)
    assert back.text == "B" and back.finish_reason == "length" and back.cached and back.logprobs is None


# ------------------------------------------------------------------------------------ cache and interrupts
def test_an_unreadable_cache_entry_is_asked_again(tmp_path):
    import sqlite3

    endpoint = FakeEndpoint()
    reqs = requests_for(2)
    with client_for(tmp_path, endpoint) as client:
        client.complete(reqs)
        key = client.key(reqs[0])
    with sqlite3.connect(tmp_path / "cache" / "responses.sqlite3") as db:
        db.execute("UPDATE responses SET response = '{broken' WHERE key = ?", (key,))
    with client_for(tmp_path, endpoint) as client:
        assert client.estimate_calls(reqs) == 1
        out = client.complete(reqs)
    assert len(endpoint.bodies) == 3 and not out[0].cached and out[1].cached


def test_an_unusable_cache_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(LLMError, match="cannot open the LLM response cache"):
        client_for(tmp_path, FakeEndpoint(), cache_dir=str(blocker / "cache"))


def test_an_interrupt_stops_at_once_and_keeps_every_answer_received(tmp_path):
    """Ctrl-C while the endpoint hangs: the run stops at once (not after the calls in flight time out) and every
    answer received before is in the cache. The interrupt comes when the endpoint starts hanging, so a loaded
    machine changes when it comes, not what it tests; "at once" is far below the hang (120 s)."""
    import _thread

    release = threading.Event()
    seen = []
    interrupted_at = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        if len(seen) > 2:  # the endpoint hangs from the third request on, and the user presses Ctrl-C
            if not interrupted_at:
                interrupted_at.append(time.monotonic())
                _thread.interrupt_main()
            release.wait(120)
        return httpx.Response(200, json=completion_body('["a clue"]'))

    client = LLMClient(settings(tmp_path, concurrency=1, timeout_s=120.0),
                       http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    # Ctrl-C raises KeyboardInterrupt only under Python's own SIGINT handler: a library that ran earlier in this
    # process may have set another (interrupt_main then does nothing), so the test sets it for its duration
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            client.complete(requests_for(5))
        assert time.monotonic() - interrupted_at[0] < 30.0
    finally:
        release.set()
        signal.signal(signal.SIGINT, previous)
    assert len(client.cache) == 2  # the two answers received before the interrupt


# ------------------------------------------------------------------------------------ failed answers
def reply(content, finish, **headers):
    """A handler outcome answering ``content`` (``None``: a null content) ended by ``finish``."""
    body = completion_body("placeholder", finish=finish)
    body["choices"][0]["message"]["content"] = content
    if finish is None:
        del body["choices"][0]["finish_reason"]
    return lambda request: httpx.Response(200, json=body, headers=headers)


FAILED = {
    "null, length": (None, "length", "truncated answer (finish_reason 'length')"),
    "null, content_filter": (None, "content_filter", "filtered answer (finish_reason 'content_filter')"),
    "empty, stop": ("", "stop", "empty answer"),
    "blank, stop": ("  \n ", "stop", "empty answer"),
    "text, length": ("B. Because the nurse", "length", "truncated answer (finish_reason 'length')"),
    "text, content_filter": ("B", "content_filter", "filtered answer (finish_reason 'content_filter')"),
    "text, tool_calls": ("B", "tool_calls", "answer ended by finish_reason 'tool_calls'"),
    "text, no finish_reason": ("B", None, "answer without a finish_reason"),
    "text, odd finish_reason": ("B", "said B then more", "answer ended by an unrecognised finish_reason"),
}


@pytest.mark.parametrize("case", list(FAILED))
def test_a_failed_answer_is_returned_counted_and_never_cached(tmp_path, case, caplog):
    content, finish, reason = FAILED[case]
    endpoint = FakeEndpoint(script=[reply(content, finish)])
    sleeps: list[float] = []
    with caplog.at_level(logging.DEBUG, logger="cpa_core.llm"):
        with client_for(tmp_path, endpoint, sleeps) as client:
            (out,) = client.complete(requests_for(1))
            assert client.estimate_calls(requests_for(1)) == 1  # still to ask: nothing was cached
            assert len(client.cache) == 0
    assert out.failure == reason and not out.ok and out.text == "" and out.logprobs is None and not out.cached
    assert out.finish_reason == finish
    assert len(endpoint.bodies) == 1 and sleeps == [] and client.retries_ == 0  # not retried within the run
    assert client.failed_answers_ == 1 and client.failures_ == {reason: 1}
    assert "1 of 1 answers failed" in caplog.text and reason in caplog.text
    assert "Because the nurse" not in caplog.text and "Because the nurse" not in reason
    with client_for(tmp_path, endpoint) as again:  # the next run asks it again, and keeps the good answer
        (healed,) = again.complete(requests_for(1))
        assert healed.ok and healed.text.startswith("answer") and again.calls_made_ == 1
        assert again.estimate_calls(requests_for(1)) == 0


@pytest.mark.parametrize("finish", ["stop", "eos", "eos_token", "stop_sequence"])
def test_other_servers_words_for_a_normal_end_are_usable(tmp_path, finish):
    endpoint = FakeEndpoint(script=[reply("B", finish)])
    with client_for(tmp_path, endpoint) as client:
        (out,) = client.complete(requests_for(1))
        assert out.ok and out.text == "B" and client.estimate_calls(requests_for(1)) == 0


def test_failed_answers_are_summed_by_reason_and_the_good_ones_cached(tmp_path):
    endpoint = FakeEndpoint(script=[reply(None, "length"), None, reply(None, "content_filter"), None,
                                    reply(None, "length")])
    with client_for(tmp_path, endpoint, concurrency=1) as client:
        out = client.complete(requests_for(5))
        assert [r.ok for r in out] == [False, True, False, True, False]
        assert client.failures_ == {"truncated answer (finish_reason 'length')": 2,
                                    "filtered answer (finish_reason 'content_filter')": 1}
        assert len(client.cache) == 2 and client.estimate_calls(requests_for(5)) == 3


def test_a_poisoned_cache_is_asked_again_and_heals(tmp_path):
    """Entries cached before failed answers were refused (empty, truncated, filtered) are read as missing."""
    endpoint = FakeEndpoint()
    reqs = requests_for(4)
    with client_for(tmp_path, endpoint) as client:
        keys = [client.key(r) for r in reqs]
        poisoned = [LLMResponse(text="", finish_reason="length", key=keys[0]),
                    LLMResponse(text="", finish_reason="content_filter", key=keys[1]),
                    LLMResponse(text="B, because", finish_reason="length", key=keys[2]),
                    LLMResponse(text="C", finish_reason="stop", key=keys[3])]
        for response in poisoned:
            client.cache.put(response.key, response.to_json())
    with client_for(tmp_path, endpoint) as client:
        assert client.estimate_calls(reqs) == 3
        out = client.complete(reqs)
        assert client.calls_made_ == 3 and client.cache_hits_ == 1
        assert [r.cached for r in out] == [False, False, False, True] and all(r.ok for r in out)
        assert out[3].text == "C" and out[0].text.startswith("answer")
    with client_for(tmp_path, endpoint) as client:  # healed: the fresh answers replaced the poisoned ones
        assert client.estimate_calls(reqs) == 0


# ------------------------------------------------------------------------------------ bounded answers
def endless_body(sent: list[int], marker: bytes = b"SECRET-CONTENT "):
    """A chat completion whose content never ends (an endpoint ignoring max_tokens): bytes counted in ``sent``."""
    yield b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", ' \
          b'"content": "'
    chunk = marker * (65_536 // len(marker))
    while True:
        sent[0] += len(chunk)
        yield chunk


@pytest.mark.parametrize("library", ["httpx", "httpx2"])
def test_an_endless_answer_is_cut_at_the_byte_bound(tmp_path, library, caplog):
    from cpa_core.llm import client as module

    http = pytest.importorskip(library)
    sent = [0]

    def handler(request):
        return http.Response(200, headers={"content-type": "application/json"}, content=endless_body(sent))

    client = LLMClient(settings(tmp_path), http_client=http.Client(transport=http.MockTransport(handler)),
                       sleep=lambda s: None)
    with caplog.at_level(logging.DEBUG, logger="cpa_core.llm"), client:
        (out,) = client.complete(requests_for(1))
        assert len(client.cache) == 0 and client.estimate_calls(requests_for(1)) == 1
    assert out.failure == f"response over {module.MAX_RESPONSE_BYTES:,} bytes" and out.text == ""
    assert module.MAX_RESPONSE_BYTES <= sent[0] <= module.MAX_RESPONSE_BYTES + 2 * 65_536  # read no further
    assert client.calls_made_ == 1 and client.failed_answers_ == 1  # a failed call, not retried
    assert "SECRET-CONTENT" not in caplog.text


def test_an_announced_oversized_answer_is_refused_unread(tmp_path):
    from cpa_core.llm.client import MAX_RESPONSE_BYTES

    read = [0]

    def body():
        read[0] += 1
        yield b"{}"

    endpoint = FakeEndpoint(script=[lambda request: httpx.Response(
        200, headers={"content-type": "application/json", "content-length": str(MAX_RESPONSE_BYTES + 1)},
        content=body())])
    with client_for(tmp_path, endpoint) as client:
        (out,) = client.complete(requests_for(1))
    assert out.failure == f"response over {MAX_RESPONSE_BYTES:,} bytes" and read == [0]


def test_an_over_long_answer_text_is_a_failed_answer(tmp_path):
    from cpa_core.llm.client import MAX_ANSWER_CHARS

    endpoint = FakeEndpoint(script=[reply("x" * (MAX_ANSWER_CHARS + 1), "stop"), reply("y" * MAX_ANSWER_CHARS, "stop")])
    with client_for(tmp_path, endpoint, concurrency=1) as client:
        too_long, longest = client.complete(requests_for(2))
        assert too_long.failure == f"answer over {MAX_ANSWER_CHARS:,} characters" and too_long.text == ""
        assert longest.ok and len(longest.text) == MAX_ANSWER_CHARS and len(client.cache) == 1


def test_answers_are_asked_uncompressed_and_a_compressed_one_is_refused(tmp_path):
    """A compressed body's decoded size is not bounded by its bytes (a few kilobytes may decode to gigabytes)."""
    import gzip

    packed = gzip.compress(json.dumps(completion_body("B")).encode())
    endpoint = FakeEndpoint(script=[lambda request: httpx.Response(
        200, headers={"content-type": "application/json", "content-encoding": "gzip"}, content=iter([packed]))])
    with client_for(tmp_path, endpoint) as client:
        (out,) = client.complete(requests_for(1))
        assert len(client.cache) == 0
    assert endpoint.headers[0]["accept-encoding"] == "identity"
    assert out.failure.startswith("response compressed with 'gzip'")


# ------------------------------------------------------------------------------------ refreshing the cache
def test_refresh_asks_every_request_again_once_and_replaces_the_cached_answers(tmp_path):
    version = ["v1"]
    answered = []

    def handler(request):
        body = json.loads(request.content)
        answered.append(body["seed"])
        return httpx.Response(200, json=completion_body(f"{version[0]} {body['seed']}"))

    def make(**overrides):
        http = httpx.Client(transport=httpx.MockTransport(handler))
        return LLMClient(settings(tmp_path, **overrides), http_client=http, sleep=lambda s: None)

    reqs = requests_for(3)
    with make() as client:
        first = client.complete(reqs)
    version[0] = "v2"
    with make(refresh_cache=True) as client:
        assert client.estimate_calls(reqs) == 3  # the dry run counts every request: each is asked again
        fresh = client.complete(reqs)
        assert client.calls_made_ == 3 and client.cache_hits_ == 0
        # within the run, a request asked again is answered from its fresh entry (no second call)
        assert client.estimate_calls(reqs) == 0 and all(r.cached for r in client.complete(reqs))
        assert client.key(reqs[0]) == first[0].key  # the same requests, the same keys
    assert [r.text.split()[0] for r in first] == ["v1"] * 3 and [r.text.split()[0] for r in fresh] == ["v2"] * 3
    assert len(answered) == 6
    with make() as client:  # the next run reads the refreshed answers
        assert [r.text.split()[0] for r in client.complete(reqs)] == ["v2"] * 3 and client.calls_made_ == 0


def test_a_failed_answer_in_a_refresh_leaves_no_old_answer_behind(tmp_path):
    reqs = requests_for(1)
    with client_for(tmp_path, FakeEndpoint()) as client:
        client.complete(reqs)
    with client_for(tmp_path, FakeEndpoint(script=[reply(None, "length")]), refresh_cache=True) as client:
        assert not client.complete(reqs)[0].ok and len(client.cache) == 0
    with client_for(tmp_path, FakeEndpoint()) as client:
        assert client.estimate_calls(reqs) == 1


def test_refresh_is_a_run_choice_outside_the_declared_settings():
    from cpa_core.llm.client import LLM_PARAMS

    (param,) = [p for p in LLM_PARAMS if p.name == "refresh_cache"]
    assert param.option == "--refresh-llm-cache" and param.flag is True and param.default is False
    plain = LLMSettings(base_url="http://h/v1", model="m", cache_dir="/tmp/x")
    refresh = LLMSettings(base_url="http://h/v1", model="m", cache_dir="/tmp/x", refresh_cache=True)
    assert refresh.params() == plain.params() and "refresh_cache" not in refresh.params()  # the same manifest and id
    assert "refresh" not in repr(refresh)
