"""A registry of words written by hand (no file), its knowledge level and four toy profiles: shared by the
retrieval attackers' tests and the evidence tests."""

from __future__ import annotations

import pandas as pd

from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Registry, ValidationReport


def make_registry(rows: dict[str, str], field: str = "words") -> Registry:
    """A registry whose one field (``words``) holds the given text of each identity."""
    frame = pd.DataFrame({"identity_id": list(rows), field: list(rows.values())}, dtype=object)
    return Registry(frame, "registry.csv", "0" * 64, ValidationReport("registry.csv", len(frame), len(frame)))


WORDS = KnowledgeLevel("W", ("words",))
TOY = {"P1": "alpha beta", "P2": "gamma", "P3": "alpha", "P4": "delta delta"}
