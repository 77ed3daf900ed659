"""A scripted OpenAI-compatible chat-completions endpoint for the LLM client tests: the real ``openai`` client on
an ``httpx.MockTransport``, its settings, and requests to send it.

The ``api_key`` fixture is autouse: import it into a test module (``from llm_endpoint import api_key  # noqa:
F401``) and every test there runs with the test key set. A child process can import this module too (with
``tests`` on its ``sys.path``).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time

import httpx
import pytest

from cpa_core.llm.client import LLMClient, LLMRequest, LLMSettings, sample_seed
from cpa_core.llm.prompts import CLUES_V1

SECRET = "sk-test-DO-NOT-LEAK-4242"
KEY_ENV = "CPA_TEST_LLM_KEY"
BASE_URL = "http://llm.test/v1"
DOC_TEXT = "Confidential: the night nurse from Lyon who won the 2011 chess cup"


def completion_body(text: str, logprobs: int | None = None, finish: str = "stop") -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
    if logprobs is not None:
        tokens = text.split() or [""]
        choice["logprobs"] = {"content": [
            {"token": tok, "logprob": -0.5 * (i + 1), "bytes": None,
             "top_logprobs": [{"token": f"{tok}#{j}", "logprob": -1.0 - j, "bytes": None} for j in range(logprobs)]}
            for i, tok in enumerate(tokens)]}
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [choice], "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}}


class FakeEndpoint:
    """A scripted chat-completions endpoint: records every request, tracks requests in flight.

    ``script`` is a list of outcomes used in order, one per request (then success): an int status, a
    ``bytes`` body, an exception instance to raise, or a callable(request) -> httpx.Response.
    """

    def __init__(self, script=(), delay: float = 0.0):
        self.script = list(script)
        self.delay = delay
        self.bodies: list[dict] = []
        self.headers: list[httpx.Headers] = []
        self.timeouts: list[dict] = []
        self.answered: list[tuple] = []  # identity of each request answered with 200
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()

    @staticmethod
    def identity(body: dict) -> tuple:
        return (hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest()[:16], body.get("seed"),
                body.get("temperature"), body.get("top_p"), body.get("max_tokens"), body.get("top_logprobs"))

    @staticmethod
    def answer_text(body: dict) -> str:
        return f"answer {FakeEndpoint.identity(body)[0][:6]} seed {body.get('seed')}"

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        with self.lock:
            self.bodies.append(body)
            self.headers.append(request.headers)
            self.timeouts.append(request.extensions.get("timeout"))
            outcome = self.script.pop(0) if self.script else None
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            if isinstance(outcome, BaseException):
                raise outcome
            if callable(outcome):
                return outcome(request)
            if isinstance(outcome, int):
                return httpx.Response(outcome, json={"error": {"message": f"echo of the prompt: {body['messages']}",
                                                               "type": "server_error", "code": outcome}})
            if isinstance(outcome, bytes):
                return httpx.Response(200, content=outcome, headers={"content-type": "application/json"})
            with self.lock:
                self.answered.append(self.identity(body))
            return httpx.Response(200, json=completion_body(self.answer_text(body), body.get("top_logprobs")))
        finally:
            with self.lock:
                self.in_flight -= 1


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


def settings(tmp_path, **overrides) -> LLMSettings:
    values = dict(base_url=BASE_URL, model="test-model", api_key_env=KEY_ENV, cache_dir=str(tmp_path / "cache"),
                  max_retries=3, concurrency=2, timeout_s=5.0)
    values.update(overrides)
    return LLMSettings(**values)


def client_for(tmp_path, endpoint: FakeEndpoint, sleeps: list | None = None, **overrides) -> LLMClient:
    http = httpx.Client(transport=httpx.MockTransport(endpoint.handler))
    return LLMClient(settings(tmp_path, **overrides), http_client=http,
                     sleep=(sleeps.append if sleeps is not None else (lambda s: None)), rng=random.Random(7))


def requests_for(n: int, samples: int = 1, **kwargs) -> list[LLMRequest]:
    out = []
    for doc in range(n):
        messages = CLUES_V1.render(text=f"{DOC_TEXT} #{doc}", max_clues=5)
        for j in range(samples):
            out.append(LLMRequest(messages=messages, sample_index=j, seed=sample_seed(1, f"d{doc}", j), **kwargs))
    return out
