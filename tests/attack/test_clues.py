"""The LLM clue extractor of the ``direct_plus_clues`` query mode on a scripted endpoint (tests/llm_scripted.py),
without a server: the clue query string, the request (template, seed, decoding), retries of malformed answers and
the no-clue path, answers served from the cache, and budgets refused before any call.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from llm_scripted import (
    CLUE_LEVEL,
    KEY_ENV,
    Scripted,
    api_key,  # noqa: F401 (the autouse fixture)
    doc_of,
    make_client,
    registry_fixture,  # noqa: F401 (the fixture registry)
    sample_of,
    text_of,
)

from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.clues import LLMClueExtractor
from cpa_core.common.errors import LLMBudgetError
from cpa_core.llm.client import sample_seed
from cpa_core.llm.prompts import CLUES_V1


def test_clues_are_appended_to_the_tfidf_query(tmp_path, registry):
    script = Scripted(lambda body: '```json\n["works night shifts", "Leeds"]\n```' if doc_of(body) == "d1"
                      else "- keeps bees\n- 30s")
    client = make_client(tmp_path, script)
    extractor = LLMClueExtractor(client, max_clues=5, retries=2, seed=0)
    attacker = TfidfAttacker(clue_extractor=extractor, temperature=1.0)
    table = attacker.attack(["d1", "d2"], [text_of("d1"), text_of("d2")], registry, CLUE_LEVEL)
    assert table.queries == (text_of("d1") + "\nworks night shifts; Leeds", text_of("d2") + "\nkeeps bees; 30s")
    assert extractor.clues_ == {"d1": ["works night shifts", "Leeds"], "d2": ["keeps bees", "30s"]}
    assert extractor.no_clue_documents_ == 0 and client.calls_made_ == 2
    # the request: the versioned template, a per-document seed, the settings' decoding
    body = next(b for b in script.bodies if doc_of(b) == "d1")
    assert body["messages"] == CLUES_V1.render(text=text_of("d1"), max_clues=5)
    assert body["seed"] == sample_seed(0, "d1", "clues", 0)
    params = extractor.params()
    assert params["prompt"] == {"name": "clues", "version": 1, "sha256": CLUES_V1.sha256}
    assert params["llm"]["model"] == "scripted-model" and params["llm"]["api_key_env"] == KEY_ENV
    assert attacker.counters() == {"clue_extractor": {"documents": 2, "no_clue_documents": 0, "retried_documents": 0,
                                                      "malformed_answers": 0, "calls": 2, "requests": 2,
                                                      "invalid_answers": 0, "failed_answers": 0}}
    assert attacker.clients() == [client]
    # the direct mode never calls the extractor
    direct = attacker.attack(["d1"], [text_of("d1")], registry, replace(CLUE_LEVEL, query_mode="direct"))
    assert direct.queries == (text_of("d1"),) and client.calls_made_ == 2


def test_malformed_answers_are_retried_then_recorded_as_no_clues(tmp_path, registry):
    def answer(body):
        doc = doc_of(body)
        attempt = sample_of(doc, body["seed"], "clues")
        if doc == "d1":  # first answer unusable, the retry works
            return "I'm sorry, I can't help with that." if attempt == 0 else '["retired teacher"]'
        if doc == "d2":  # never usable (but answered: an empty answer would not be cached)
            return ["[]", "{}", "no idea"][attempt]
        return '["pilot"]'

    script = Scripted(answer)
    client = make_client(tmp_path, script)
    extractor = LLMClueExtractor(client, retries=2)
    docs = ["d1", "d2", "d3"]
    texts = [text_of(d) for d in docs]
    assert extractor.estimate_calls(docs, texts) == 3  # first answers only: they are not known yet
    progress = []
    clues = extractor(docs, texts, lambda done, total, step: progress.append((done, total, step)))
    assert clues == [["retired teacher"], [], ["pilot"]]
    assert client.calls_made_ == 6  # d1: 2, d2: 3, d3: 1
    assert sorted(sample_of(doc_of(b), b["seed"], "clues") for b in script.bodies if doc_of(b) == "d2") == [0, 1, 2]
    assert (extractor.no_clue_documents_, extractor.retried_documents_, extractor.malformed_answers_) == (1, 2, 4)
    assert extractor.attempts_ == {"d1": 2, "d2": 3, "d3": 1}
    assert progress[-1] == (1, 1, "extracting clues (retry 2)") and (3, 3, "extracting clues") in progress
    # the query of a document without clues is its text alone
    table = TfidfAttacker(clue_extractor=extractor, temperature=1.0).attack(docs, texts, registry, CLUE_LEVEL)
    assert table.queries[1] == texts[1] and table.queries[0] == texts[0] + "\nretired teacher"
    # a fresh client on the same cache: the dry run knows every answer, the run makes no call
    again = make_client(tmp_path, Scripted(lambda body: pytest.fail("no request expected")))
    fresh = LLMClueExtractor(again, retries=2)
    assert fresh.estimate_calls(docs, texts) == 0
    assert fresh(docs, texts) == clues and again.calls_made_ == 0


def test_clue_budget_is_refused_before_any_call(tmp_path):
    script = Scripted(lambda body: '["x"]')
    client = make_client(tmp_path, script, call_budget=2)
    with pytest.raises(LLMBudgetError, match="needs 3 LLM calls"):
        LLMClueExtractor(client)(["d1", "d2", "d3"], [text_of(d) for d in ("d1", "d2", "d3")])
    assert script.bodies == [] and client.calls_made_ == 0


def test_retries_beyond_the_budget_stop_the_run(tmp_path):
    script = Scripted(lambda body: "nothing useful")
    client = make_client(tmp_path, script, call_budget=3)
    with pytest.raises(LLMBudgetError, match="retrying 2 answers"):
        LLMClueExtractor(client, retries=2)(["d1", "d2"], [text_of("d1"), text_of("d2")])
    assert len(script.bodies) == 2  # the first answers (cached); no retry was sent
