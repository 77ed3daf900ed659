"""The LLM client against a real OpenAI-compatible server (llama.cpp with SmolLM2-135M-Instruct).

Skipped, with the install command, when the server is not installed (see tests/llm_server.py).
What is tested is the pipeline (prompting, sampling with seeds, logprobs, caching, concurrency), not
the quality of a 135M model's answers.
"""

from __future__ import annotations

import pytest
from llm_server import client_factory, llm_server  # noqa: F401  (the session fixture)

from cpa_core.llm.client import LLMRequest, sample_seed
from cpa_core.llm.prompts import (
    ATTRIBUTE_V1,
    CLUES_V1,
    FORCED_CHOICE_V1,
    attribute_choices,
    format_options,
    option_labels,
    parse_attribute,
    parse_choice,
    parse_clues,
)

TEXT = ("Our head nurse, who has run the night shift at the children's hospital in Lyon since 2009, "
        "won the regional chess cup last spring and plays the cello in a local orchestra.")


@pytest.fixture
def make_client(llm_server, tmp_path):  # noqa: F811
    yield from client_factory(llm_server, api_key_env="CPA_TEST_NO_KEY", timeout_s=60.0,
                              cache_dir=str(tmp_path / "cache"))


def clue_request(seed: int, sample_index: int = 0) -> LLMRequest:
    return LLMRequest(messages=CLUES_V1.render(text=TEXT, max_clues=3), sample_index=sample_index, seed=seed)


def test_chat_completion_through_the_client(make_client):
    client = make_client()
    (answer,) = client.complete([clue_request(seed=1)])
    assert isinstance(answer.text, str) and answer.text.strip()
    assert answer.finish_reason in ("stop", "length") and not answer.cached
    assert answer.completion_tokens is None or 0 < answer.completion_tokens <= 24
    clues = parse_clues(answer.text)
    assert clues is None or all(isinstance(c, str) and c for c in clues)
    assert client.calls_made_ == 1 and client.retries_ == 0


def test_same_seed_gives_the_same_answer(make_client):
    client = make_client()
    seed = sample_seed(7, "doc-1", 0)
    # different sample indexes are different cache keys, so both are really drawn from the server
    first, second = client.complete([clue_request(seed, sample_index=0), clue_request(seed, sample_index=1)])
    assert client.calls_made_ == 2 and first.text == second.text


def test_second_run_costs_no_request_but_for_failed_answers(make_client):
    """Answers that ended normally are cached: a second run asks none of them. An answer cut at max_tokens (a clue
    list in 24 tokens) is a failed answer, never cached: asked again, the seeded server cuts it the same way."""
    values = ["female", "male"]
    messages = ATTRIBUTE_V1.render(text=TEXT, attribute="gender", choices=attribute_choices(values))
    requests = [LLMRequest(messages=messages, sample_index=j, seed=sample_seed(3, "doc", j)) for j in range(3)]
    requests.append(clue_request(seed=sample_seed(3, "doc", 0)))
    first = make_client().complete(requests)
    failed = sum(not r.ok for r in first)
    assert failed < len(requests), "no answer ended normally: nothing to serve from the cache"
    assert all(r.ok or (r.text == "" and r.failure) for r in first)
    again = make_client()
    assert again.estimate_calls(requests) == failed
    second = again.complete(requests)
    assert again.calls_made_ == failed and again.cache_hits_ == len(requests) - failed
    assert [r.text for r in second] == [r.text for r in first] and [r.cached for r in second] == [r.ok for r in first]


def test_logprobs_with_top_logprobs_come_back_parsed(make_client):
    client = make_client()
    labels = option_labels(3)
    messages = FORCED_CHOICE_V1.render(text=TEXT, options=format_options(
        ["a chess-playing nurse in Lyon", "a baker in Oslo", "a pilot in Lima"]), labels=", ".join(labels))
    (answer,) = client.complete([LLMRequest(messages=messages, seed=5, logprobs=True, top_logprobs=3, max_tokens=4)])
    assert answer.logprobs, "no logprobs came back"
    for position in answer.logprobs:
        assert isinstance(position.token, str) and position.logprob <= 1e-6
        assert 1 <= len(position.top) <= 4 and all(lp <= 1e-6 for _, lp in position.top)
    assert answer.top_logprobs(0) and answer.logprobs[0].token in answer.top_logprobs(0)
    assert parse_choice(answer.text, labels) in (*labels, None)


def test_concurrency_two(make_client):
    client = make_client(concurrency=2, max_tokens=12)
    values = ["female", "male"]
    messages = ATTRIBUTE_V1.render(text=TEXT, attribute="gender", choices=attribute_choices(values))
    requests = [LLMRequest(messages=messages, sample_index=j, seed=sample_seed(11, "doc", j)) for j in range(4)]
    answers = client.complete(requests)
    assert len(answers) == 4 and all(isinstance(a.text, str) for a in answers)
    assert client.calls_made_ == 4 and client.retries_ == 0
    assert all(parse_attribute(a.text, values) in (*values, None) for a in answers)
