"""The attacker interface.

An attacker turns documents into a :class:`~cpa_core.candidates.CandidateTable` given the registry
and the knowledge level. The calibration layer never sees the attacker, only the table. Besides the
attack, every attacker answers the questions the pipeline asks of it (the :class:`Attacker` protocol):
how many LLM calls a run would make, what it counted during its last run, which LLM clients it holds
(to close them), and how to explain a match when it can. :class:`AttackerBase` gives the answers of an
attacker that calls no LLM and explains nothing; :class:`RetrievalAttacker` those of the retrieval
attackers (TF-IDF, dense), whose queries may carry LLM clues.

A query builder produces the retrieval query of each document: ``direct`` uses the released text;
``direct_plus_clues`` appends clues from a clue extractor (an LLM) to it.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..candidates import CandidateTable, Progress, rank_by_similarity
from ..data import Registry
from ..errors import ConfigError
from ..knowledge import KnowledgeLevel

class ClueExtractor(Protocol):
    """Query augmentation of the ``direct_plus_clues`` mode (:class:`~.llm_clues.LLMClueExtractor`)."""

    def __call__(self, doc_ids: Sequence[str], texts: Sequence[str],
                 progress: Progress | None = None) -> list[list[str]]:
        """A list of clue strings per document."""

    def params(self) -> dict:
        """Its settings, for the manifest."""

    def estimate_calls(self, doc_ids: Sequence[str], texts: Sequence[str]) -> int:
        """The LLM calls a run would make (no call is made)."""

    def counters(self) -> dict | None:
        """What the last run counted (``None`` before a run)."""

    def clients(self) -> list:
        """The LLM clients it holds."""

TermExplainer = Callable[[str, Sequence[int]], list[str]]
"""(query, registry rows of the top candidates) -> the terms that most drive the match."""


class Attacker(Protocol):
    """What the pipeline needs of an attacker.

    ``required_score`` names the nonconformity score the attacker's weights need (Profile-CPA scores
    candidates itself: ``"given"``), ``None`` when any score applies; ``weight_kind`` says what its
    weights are (``probability``, ``rank`` or ``score``).
    """

    name: str
    required_score: str | None
    weight_kind: str

    def params(self) -> dict:
        """Every parameter that defines the attack, for the manifest."""

    def attack(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
               progress: Progress | None = None) -> CandidateTable:
        """Rank the registry for each document."""

    def estimate_calls(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry,
                       level: KnowledgeLevel) -> int:
        """The LLM calls an attack would make (answers already cached cost none); no call is made."""

    def counters(self) -> dict[str, dict]:
        """What the last attack counted (invalid picks, answers without clues, calls), by component."""

    def clients(self) -> list:
        """The LLM clients the attacker holds (closed when the run ends)."""

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> TermExplainer | None:
        """The terms that drive a document's match to its candidates, when the attacker can say."""


class AttackerBase:
    """The protocol's answers for an attacker that calls no LLM, counts nothing and explains nothing."""

    required_score: str | None = None
    weight_kind: str = "probability"

    def estimate_calls(self, doc_ids, texts, registry, level) -> int:
        return 0

    def counters(self) -> dict[str, dict]:
        return {}

    def clients(self) -> list:
        return []

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> TermExplainer | None:
        return None


def close_clients(attacker: Attacker) -> None:
    """Close every distinct LLM client of an attacker."""
    for client in {id(c): c for c in attacker.clients()}.values():
        client.close()


def build_queries(doc_ids: Sequence[str], texts: Sequence[str], level: KnowledgeLevel,
                  clue_extractor: ClueExtractor | None, progress: Progress | None = None) -> list[str]:
    """The retrieval query of each document under the level's query mode."""
    if level.query_mode == "direct":
        return list(texts)
    if clue_extractor is None:
        raise ConfigError(f"knowledge level '{level.name}' uses query mode 'direct_plus_clues', "
                          "which needs a clue extractor (an LLM endpoint); none is configured")
    clues = clue_extractor(doc_ids, texts, progress)
    return [text + ("\n" + "; ".join(c) if c else "") for text, c in zip(texts, clues)]


class RetrievalAttacker(AttackerBase):
    """Shared by the retrieval attackers: queries (with clues at a ``direct_plus_clues`` level), the
    ranking loop over similarity blocks, the clue extractor's calls, counters and client.

    Subclasses are dataclasses with ``temperature``, ``top_k``, ``chunk_size`` and ``clue_extractor``,
    and implement :meth:`similarities`.
    """

    temperature: float
    top_k: int | None
    chunk_size: int
    clue_extractor: Any

    def queries(self, doc_ids: Sequence[str], texts: Sequence[str], level: KnowledgeLevel,
                progress: Progress | None = None) -> list[str]:
        return build_queries(doc_ids, texts, level, self.clue_extractor, progress)

    def ranked_table(self, doc_ids: Sequence[str], queries: Sequence[str], similarities: Callable[[int, int], np.ndarray],
                     registry: Registry, progress: Progress | None = None) -> CandidateTable:
        """The candidate table from a block function ``(start, stop) -> similarities of those queries``."""
        candidates, weights, tail = rank_by_similarity(similarities, len(doc_ids), len(registry), self.top_k,
                                                       self.temperature, self.chunk_size, progress)
        return CandidateTable(doc_ids=np.asarray(doc_ids, dtype=object), candidates=candidates, weights=weights,
                              pool_sizes=np.full(len(doc_ids), candidates.shape[1], dtype=np.int64),
                              candidate_ids=registry.ids, queries=tuple(queries), tail_mass=tail)

    def clue_params(self) -> dict:
        return {"clue_extractor": self.clue_extractor.params()} if self.clue_extractor is not None else {}

    def estimate_calls(self, doc_ids, texts, registry, level) -> int:
        if level.query_mode != "direct_plus_clues" or self.clue_extractor is None:
            return 0
        return int(self.clue_extractor.estimate_calls(list(doc_ids), [str(t) for t in texts]))

    def counters(self) -> dict[str, dict]:
        counts = self.clue_extractor.counters() if self.clue_extractor is not None else None
        return {"clue_extractor": counts} if counts else {}

    def clients(self) -> list:
        return self.clue_extractor.clients() if self.clue_extractor is not None else []

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> TermExplainer | None:
        """The terms shared by a query and its candidates' profiles that weigh most in a TF-IDF match."""
        from .tfidf import TfidfIndex
        from ..knowledge import profile_texts

        try:
            return TfidfIndex().fit(profile_texts(registry, level)).explainer()
        except ConfigError:  # profiles without words (ids, codes): nothing to explain, the audit goes on
            return None
