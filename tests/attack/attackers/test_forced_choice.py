"""The LLM attackers (clue extraction, forced choice, Profile-CPA) on scripted endpoints, without a server.

A real :class:`~cpa_core.llm.client.LLMClient` talks to an ``httpx.MockTransport`` whose handler answers each
request from its prompt and seed, so every expectation below is computed by hand: the clue query string,
retries and the no-clue path; forced-choice frequencies with shuffled options mapped back, invalid picks,
the all-invalid fallback and the logprobs softmax; Profile-CPA's per-attribute scores, the identity set as
the intersection of the certified attribute sets (brute force), and its coverage over random splits with a
simulated attribute predictor (a fake client). Budgets are refused before any call, progress is reported,
and neither the key nor any content reaches the manifest or the logs.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import threading
from dataclasses import dataclass, replace

import httpx
import numpy as np
import pytest

from cpa_core.attack.attackers.forced_choice import ForcedChoiceAttacker, label_distribution, option_order
from cpa_core.attack.attackers.profile import (
    Attribute,
    AttributeSet,
    ProfileAttacker,
    attributes_from_registry,
    certified_attribute_sets,
    unseen_score,
    value_scores,
)
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.base import AttackerBase
from cpa_core.attack.candidates import CandidateTable
from cpa_core.attack.clues import LLMClueExtractor
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.common.errors import ConfigError, LLMBudgetError
from cpa_core.io.knowledge import KnowledgeLevel, profile_texts
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.llm.client import LLMClient, LLMResponse, LLMSettings, TokenLogprob, sample_seed
from cpa_core.llm.prompts import ATTRIBUTE_V1, CLUES_V1, FORCED_CHOICE_V1
from cpa_core.store.records import manifest, records

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
MARKERS = {"P1": "harp", "P2": "bees", "P3": "boats", "P4": "stamps", "P5": "dogs", "P6": "non-binary"}
LEVEL = KnowledgeLevel("L", ("gender", "age_band", "city", "occupation", "detail"))
CLUE_LEVEL = KnowledgeLevel("Lc", ("occupation", "city", "detail"), "direct_plus_clues")


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


@pytest.fixture
def registry():
    return load_registry(REGISTRY_CSV, name="registry.csv")


def text_of(doc: str) -> str:
    return f"Case note {doc}: a patient seen in clinic for a routine review."


# ------------------------------------------------------------------------------------------- scripted endpoint


def user_message(body: dict) -> str:
    return body["messages"][-1]["content"]


def doc_of(body: dict) -> str:
    return re.search(r"Case note (\w+):", user_message(body)).group(1)


def options_of(body: dict) -> list[tuple[str, str]]:
    return re.findall(r"^([A-Z])\. (.*)$", user_message(body), re.M)


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


@dataclass
class FixedShortlist(AttackerBase):
    """A retrieval attacker stub: a fixed ranked list of registry ids per document."""

    pools: dict
    top_k: int | None = None
    name: str = "fixed"

    def params(self) -> dict:
        return {"attacker": self.name, "top_k": self.top_k}

    def attack(self, doc_ids, texts, registry, level, progress=None) -> CandidateTable:
        index = {ident: i for i, ident in enumerate(registry.ids.tolist())}
        pools = [[index[c] for c in self.pools[d]][: self.top_k] for d in doc_ids]
        width = max(len(p) for p in pools)
        candidates = np.full((len(doc_ids), width), -1, dtype=np.int64)
        weights = np.zeros((len(doc_ids), width))
        for row, pool in enumerate(pools):
            candidates[row, : len(pool)] = pool
            weights[row, : len(pool)] = np.linspace(1.0, 0.5, len(pool)) / np.linspace(1.0, 0.5, len(pool)).sum()
        return CandidateTable(np.asarray(doc_ids, dtype=object), candidates, weights,
                              np.array([len(p) for p in pools], dtype=np.int64), registry.ids, tuple(texts))


def ids_of(table: CandidateTable, row: int) -> list[str]:
    return table.candidate_ids[table.candidates[row, : table.pool_sizes[row]]].tolist()


# ------------------------------------------------------------------------------------------------ clues


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
                                                      "malformed_answers": 0, "calls": 2}}
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
        if doc == "d2":  # never usable
            return ["", "{}", "no idea"][attempt]
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


# ------------------------------------------------------------------------------------------ forced choice


def choose(targets: dict):
    """Answer, per (document, sample index), the label of the option of ``targets[doc][j]`` (or the text given)."""
    def answer(body):
        doc = doc_of(body)
        j = sample_of(doc, body["seed"], "forced_choice")
        target = targets[doc][j]
        if target not in MARKERS:
            return target
        labels = [label for label, option in options_of(body) if MARKERS[target] in option]
        assert len(labels) <= 1
        return f"Answer: {labels[0]}" if labels else "B"  # the target is not in this shortlist
    return answer


def test_forced_choice_frequencies_follow_the_shuffled_options(tmp_path, registry):
    pools = {"d1": ["P1", "P2", "P3", "P4"], "d2": ["P5", "P6", "P1", "P2"]}
    targets = {"d1": ["P2", "P2", "P3", "I cannot tell."], "d2": ["maybe", "??", "", "both"]}
    script = Scripted(choose(targets))
    client = make_client(tmp_path, script)
    attacker = ForcedChoiceAttacker(FixedShortlist(pools), client, m=4, shortlist_k=4, seed=0)
    docs = ["d1", "d2"]
    texts = [text_of(d) for d in docs]
    assert attacker.estimate_calls(docs, texts, registry, LEVEL) == 8
    table = attacker.attack(docs, texts, registry, LEVEL)
    assert table.weight_kind == "probability" and table.pool_sizes.tolist() == [4, 4]
    # d1: P2 twice, P3 once, one invalid pick; zero-weight candidates keep the retrieval order
    assert ids_of(table, 0) == ["P2", "P3", "P1", "P4"]
    np.testing.assert_allclose(table.weights[0], [0.5, 0.25, 0.0, 0.0])
    # d2: every pick invalid -> uniform over the shortlist, in retrieval order
    assert ids_of(table, 1) == ["P5", "P6", "P1", "P2"]
    np.testing.assert_allclose(table.weights[1], [0.25] * 4)
    assert attacker.invalid_picks_ == 5 and attacker.all_invalid_documents_ == 1
    assert attacker.per_document_ == {"d1": {"samples": 4, "invalid_picks": 1, "uniform": False},
                                      "d2": {"samples": 4, "invalid_picks": 4, "uniform": True}}
    # each sample showed the options in its own seeded order, and the first option was not always the top-1
    texts_by_id = dict(zip(registry.ids.tolist(), profile_texts(registry, LEVEL)))
    orders = []
    for body in script.bodies:
        doc = doc_of(body)
        j = sample_of(doc, body["seed"], "forced_choice")
        order = option_order(0, doc, j, 4)
        shown = [option for _, option in options_of(body)]
        assert shown == [texts_by_id[pools[doc][p]] for p in order]
        assert [label for label, _ in options_of(body)] == ["A", "B", "C", "D"]
        assert "(A, B, C, D)" in user_message(body) and body["max_tokens"] == 16
        orders.append(tuple(order))
    assert len(set(orders)) > 1 and any(order[0] != 0 for order in orders)
    params = attacker.params()
    assert params["mode"] == "sampling" and params["interface"] == "sampling-only" and params["m"] == 4
    assert params["prompt"]["sha256"] == FORCED_CHOICE_V1.sha256 and params["shortlist_k"] == 4
    assert params["shortlister"] == {"attacker": "fixed", "top_k": 4}
    counters = attacker.counters()["attacker"]
    assert counters["invalid_picks"] == 5 and counters["all_invalid_documents"] == 1
    # a second run with a fresh client: the same table from the cache, no request
    again = make_client(tmp_path, Scripted(lambda body: pytest.fail("no request expected")))
    fresh = ForcedChoiceAttacker(FixedShortlist(pools), again, m=4, shortlist_k=4, seed=0)
    assert fresh.estimate_calls(docs, texts, registry, LEVEL) == 0
    second = fresh.attack(docs, texts, registry, LEVEL)
    assert again.calls_made_ == 0 and np.array_equal(second.candidates, table.candidates)
    # a smaller budget m reuses the first samples of the larger one: no new call
    smaller = ForcedChoiceAttacker(FixedShortlist(pools), again, m=2, shortlist_k=4, seed=0)
    assert smaller.estimate_calls(docs, texts, registry, LEVEL) == 0
    table2 = smaller.attack(docs, texts, registry, LEVEL)
    assert ids_of(table2, 0)[0] == "P2" and table2.weights[0, 0] == 1.0


def test_forced_choice_shortlist_is_truncated_to_k_and_scores_apply(tmp_path, registry):
    pools = {f"d{i}": ["P1", "P2", "P3", "P4", "P5", "P6"] for i in range(1, 5)}
    targets = {d: ["P3", "P1", "P3"] for d in pools}
    client = make_client(tmp_path, Scripted(choose(targets)))
    attacker = ForcedChoiceAttacker(FixedShortlist(pools), client, m=3, shortlist_k=3, seed=0)
    table = attacker.attack(list(pools), [text_of(d) for d in pools], registry, LEVEL)
    assert table.width == 3 and ids_of(table, 0) == ["P3", "P1", "P2"]
    np.testing.assert_allclose(table.weights[0], [2 / 3, 1 / 3, 0.0])
    from cpa_core.conformal.scores import SCORES
    aps = SCORES["aps"].to_method(SCORES["aps"].sorted_scores(table.weights, table.pool_sizes, table.tail_mass))[0]
    np.testing.assert_allclose(aps, [2 / 3, 1.0, 1.0])


def test_logprobs_mode_softmaxes_the_label_tokens(tmp_path, registry):
    pools = {"d1": ["P1", "P2", "P3"], "d2": ["P4", "P5", "P6"], "d3": ["P1", "P3", "P5"]}
    replies = {
        "d1": {"content": "A", "logprobs": [("A", -0.5, [("A", -0.5), (" B", -1.0), ("B", -2.0), ("The", -0.1)])]},
        "d2": {"content": "Answer: C", "logprobs": [
            ("Answer", -0.1, [("Answer", -0.1), ("The", -2.0)]), (":", -0.1, [(":", -0.1)]),
            (" C", -0.2, [(" C", -0.2), (" A", -1.9), ("(B", -9.0)])]},
        "d3": {"content": "hmm", "logprobs": [("hmm", -0.3, [("hmm", -0.3), ("Well", -1.2)])]},
    }
    script = Scripted(lambda body: replies[doc_of(body)])
    client = make_client(tmp_path, script)
    attacker = ForcedChoiceAttacker(FixedShortlist(pools), client, m=5, shortlist_k=3, mode="logprobs", seed=0)
    docs = list(pools)
    table = attacker.attack(docs, [text_of(d) for d in docs], registry, LEVEL)
    assert client.calls_made_ == 3  # one request per document whatever m
    assert all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in script.bodies)

    def expected(doc, by_label):
        order = option_order(0, doc, 0, 3)
        out = {}
        for label_index, value in by_label.items():
            out[pools[doc][order[label_index]]] = value
        return out

    a, b = math.exp(-0.5), math.exp(-1.0) + math.exp(-2.0)
    want1 = expected("d1", {0: a / (a + b), 1: b / (a + b), 2: 0.0})
    got1 = dict(zip(ids_of(table, 0), table.weights[0]))
    assert got1 == pytest.approx(want1)
    c, a2, b2 = math.exp(-0.2), math.exp(-1.9), math.exp(-9.0)
    want2 = expected("d2", {2: c / (c + a2 + b2), 0: a2 / (c + a2 + b2), 1: b2 / (c + a2 + b2)})
    assert dict(zip(ids_of(table, 1), table.weights[1])) == pytest.approx(want2)
    np.testing.assert_allclose(table.weights[2], [1 / 3] * 3)  # no label anywhere: uniform
    assert ids_of(table, 2) == ["P1", "P3", "P5"]
    assert attacker.logprob_fallbacks_ == 1 and attacker.invalid_picks_ == 1  # "hmm" names no option
    assert attacker.per_document_["d2"]["label_position"] == 2 and attacker.per_document_["d3"]["uniform"]
    params = attacker.params()
    assert params["mode"] == "logprobs" and params["interface"] == "logprobs" and params["m"] == 1
    assert attacker.counters()["attacker"]["logprob_fallbacks"] == 1


def test_label_distribution_by_hand():
    response = LLMResponse(text="B", finish_reason="stop", key="k", logprobs=(
        TokenLogprob("B", math.log(0.5), (("B", math.log(0.5)), ("A", math.log(0.3)), ("Z", math.log(0.2)))),))
    probabilities, position = label_distribution(response, ["A", "B", "C"])
    assert position == 0
    np.testing.assert_allclose(probabilities, [0.375, 0.625, 0.0])
    empty, position = label_distribution(LLMResponse(text="", finish_reason="stop", key="k"), ["A", "B"])
    assert position == -1 and empty.tolist() == [0.0, 0.0]


def test_forced_choice_budget_covers_the_whole_run(tmp_path, registry):
    script = Scripted(lambda body: '["nurse"]' if "clues" in user_message(body) else "A")
    client = make_client(tmp_path, script, call_budget=7)
    shortlister = TfidfAttacker(clue_extractor=LLMClueExtractor(client), temperature=1.0)
    attacker = ForcedChoiceAttacker(shortlister, client, m=3, shortlist_k=3)
    docs = ["d1", "d2"]
    texts = [text_of(d) for d in docs]
    # 2 clue extractions + 2 x 3 forced-choice samples = 8 > 7: refused before any call
    assert attacker.estimate_calls(docs, texts, registry, CLUE_LEVEL) == 8
    with pytest.raises(LLMBudgetError, match="needs 8 LLM calls"):
        attacker.attack(docs, texts, registry, CLUE_LEVEL)
    assert script.bodies == []
    # without clues: 6 forced-choice calls fit
    table = ForcedChoiceAttacker(TfidfAttacker(temperature=1.0), client, m=3, shortlist_k=3).attack(docs, texts, registry, LEVEL)
    assert len(script.bodies) == 6 and table.pool_sizes.tolist() == [3, 3]


def test_forced_choice_validates_its_settings(tmp_path):
    client = make_client(tmp_path, Scripted(lambda body: "A"))
    for bad in (dict(mode="beam"), dict(m=0), dict(shortlist_k=1)):
        with pytest.raises(ConfigError):
            ForcedChoiceAttacker(None, client, **bad)
    with pytest.raises(ConfigError, match="needs an LLM client"):
        ForcedChoiceAttacker(None, None)
    shortlister = TfidfAttacker(top_k=50, temperature=1.0)
    attacker = ForcedChoiceAttacker(shortlister, client, shortlist_k=7)
    assert attacker.shortlister.top_k == 7 and shortlister.top_k == 50  # a copy is truncated, not the caller's


# ------------------------------------------------------------------------------------------------ Profile-CPA


def attribute_answers(table: dict):
    """Answer ``table[doc][attribute name][j]`` (attribute name as in the prompt's wording)."""
    def answer(body):
        doc = doc_of(body)
        wording = re.search(r"What is the (.+?) of the person", user_message(body)).group(1)
        name = wording.replace(" ", "_")
        j = sample_of(doc, body["seed"], name)
        return table[doc][name][j]
    return answer


def test_value_scores_by_hand():
    # the share of the answers naming a strictly more frequent value; never answered: 1.0
    assert value_scores({"female": 3, "male": 2}) == {"female": 0.0, "male": 0.6}
    assert value_scores({"a": 2, "b": 2, "c": 1}) == {"a": 0.0, "b": 0.0, "c": 0.8}
    assert value_scores({"a": 1, "b": 1, "c": 1}) == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert value_scores({"a": 5}) == {"a": 0.0} and unseen_score({"a": 5}) == 1.0  # unanimous != never answered
    assert value_scores({}) == {} and unseen_score({}) == 0.0  # no valid answer: the attribute constrains nothing


def test_profile_scores_by_hand(tmp_path, registry):
    answers = {"d1": {"gender": ["female", "Female.", "she is female", "male", "Gender: male"],
                      "age_band": ["30-39", "30 - 39", "I don't know", "40-49", "30-39"]}}
    script = Scripted(attribute_answers(answers))
    client = make_client(tmp_path, script)
    attributes = attributes_from_registry(registry, ["gender", "age_band"])
    assert attributes[0].allowed_values == ("female", "male", "non-binary")
    attacker = ProfileAttacker(client, attributes, m=5, seed=0)
    assert attacker.estimate_calls(["d1"], [text_of("d1")], registry, LEVEL) == 10
    progress = []
    table = attacker.attack(["d1"], [text_of("d1")], registry, LEVEL,
                            lambda done, total, step: progress.append((done, total, step)))
    assert progress[-1] == (10, 10, "predicting attributes")
    assert attacker.distributions_["d1"] == {"gender": {"female": 3, "male": 2},
                                             "age_band": {"30 39": 3, "40 49": 1}}
    assert attacker.invalid_samples_ == {"gender": 0, "age_band": 1}
    # s_gender: female 0, male 3/5, non-binary (never answered) 1; s_age (4 valid answers): 30-39 0,
    # 40-49 3/4, others 1; a candidate scores the max over its attributes
    assert attacker.attribute_scores("d1", "gender") == {"female": 0.0, "male": 0.6}
    assert attacker.attribute_scores("d1", "age_band") == {"30 39": 0.0, "40 49": 0.75}
    # P1 (f, 30-39) 0, P5 (f, 30-39) 0, P2 (m, 30-39) 0.6, P3 (f, 40-49) 0.75, P4 (m, 40-49) 0.75, P6 (nb, 50-59) 1
    assert ids_of(table, 0) == ["P1", "P5", "P2", "P3", "P4", "P6"]
    np.testing.assert_allclose(-table.weights[0], [0.0, 0.0, 0.6, 0.75, 0.75, 1.0])
    assert table.weight_kind == "score" and table.pool_sizes.tolist() == [6]
    # the prompt offers the allowed values
    prompts = {user_message(b) for b in script.bodies}
    assert len(prompts) == 2 and any("gender" in p and "Choose one of: female, male, non-binary." in p for p in prompts)
    # certified attribute sets at a threshold
    gender, age = attributes
    assert attacker.attribute_set("d1", gender, 0.0) == AttributeSet(("female",), False)
    assert attacker.attribute_set("d1", age, 0.0) == AttributeSet(("30-39",), False)
    assert attacker.attribute_set("d1", gender, 0.6) == AttributeSet(("female", "male"), False)
    assert attacker.attribute_set("d1", age, 0.75) == AttributeSet(("30-39", "40-49"), False)
    assert attacker.attribute_set("d1", gender, 1.0) == AttributeSet(("female", "male", "non-binary"), True)
    params = attacker.params()
    assert params["score"] == "given" and params["m"] == 5 and params["prompt"]["sha256"] == ATTRIBUTE_V1.sha256
    assert params["attributes"][0] == {"name": "gender", "column": "gender", "label": "gender",
                                       "allowed_values": ["female", "male", "non-binary"]}
    assert attacker.counters()["attacker"]["invalid_samples"] == {"gender": 0, "age_band": 1}


def test_profile_free_text_missing_values_and_empty_distributions(tmp_path):
    registry = load_registry(b"identity_id,city,gender\nA,Leeds,female\nB,York,\nC,leeds,male\nD,Hull,male\n",
                             name="r.csv")
    level = KnowledgeLevel("L", ("city", "gender"))
    answers = {"d1": {"city": ["Leeds.", "City: LEEDS", "York"], "gender": ["??", "", "unsure"]}}
    client = make_client(tmp_path, Scripted(attribute_answers(answers)))
    attributes = attributes_from_registry(registry, ["city", "gender"], free_text=["city"])
    assert attributes[0].allowed_values is None and attributes[1].allowed_values == ("female", "male")
    attacker = ProfileAttacker(client, attributes, m=3)
    table = attacker.attack(["d1"], [text_of("d1")], registry, level)
    assert attacker.distributions_["d1"] == {"city": {"leeds": 2, "york": 1}, "gender": {}}
    assert attacker.empty_documents_ == {"city": 0, "gender": 1}
    # gender has no valid answer: every gender scores 0 (no constraint); city: leeds 0, york 2/3, others 1;
    # B's missing gender counts as never answered (0 here); D's Hull was never answered
    assert ids_of(table, 0) == ["A", "C", "B", "D"]
    np.testing.assert_allclose(-table.weights[0], [0.0, 0.0, 2 / 3, 1.0])
    city, gender = attributes
    assert attacker.attribute_set("d1", city, 0.0) == AttributeSet(("Leeds",), False)
    assert attacker.attribute_set("d1", city, 0.7) == AttributeSet(("Leeds", "York"), False)
    assert attacker.attribute_set("d1", city, 1.0).any_value
    assert attacker.attribute_set("d1", gender, 0.0) == AttributeSet(("female", "male"), True)


def test_profile_attributes_must_be_visible_at_the_level(tmp_path, registry):
    client = make_client(tmp_path, Scripted(lambda body: "female"))
    attacker = ProfileAttacker(client, [Attribute("gender", "gender")], m=1)
    with pytest.raises(ConfigError, match="not a field of knowledge level"):
        attacker.attack(["d1"], [text_of("d1")], registry, KnowledgeLevel("K", ("city",)))
    with pytest.raises(ConfigError, match="at least one attribute"):
        ProfileAttacker(client, [], m=1)
    with pytest.raises(ConfigError, match="not a column"):
        attributes_from_registry(registry, ["shoe_size"])


def test_profile_budget_is_refused_before_any_call(tmp_path, registry):
    script = Scripted(lambda body: "female")
    client = make_client(tmp_path, script, call_budget=5)
    attacker = ProfileAttacker(client, attributes_from_registry(registry, ["gender", "city"]), m=3)
    with pytest.raises(LLMBudgetError, match="needs 6 LLM calls"):
        attacker.attack(["d1"], [text_of("d1")], registry, LEVEL)
    assert script.bodies == []


def test_profile_requires_the_given_score(tmp_path, registry):
    client = make_client(tmp_path, Scripted(lambda body: "female"))
    attacker = ProfileAttacker(client, attributes_from_registry(registry, ["gender"]), m=1)
    with pytest.raises(ConfigError, match="needs score 'given'"):
        AuditConfig(knowledge=LEVEL, attacker=AttackerConfig.of(attacker), score="aps")
    AuditConfig(knowledge=LEVEL, attacker=AttackerConfig.of(attacker), score="given")


# ---------------------------------------------------------------- simulated predictor: sets and coverage


class SimulatedClient:
    """A fake LLM client answering attribute questions: the true value with probability ``accuracy``, else a
    uniformly drawn other value, from a generator seeded by the request's seed."""

    def __init__(self, truth: dict, values: dict, accuracy: float = 0.6):
        self.truth, self.values, self.accuracy = truth, values, accuracy
        self.call_budget = None
        self.calls_made_ = 0
        self._answers: dict = {}

    def params(self) -> dict:
        return {"base_url": "simulated://", "model": "simulated"}

    @staticmethod
    def _key(request):
        return request.prompt_sha256, request.sample_index, request.seed

    def estimate_calls(self, requests) -> int:
        return len({self._key(r) for r in requests} - set(self._answers))

    def complete(self, requests, progress=None, step=""):
        out = []
        for request in requests:
            key = self._key(request)
            if key not in self._answers:
                self.calls_made_ += 1
                self._answers[key] = self._answer(request)
            out.append(LLMResponse(text=self._answers[key], finish_reason="stop", key=str(key)))
        if progress:
            progress(len(requests), len(requests), step)
        return out

    def _answer(self, request) -> str:
        content = request.messages[-1]["content"]
        doc = re.search(r"Case note (\w+):", content).group(1)
        name = re.search(r"What is the (.+?) of the person", content).group(1).replace(" ", "_")
        rng = random.Random(request.seed)
        true = self.truth[doc][name]
        if rng.random() < self.accuracy and true:
            return true
        if rng.random() < 0.05:
            return "I cannot tell."
        return rng.choice(self.values[name])


def simulated_data(n_people: int = 60, n_docs: int = 400, seed: int = 3):
    rng = random.Random(seed)
    values = {"gender": ["female", "male", "non-binary"], "age_band": ["20-29", "30-39", "40-49", "50-59", "60-69"],
              "city": [f"Town{i}" for i in range(8)]}
    rows = []
    for i in range(n_people):
        row = {name: rng.choice(options) for name, options in values.items()}
        if i % 17 == 0:
            row["city"] = ""  # a missing registry value
        rows.append((f"P{i:03d}", row))
    csv = "identity_id,gender,age_band,city\n" + "".join(
        f"{ident},{r['gender']},{r['age_band']},{r['city']}\n" for ident, r in rows)
    registry = load_registry(csv.encode(), name="sim_registry.csv")
    people = dict(rows)
    docs = [(f"s{i:04d}", rng.choice(list(people))) for i in range(n_docs)]
    documents = load_documents(("doc_id,text,identity_id\n" + "".join(
        f"{d},{text_of(d)},{p}\n" for d, p in docs)).encode(), name="sim_documents.csv")
    truth = {d: people[p] for d, p in docs}
    return registry, documents, truth, values


def test_identity_set_is_the_intersection_of_the_attribute_sets():
    registry, documents, truth, values = simulated_data(n_docs=200)
    level = KnowledgeLevel("sim", ("gender", "age_band", "city"))
    attributes = attributes_from_registry(registry, ["gender", "age_band", "city"], free_text=["city"])
    attacker = ProfileAttacker(SimulatedClient(truth, values), attributes, m=4, seed=1)
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), score="given", confidences=(0.5, 0.8, 0.9),
                         n_cal=100, n_test=100, seed=0, protocol="split")
    result = run_audit(documents, registry, attacker, config)
    frame = registry.frame
    sizes_seen = set()
    for level_ in config.confidences:
        cert = result.certificate(level_)
        sets = certified_attribute_sets(cert, attacker)
        for row in range(len(cert.split)):
            brute = {ident for ident, *cells in zip(frame["identity_id"], *(frame[a.column] for a in attributes))
                     if all(sets[row][a.name].contains(cell) for a, cell in zip(attributes, cells))}
            assert set(cert.members(row).tolist()) == brute
            sizes_seen.add(len(brute))
    assert len(sizes_seen) > 3  # non-trivial sets of several sizes were compared


def test_profile_coverage_over_random_splits():
    registry, documents, truth, values = simulated_data(n_docs=400)
    level = KnowledgeLevel("sim", ("gender", "age_band", "city"))
    attributes = attributes_from_registry(registry, ["gender", "age_band", "city"])
    attacker = ProfileAttacker(SimulatedClient(truth, values, accuracy=0.8), attributes, m=5, seed=2)
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), score="given", confidences=(0.8, 0.9),
                         n_cal=150, n_test=150, seed=0, protocol="split")
    table = attacker.attack(documents.frame["doc_id"].tolist(), documents.frame["text"].tolist(), registry, level)
    coverage = {0.8: [], 0.9: []}
    sizes = {0.8: [], 0.9: []}
    for split_seed in range(120):
        result = run_audit(documents, registry, None, replace(config, seed=split_seed), table=table)
        for level_ in coverage:
            cert = result.certificate(level_)
            coverage[level_].append(cert.covered.mean())
            sizes[level_].append(cert.set_sizes.mean())
    for level_, values_ in coverage.items():
        values_ = np.array(values_)
        se = values_.std(ddof=1) / math.sqrt(len(values_))
        assert values_.mean() >= level_ - 3 * se - 1e-9, (level_, values_.mean(), se)
        assert np.mean(sizes[level_]) < 0.8 * len(registry)  # the sets are informative, not the whole registry


# ---------------------------------------------------------------- through the audit: records, manifest, logs


def small_documents(n: int = 12):
    people = ["P1", "P2", "P3", "P4", "P5", "P6"]
    rows = "".join(f"d{i},{text_of(f'd{i}')},{people[i % 6]}\n" for i in range(1, n + 1))
    return load_documents(("doc_id,text,identity_id\n" + rows).encode(), name="documents.csv")


def test_llm_attackers_run_through_the_audit_without_leaks(tmp_path, registry, caplog):
    documents = small_documents()
    texts = documents.frame["text"].tolist()
    fc_targets = {f"d{i}": ["P1", "P2", "P1"] for i in range(1, 13)}
    answers = {f"d{i}": {"gender": ["female", "male", "female"], "age_band": ["30-39"] * 3} for i in range(1, 13)}

    def answer(body):
        content = user_message(body)
        if "What is the" in content:
            return attribute_answers(answers)(body)
        if "Which of these people" in content:
            return choose(fc_targets)(body)
        return '["ZZ-clue-content"]'

    client = make_client(tmp_path, Scripted(answer))
    caplog.set_level(logging.DEBUG)
    fc = ForcedChoiceAttacker(TfidfAttacker(clue_extractor=LLMClueExtractor(client), temperature=1.0), client, m=3, shortlist_k=3)
    profile = ProfileAttacker(client, attributes_from_registry(registry, ["gender", "age_band"]), m=3)
    for attacker, score, level in ((fc, "aps", CLUE_LEVEL), (fc, "rank", LEVEL), (profile, "given", LEVEL)):
        config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), score=score, confidences=(0.8,),
                             n_cal=6, n_test=6, seed=1, protocol="split")
        result = run_audit(documents, registry, attacker, config)
        cert = result.certificate(0.8)
        assert (cert.set_sizes >= 1).all() and (cert.set_sizes <= result.test_split.table.pool_sizes).all()
        records_of_test = list(records(result, "test"))
        assert len(records_of_test) == 6 and all(r["sets"]["0.8"]["set_size"] >= 1 for r in records_of_test)
        dump = json.dumps(manifest(result), default=str)
        assert attacker.template.sha256 in dump and "scripted-model" in dump and KEY_ENV in dump
        assert SECRET not in dump and not any(t in dump for t in texts)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert logged and SECRET not in logged and "ZZ-clue-content" not in logged
    assert not any(t in logged for t in texts) and "harp" not in logged


# ------------------------------------------------------------------- sampling-budget ablation (stress.py)


def test_sampling_budget_ablation_costs_the_largest_budget_only(tmp_path, registry):
    from cpa_core.report import stress
    documents = small_documents()
    pools = {f"d{i}": ["P1", "P2", "P3", "P4"] for i in range(1, 13)}
    targets = {d: ["P1", "P2", "P1", "nothing"] for d in pools}
    script = Scripted(choose(targets))
    client = make_client(tmp_path, script, call_budget=47)
    attacker = ForcedChoiceAttacker(FixedShortlist(pools), client, m=5, shortlist_k=4)
    config = AuditConfig(knowledge=LEVEL, attacker=AttackerConfig.of(attacker), confidences=(0.8,), n_cal=6, n_test=6, seed=1, protocol="split")
    # m up to 4 needs 12 documents x 4 samples = 48 calls: refused before any call
    with pytest.raises(LLMBudgetError, match="needs 48 LLM calls"):
        stress.sampling_budget_ablation(documents, registry, config, attacker, ms=(1, 2, 4))
    assert script.bodies == []
    client = make_client(tmp_path, script, call_budget=48)
    attacker = ForcedChoiceAttacker(FixedShortlist(pools), client, m=5, shortlist_k=4)
    table = stress.sampling_budget_ablation(documents, registry, config, attacker, ms=(4, 1, 2))
    assert table["m"].tolist() == [1, 2, 4] and (table["confidence"] == 0.8).all()
    assert table["llm_calls"].tolist() == [12, 12, 24] and client.calls_made_ == 48  # max(m) samples per document
    assert (table["n_test"] == 6).all() and table["coverage"].between(0, 1).all()
    with pytest.raises(ConfigError, match="sampling attacker"):
        stress.sampling_budget_ablation(documents, registry, config, TfidfAttacker(), ms=(1, 3))
