"""Synthetic attacker outputs for tests: probability matrices with known true identities."""

import numpy as np
import pandas as pd

from cpa_core.candidates import CandidateTable, top_candidates
from cpa_core.data import Documents, Registry, ValidationReport


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
