"""Synthetic attacker outputs for tests: probability matrices with known true identities."""

from dataclasses import replace

import numpy as np
import pandas as pd

from cpa_core.attack.base import AttackerBase
from cpa_core.attack.candidates import CandidateTable, top_candidates
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Documents, Registry, ValidationReport


def probability_matrix(n: int, m: int, rng: np.random.Generator, concentration: float = 0.3) -> np.ndarray:
    return rng.dirichlet(np.full(m, concentration), size=n)


def sample_truth(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cumulative = probabilities.cumsum(axis=1)
    u = rng.random(probabilities.shape[0])[:, None] * cumulative[:, -1:]
    return (u > cumulative).sum(axis=1)


def table_from_matrix(probabilities: np.ndarray, top_k: int | None = None) -> CandidateTable:
    n, m = probabilities.shape
    index, weights = top_candidates(probabilities, top_k)
    if top_k is not None:
        weights = weights / weights.sum(axis=1, keepdims=True)
    return CandidateTable(np.array([f"d{i}" for i in range(n)], dtype=object), index, weights,
                          np.full(n, index.shape[1]), np.array([f"p{j}" for j in range(m)], dtype=object),
                          tuple(f"query {i}" for i in range(n)))


def documents_and_registry(truth_ids, groups=None, m: int = 0):
    """Minimal Documents/Registry objects for run_audit with a precomputed table."""
    n = len(truth_ids)
    frame = pd.DataFrame({"doc_id": [f"d{i}" for i in range(n)], "text": ["x"] * n, "identity_id": list(truth_ids)},
                         dtype=object)
    if groups is not None:
        frame["group"] = list(groups)
    registry = pd.DataFrame({"identity_id": [f"p{j}" for j in range(m)], "field": ["f"] * m}, dtype=object)
    return (Documents(frame, "docs", "0" * 64, ValidationReport("docs", n, n)),
            Registry(registry, "registry", "0" * 64, ValidationReport("registry", m, m)))


def toy_attacker(name: str = "toy", **kwargs) -> AttackerConfig:
    """The declared attacker of an audit run on a precomputed table."""
    return AttackerConfig(name, details={"attacker": name}, **kwargs)


LEVEL = KnowledgeLevel("toy", ("field",))


def toy_table():
    """Four documents, three candidates, probabilities chosen by hand."""
    weights = np.array([[0.6, 0.3, 0.1], [0.5, 0.4, 0.1], [0.7, 0.2, 0.1], [0.4, 0.4, 0.2]])
    candidates = np.array([[0, 1, 2], [1, 0, 2], [2, 1, 0], [0, 2, 1]])
    return CandidateTable(np.array(["d0", "d1", "d2", "d3"], dtype=object), candidates, weights,
                          np.full(4, 3), np.array(["p0", "p1", "p2"], dtype=object))


def toy_audit(confidences=(0.5,)):
    """toy_table's four documents audited under the split protocol (seed 0): d0 (truth p1) and d2 (p2) calibrate,
    d1 (p0) and d3 (p1) are certified.

    The calibration scores (APS, the mass down to the truth) are d0 0.6 + 0.3 = 0.9 and d2 0.7. The certified
    documents' ranked masses: d1 0.5, 0.9, 1.0 (p1, p0, p2); d3 0.8, 0.8 (a tie enters together), 1.0 (p0, p2, p1).
    """
    documents, registry = documents_and_registry(["p1", "p0", "p2", "p1"], m=3)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=2, n_test=2, seed=0, confidences=confidences,
                         protocol="split", certainty_bins=1)  # one stratum: the sets by hand
    return run_audit(documents, registry, None, config, table=toy_table())


class CountingAttacker(AttackerBase):
    """Serves rows of a fixed table and counts its attacks."""

    name = "counting"

    def __init__(self, table):
        self.table, self.calls = table, 0

    def params(self):
        return {"attacker": self.name}

    def attack(self, doc_ids, texts, registry, level, progress=None):
        self.calls += 1
        index = [int(d[1:]) for d in doc_ids]
        return self.table.rows(np.array(index))


def audited_groups(confidences=(0.8, 0.9)):
    """600 documents in two groups, calibrated per group (one certainty stratum each): (result, attacker, documents,
    registry)."""
    rng = np.random.default_rng(0)
    probabilities = probability_matrix(600, 30, rng)
    truth = sample_truth(probabilities, rng)
    groups = np.where(np.arange(600) % 3 == 0, "a", "b")
    documents, registry = documents_and_registry([f"p{t}" for t in truth], groups=groups, m=30)
    attacker = CountingAttacker(table_from_matrix(probabilities))
    cfg = AuditConfig(knowledge=LEVEL, attacker=toy_attacker("counting"), n_cal=200, n_test=300, seed=3,
                      group_column="group", confidences=confidences, protocol="split", certainty_bins=1)
    return run_audit(documents, registry, attacker, cfg), attacker, documents, registry


SECRET_TEXT = "the confidential released sentence"  # the query of every synthetic document


def small_audit(seed: int, flag_below: int = 5, confidences=(0.8, 0.9), unknown_every: int | None = None,
                acceptable_linkage: float | None = None):
    """120 documents against 20 profiles, release protocol; the same doc ids whatever the seed (``unknown_every``:
    every such document's subject is unknown, so the calibration documents are not a run of rows)."""
    rng = np.random.default_rng(seed)
    probabilities = probability_matrix(120, 20, rng)
    truth = [f"p{t}" for t in sample_truth(probabilities, rng)]
    if unknown_every:
        truth[1::unknown_every] = [None] * len(truth[1::unknown_every])
    documents, registry = documents_and_registry(truth, m=20)
    table = replace(table_from_matrix(probabilities), queries=tuple(f"{SECRET_TEXT} {i}" for i in range(120)))
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), confidences=confidences, flag_below=flag_below,
                         acceptable_linkage=acceptable_linkage)
    return run_audit(documents, registry, None, config, table=table)


def mixed_release(n: int, m: int, rng: np.random.Generator, share_sure: float = 0.3, lift: float = 6.0):
    """A release mixing documents the attacker is sure about and right on (the truth's logit lifted by ``lift``) with
    documents it cannot place (no lift: the truth is a draw from its own flat-ish output): ``(probabilities, truth,
    sure)``."""
    logits = rng.normal(size=(n, m))
    sure = rng.random(n) < share_sure
    truth = rng.integers(0, m, n)
    logits[np.flatnonzero(sure), truth[sure]] += lift
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    return probabilities, truth, sure


def hub_release(seed: int, n: int = 1200, m: int = 200):
    """Half the documents are their subject's, the other half nobody's: these put their weight on one of three hub
    candidates, with the same spread of margins. The certainty cannot tell the halves apart; the hubs can. Returns
    the table, each document's subject (``p<j>``) and whether the attacker's first guess is it."""
    rng = np.random.default_rng(seed)
    probabilities = rng.dirichlet(np.full(m, 0.5), size=n) * 0.2
    truth = rng.integers(3, m, size=n)
    placeable = rng.random(n) < 0.5
    top = np.where(placeable, truth, rng.integers(0, 3, size=n))
    probabilities[np.arange(n), top] += rng.uniform(0.1, 0.8, size=n)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    table = table_from_matrix(probabilities)
    first = table.candidates[:, 0]
    return table, np.array([f"p{t}" for t in truth], dtype=object), first == truth
