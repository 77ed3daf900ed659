"""A scripted chat-completions endpoint for the LLM attackers' tests (clue extraction, forced choice, Profile-CPA),
without a server: a real :class:`~cpa_core.llm.client.LLMClient` talks to an ``httpx.MockTransport`` whose handler
answers each request from its prompt and seed, so every expectation is computed by hand.

The ``api_key`` fixture is autouse and ``registry`` (the hand-made registry below) is asked for by name: import
``api_key`` and ``registry_fixture`` into a test module (``# noqa: F401``).
"""

from __future__ import annotations

import json
import re
import threading

import httpx
import pytest

from cpa_core.attack.candidates import CandidateTable
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import load_registry
from cpa_core.llm.client import LLMClient, LLMSettings, sample_seed

SECRET = "sk-test-LLM-ATTACKERS-DO-NOT-LEAK"
KEY_ENV = "CPA_TEST_LLM_ATTACKERS_KEY"

REGISTRY_CSV = (
    "identity_id,gender,age_band,city,occupation,detail\n"
    "P1,female,30-39,Leeds,nurse,plays the harp\n"
    "P2,male,30-39,Leeds,nurse,keeps bees\n"
    "P3,female,40-49,York,baker,sails boats\n"
    "P4,male,40-49,York,pilot,collects stamps\n"
    "P5,female,30-39,York,nurse,breeds dogs\n"
    "P6,non-binary,50-59,Leeds,baker,\n"
).encode()
LEVEL = KnowledgeLevel("L", ("gender", "age_band", "city", "occupation", "detail"))
CLUE_LEVEL = KnowledgeLevel("Lc", ("occupation", "city", "detail"), "direct_plus_clues")


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


@pytest.fixture(name="registry")
def registry_fixture():
    """The hand-made registry of six people (:data:`REGISTRY_CSV`)."""
    return load_registry(REGISTRY_CSV, name="registry.csv")


def text_of(doc: str) -> str:
    return f"Case note {doc}: a patient seen in clinic for a routine review."


def user_message(body: dict) -> str:
    return body["messages"][-1]["content"]


def doc_of(body: dict) -> str:
    return re.search(r"Case note (\w+):", user_message(body)).group(1)


class Scripted:
    """A chat-completions endpoint answering ``answer(body)``: a text, or a dict with ``content`` and
    ``logprobs`` (a list of (token, logprob, [(alternative, logprob), ...]))."""

    def __init__(self, answer):
        self.answer = answer
        self.bodies: list[dict] = []
        self.lock = threading.Lock()

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        with self.lock:
            self.bodies.append(body)
        out = self.answer(body)
        out = {"content": out} if isinstance(out, str) else out
        choice = {"index": 0, "message": {"role": "assistant", "content": out["content"]}, "finish_reason": "stop"}
        if "logprobs" in out:
            choice["logprobs"] = {"content": [
                {"token": token, "logprob": logprob, "bytes": None,
                 "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in top]}
                for token, logprob, top in out["logprobs"]]}
        return httpx.Response(200, json={"id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
                                         "choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": 2,
                                                                        "total_tokens": 11}})


def make_client(tmp_path, script: Scripted, **overrides) -> LLMClient:
    values = dict(base_url="http://llm.test/v1", model="scripted-model", api_key_env=KEY_ENV,
                  cache_dir=str(tmp_path / "cache"), max_retries=0, concurrency=2, timeout_s=5.0)
    values.update(overrides)
    return LLMClient(LLMSettings(**values), http_client=httpx.Client(transport=httpx.MockTransport(script.handler)))


def sample_of(doc: str, seed: int, *parts, samples: int = 20) -> int:
    """The sample index whose seed is ``seed`` (sample seeds are a function of the document and index)."""
    for j in range(samples):
        if sample_seed(0, doc, *parts, j) == seed:
            return j
    raise AssertionError("unknown seed")


def ids_of(table: CandidateTable, row: int) -> list[str]:
    return table.candidate_ids[table.candidates[row, : table.pool_sizes[row]]].tolist()


def attribute_answers(table: dict):
    """Answer ``table[doc][attribute name][j]`` (attribute name as in the prompt's wording)."""
    def answer(body):
        doc = doc_of(body)
        wording = re.search(r"What is the (.+?) of the person", user_message(body)).group(1)
        name = wording.replace(" ", "_")
        j = sample_of(doc, body["seed"], name)
        return table[doc][name][j]
    return answer
