"""Profile-CPA on a scripted endpoint (tests/llm_scripted.py), without a server: per-attribute value scores and
the candidates' scores by hand, free-text attributes and missing values, the certified attribute sets, settings
refused, the budget; with a simulated attribute predictor (a fake client), the identity set as the intersection of
the certified attribute sets (brute force) and its coverage over random splits.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import replace

import numpy as np
import pytest
from llm_scripted import (
    LEVEL,
    Scripted,
    api_key,  # noqa: F401 (the autouse fixture)
    attribute_answers,
    ids_of,
    make_client,
    registry_fixture,  # noqa: F401 (the fixture registry)
    text_of,
    user_message,
)

from cpa_core.attack.attackers.profile import (
    Attribute,
    AttributeSet,
    ProfileAttacker,
    attributes_from_registry,
    certified_attribute_sets,
    unseen_score,
    value_scores,
)
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.common.errors import ConfigError, LLMBudgetError
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.llm.client import LLMResponse
from cpa_core.llm.prompts import ATTRIBUTE_V1


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
            weights = cert.split.table.weights[row, :cert.split.table.pool_sizes[row]]
            if len(weights) > 1 and weights[0] == weights[-1]:  # every row scored alike: no information, whole pool
                brute = set(frame["identity_id"])
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
