"""Adding an attacker is one module plus one registry line: this module declares a small word-overlap attacker,
and the ``overlap`` fixture runs the registry line. The tests run it through the TOML reader and the command line
(tests/attack/test_registry.py) and the dashboard's form (tests/integration/test_registry_dashboard.py) without
any other change."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest

from cpa_core.attack.base import AttackerBase
from cpa_core.attack.candidates import CandidateTable, rank_by_similarity
from cpa_core.attack.registry import register, unregister
from cpa_core.attack.spec import AttackerSpec
from cpa_core.common.params import Param
from cpa_core.io.knowledge import profile_texts


@dataclass
class OverlapAttacker(AttackerBase):
    """Ranks profiles by how many distinct words of at least ``min_word_length`` letters they share
    with the document; weights are a softmax of that count at ``temperature``."""

    min_word_length: int = 3
    temperature: float = 1.0
    top_k: int | None = None
    name: str = "overlap"

    def params(self) -> dict:
        return {"attacker": self.name, "min_word_length": self.min_word_length, "temperature": self.temperature,
                "top_k": self.top_k}

    def words(self, text: str) -> set[str]:
        return {w for w in re.findall(r"\w+", text.lower()) if len(w) >= self.min_word_length}

    def attack(self, doc_ids, texts, registry, level, progress=None) -> CandidateTable:
        profiles = [self.words(t) for t in profile_texts(registry, level)]
        counts = np.array([[len(self.words(t) & p) for p in profiles] for t in texts], dtype=float)
        candidates, weights, tail, *_ = rank_by_similarity(lambda a, b: counts[a:b], len(texts), len(profiles),
                                                       self.top_k, self.temperature, 256, progress)
        return CandidateTable(np.asarray(doc_ids, dtype=object), candidates, weights,
                              np.full(len(texts), candidates.shape[1]), registry.ids, tuple(texts), tail_mass=tail)


SPEC = AttackerSpec(
    name="overlap", label="Word overlap",
    description="counts the words each registry profile shares with the released text",
    params=(Param("min_word_length", "int", 3, "Shortest word", "Shorter words are ignored.", min=1,
                  option="--min-word-length"),
            Param("temperature", "float", 1.0, "Softmax temperature T", "Weights are softmax(count / T).", above=0,
                  option="--temperature")),
    build=lambda params, context: OverlapAttacker(**params, top_k=context.top_k),
)


@pytest.fixture(name="overlap")
def registered_overlap():
    """The ``overlap`` fixture: the attacker registered for the test, unregistered after it. Import
    ``registered_overlap`` into a test module (``# noqa: F401``) and ask for ``overlap``."""
    register(SPEC)  # a module of the package would add SPEC to BUILTIN in cpa_core/attack/attackers/__init__.py
    yield SPEC
    unregister(SPEC.name)
