"""The attacker interface.

An attacker turns documents into a :class:`~cpa_core.candidates.CandidateTable` given the registry
and the knowledge level. The calibration layer never sees the attacker, only the table.

A query builder produces the retrieval query of each document: ``direct`` uses the released text;
``direct_plus_clues`` appends clues from a clue extractor (an LLM) to it.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from ..candidates import CandidateTable, Progress
from ..data import Registry
from ..knowledge import KnowledgeLevel

ClueExtractor = Callable[[Sequence[str], Sequence[str], "Progress | None"], list[list[str]]]
"""(doc_ids, texts, progress) -> a list of clue strings per document."""


class Attacker(Protocol):
    name: str

    def params(self) -> dict:
        """Every parameter that defines the attack, for the manifest."""

    def attack(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
               progress: Progress | None = None) -> CandidateTable:
        """Rank the registry for each document."""


def build_queries(doc_ids: Sequence[str], texts: Sequence[str], level: KnowledgeLevel,
                  clue_extractor: ClueExtractor | None, progress: Progress | None = None) -> list[str]:
    """The retrieval query of each document under the level's query mode."""
    if level.query_mode == "direct":
        return list(texts)
    if clue_extractor is None:
        from ..errors import ConfigError
        raise ConfigError(f"knowledge level '{level.name}' uses query mode 'direct_plus_clues', "
                          "which needs a clue extractor (an LLM endpoint); none is configured")
    clues = clue_extractor(doc_ids, texts, progress)
    return [text + ("\n" + "; ".join(c) if c else "") for text, c in zip(texts, clues)]
