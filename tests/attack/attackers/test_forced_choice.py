"""The forced-choice attacker on a scripted endpoint (tests/llm_scripted.py), without a server: frequencies with
shuffled options mapped back, invalid picks, the all-invalid fallback and the logprobs softmax, the shortlist and
the budget, every expectation computed by hand; and the LLM attackers (clue extraction, forced choice, Profile-CPA)
through the audit without any leak of the key or of content, and the sampling-budget ablation. The clue extractor:
tests/attack/test_clues.py; Profile-CPA: tests/attack/attackers/test_profile.py.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass

import numpy as np
import pytest
from llm_scripted import (
    CLUE_LEVEL,
    KEY_ENV,
    LEVEL,
    SECRET,
    Scripted,
    api_key,  # noqa: F401 (the autouse fixture)
    attribute_answers,
    doc_of,
    ids_of,
    make_client,
    registry_fixture,  # noqa: F401 (the fixture registry)
    sample_of,
    text_of,
    user_message,
)

from cpa_core.attack.attackers.forced_choice import ForcedChoiceAttacker, label_distribution, option_order
from cpa_core.attack.attackers.profile import ProfileAttacker, attributes_from_registry
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.base import AttackerBase
from cpa_core.attack.candidates import CandidateTable
from cpa_core.attack.clues import LLMClueExtractor
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.common.errors import ConfigError, LLMBudgetError
from cpa_core.io.knowledge import profile_texts
from cpa_core.io.tables import load_documents
from cpa_core.llm.client import LLMResponse, TokenLogprob
from cpa_core.llm.prompts import FORCED_CHOICE_V1
from cpa_core.store.records import manifest, records

MARKERS = {"P1": "harp", "P2": "bees", "P3": "boats", "P4": "stamps", "P5": "dogs", "P6": "non-binary"}


def options_of(body: dict) -> list[tuple[str, str]]:
    return re.findall(r"^([A-Z])\. (.*)$", user_message(body), re.M)


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
    targets = {"d1": ["P2", "P2", "P3", "I cannot tell."], "d2": ["maybe", "??", "none", "both"]}
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
