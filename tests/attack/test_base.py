"""The attacker interface: the answers of an attacker that calls no LLM, the digest of its inputs, closing its
clients, the queries of each query mode, and the retrieval attackers' shared machinery (temperature checked, learnt
or adopted, similarities computed once per input, clues carried into the table), on a hand-made attacker whose
similarities are given."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from word_registry import WORDS, make_registry

from cpa_core.attack.base import (
    AttackerBase,
    RetrievalAttacker,
    build_queries,
    close_clients,
    extract_clues,
    texts_key,
)
from cpa_core.attack.explainers import TermExplainer
from cpa_core.attack.temperature import FALLBACK_TEMPERATURE, TEMPERATURE_GRID
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel

CLUES = KnowledgeLevel("C", ("words",), "direct_plus_clues")


@dataclass
class Given(RetrievalAttacker):
    """A retrieval attacker whose similarities are given (rows by document index in ``sims``)."""

    sims: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    temperature: float | str = 1.0
    top_k: int | None = None
    chunk_size: int = 8
    clue_extractor: Any = None
    name: str = "given"

    def __post_init__(self):
        self._start()
        self.computed = 0

    def params(self) -> dict:
        return {"attacker": self.name}

    def similarities(self, doc_ids, texts, registry, level, progress=None):
        self.computed += 1
        queries = self.queries(doc_ids, texts, level, progress)
        rows = [int(d[1:]) for d in doc_ids]
        return queries, lambda start, stop: self.sims[rows][start:stop]


class Extractor:
    """A clue extractor answering fixed clues per document, counting what it is asked."""

    def __init__(self, clues: dict):
        self.clues, self.asked, self.client = clues, [], object()

    def __call__(self, doc_ids, texts, progress=None):
        self.asked.append(list(doc_ids))
        return [self.clues[d] for d in doc_ids]

    def params(self):
        return {"extractor": "fixed"}

    def estimate_calls(self, doc_ids, texts):
        return len(doc_ids) * 10

    def counters(self):
        return {"documents": sum(map(len, self.asked))} if self.asked else None

    def clients(self):
        return [self.client]


def test_an_attacker_without_llm_answers_nothing_to_count():
    base = AttackerBase()
    assert base.required_score is None and base.weight_kind == "probability"
    assert base.learn(["d"], ["t"], None, WORDS, ["P1"]) == {} and base.adopt({"temperature": 1.0}) is None
    assert base.estimate_calls(["d"], ["t"], None, WORDS) == 0 and base.counters() == {} and base.clients() == []
    assert base.explainer(None, WORDS) is None


def test_the_digest_of_the_documents_attacked():
    key = texts_key(["d1", "d2"], ["a", "b"])
    assert len(key) == 64 and key == texts_key(["d1", "d2"], ["a", "b"])
    assert key != texts_key(["d2", "d1"], ["b", "a"])                      # the order counts
    assert texts_key(["d1", "d2"], ["a"]) != texts_key(["d1"], ["d2", "a"])  # ids and texts kept apart
    assert texts_key(["d1"], ["ab"]) != texts_key(["d1"], ["a", "b"])


def test_each_client_is_closed_once():
    class Client:
        def __init__(self):
            self.closed = 0

        def close(self):
            self.closed += 1

    first, second = Client(), Client()

    class Holder(AttackerBase):
        def clients(self):
            return [first, second, first]

    close_clients(Holder())
    assert (first.closed, second.closed) == (1, 1)


def test_the_queries_of_each_mode():
    extractor = Extractor({"d1": ["nurse", "Leeds"], "d2": []})
    assert extract_clues(["d1"], ["text"], WORDS, extractor) is None and extractor.asked == []  # direct: none asked
    assert build_queries(["d1", "d2"], ["one", "two"], WORDS, None) == ["one", "two"]
    assert extract_clues(["d1", "d2"], ["one", "two"], CLUES, extractor) == [("nurse", "Leeds"), ()]
    assert build_queries(["d1", "d2"], ["one", "two"], CLUES, extractor) == ["one\nnurse; Leeds", "two"]
    with pytest.raises(ConfigError, match="^knowledge level 'C' uses query mode 'direct_plus_clues', which needs a "
                                          "clue extractor"):
        build_queries(["d1"], ["one"], CLUES, None)


def test_a_retrieval_attack_by_hand():
    registry = make_registry({"P1": "alpha", "P2": "beta", "P3": "gamma"})
    sims = np.array([[0.0, math.log(3.0), 0.0], [math.log(2.0), 0.0, 0.0]])
    attacker = Given(sims, temperature=1.0)
    table = attacker.attack(["d0", "d1"], ["first", "second"], registry, WORDS)
    # d0: exp(0), 3, 1 over 5; d1: 2, 1, 1 over 4; ties keep the registry order
    assert table.candidates.tolist() == [[1, 0, 2], [0, 1, 2]]
    np.testing.assert_allclose(table.weights, [[0.6, 0.2, 0.2], [0.5, 0.25, 0.25]])
    assert table.candidate_ids.tolist() == ["P1", "P2", "P3"] and table.pool_sizes.tolist() == [3, 3]
    assert table.queries == ("first", "second") and table.clues is None
    short = Given(sims, temperature=0.5, top_k=1).attack(["d0"], ["first"], registry, WORDS)
    # T = 0.5 squares the odds: 1, 9, 1 over 11; the tail is the mass cut
    assert short.candidates.tolist() == [[1]] and short.weights[0, 0] == pytest.approx(9 / 11)
    assert short.tail_mass[0] == pytest.approx(2 / 11)


def test_the_similarities_of_one_input_are_computed_once():
    registry = make_registry({"P1": "alpha", "P2": "beta"})
    attacker = Given(np.eye(2), temperature="auto")
    attacker.learn(["d0", "d1"], ["a", "b"], registry, WORDS, ["P1", "P2"])  # the tuning fold's own rows: one
    assert attacker.computed == 1
    attacker.attack(["d0", "d1"], ["a", "b"], registry, WORDS)
    attacker.attack(["d0", "d1"], ["a", "b"], registry, WORDS)
    assert attacker.computed == 2
    attacker.attack(["d1"], ["b"], registry, WORDS)  # other documents
    assert attacker.computed == 3


@pytest.mark.parametrize("bad", [0, -1.0, 0.0009, 1000.5, True, "hot", float("nan"), None])
def test_a_temperature_is_a_number_from_0_001_to_1000_or_auto(bad):
    with pytest.raises(ConfigError) as refused:
        Given(temperature=bad)
    assert str(refused.value) == f"temperature must be a positive number (from 0.001 to 1000) or 'auto', found {bad!r}"
    for good in (0.001, 1, 1000.0, "auto"):
        Given(temperature=good)


def test_the_temperature_auto_is_learnt_from_the_labelled_documents_or_adopted():
    registry = make_registry({"P1": "alpha", "P2": "beta", "P3": "gamma"})
    sims = np.random.default_rng(0).random((12, 3))
    attacker = Given(sims, temperature="auto")
    with pytest.raises(ConfigError, match="temperature 'auto' is chosen from the labelled documents"):
        attacker.effective_temperature
    doc_ids = [f"d{i}" for i in range(12)]
    identities = ["P1", "P2", "P3", None] * 3  # three unlabelled documents
    learned = attacker.learn(doc_ids, ["t"] * 12, registry, WORDS, identities)
    assert learned["temperature"] in TEMPERATURE_GRID and learned["labelled_documents_used"] == 2  # a fifth of 9
    assert len(learned["tuning_documents"]) == 2 and attacker.effective_temperature == learned["temperature"]
    outsiders = Given(sims, temperature="auto")  # nobody's identity in the registry: the fallback
    learned = outsiders.learn(doc_ids, ["t"] * 12, registry, WORDS, ["X9"] * 12)
    assert learned["temperature"] == FALLBACK_TEMPERATURE == 1.0 and learned["labelled_documents_used"] == 0
    adopting = Given(sims, temperature="auto")
    adopting.adopt({"temperature": 0.25})
    assert adopting.effective_temperature == 0.25
    fixed = Given(sims, temperature=0.5)
    fixed.adopt({"temperature": 0.25})  # a declared temperature is kept
    assert fixed.effective_temperature == 0.5 and fixed.learn(doc_ids, ["t"] * 12, registry, WORDS, identities) == {}


def test_clues_go_into_the_table_and_the_extractors_answers_are_the_attackers():
    registry = make_registry({"P1": "alpha", "P2": "beta"})
    extractor = Extractor({"d0": ["nurse"], "d1": []})
    attacker = Given(np.eye(2), clue_extractor=extractor)
    assert attacker.estimate_calls(["d0", "d1"], ["a", "b"], registry, WORDS) == 0  # direct: no clue asked
    assert attacker.estimate_calls(["d0", "d1"], ["a", "b"], registry, CLUES) == 20
    assert attacker.counters() == {}  # before a run
    table = attacker.attack(["d0", "d1"], ["a", "b"], registry, CLUES)
    assert table.queries == ("a\nnurse", "b") and table.clues == (("nurse",), ())
    assert attacker.counters() == {"clue_extractor": {"documents": 2}}
    assert attacker.clients() == [extractor.client]
    assert attacker.clue_params() == {"clue_extractor": {"extractor": "fixed"}}
    assert Given(np.eye(2)).clue_params() == {} and Given(np.eye(2)).clients() == []


def test_the_retrieval_explainer_needs_profile_words():
    assert isinstance(Given().explainer(make_registry({"P1": "alpha beta", "P2": "gamma"}), WORDS), TermExplainer)
    assert Given().explainer(make_registry({"P1": "", "P2": " "}), WORDS) is None  # nothing to explain
