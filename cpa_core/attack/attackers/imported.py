"""Bring your own attacker: certify the output of any external pipeline.

The input is a long table with one row per (document, candidate): ``doc_id, candidate_id, score``.
``kind`` says what ``score`` is:

- ``probability``: a weight per candidate (normalised per document; need not be calibrated);
- ``score``: a similarity, larger is more likely, turned into weights by a temperature softmax;
- ``rank``: 1 for the top candidate; only the ``rank`` nonconformity score can use it.

A document with no row has an empty pool: its identity counts as a candidate miss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from cpa_core.attack.base import AttackerBase
from cpa_core.attack.candidates import CandidateTable, softmax_rows
from cpa_core.attack.spec import AttackerSpec
from cpa_core.common.errors import ConfigError, DataError
from cpa_core.common.params import Param
from cpa_core.common.progress import Progress
from cpa_core.io.candidate_scores import CandidateScores, read_candidate_scores
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Registry

KINDS = ("probability", "score", "rank")


@dataclass
class ImportedAttacker(AttackerBase):
    """Candidate scores computed elsewhere (:func:`read_candidate_scores`), read as ``kind``."""

    scores: CandidateScores = field(repr=False)
    kind: str = "probability"
    temperature: float = 1.0
    name: str = "imported"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ConfigError(f"unknown kind of imported scores '{self.kind}'; expected one of {', '.join(KINDS)}")
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be positive, found {self.temperature}")
        frame = self.scores.frame
        values = frame["score"].to_numpy(dtype=float)
        if self.kind == "probability":
            bad, expected, problem = values < 0, "a non-negative weight", "negative probability"
        elif self.kind == "rank":
            bad, expected, problem = (values < 1) | (values != np.floor(values)), "an integer rank >= 1", "invalid rank"
        else:
            bad = np.zeros(len(values), dtype=bool)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise DataError(self.scores.file, problem, column="score", row=int(frame["row"].iloc[first]),
                            expected=expected, found=repr(frame["given"].iloc[first]))

    @property
    def weight_kind(self) -> str:
        return "rank" if self.kind == "rank" else "probability"

    @property
    def file(self) -> str:
        return self.scores.file

    @property
    def frame(self) -> pd.DataFrame:
        return self.scores.frame

    def params(self) -> dict:
        return {"attacker": self.name, "kind": self.kind, "file": self.scores.file, "sha256": self.scores.sha256,
                "temperature": self.temperature if self.kind == "score" else None}

    def attack(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
               progress: Progress | None = None) -> CandidateTable:
        universe = list(registry.ids.tolist())
        known = set(universe)
        universe += [c for c in dict.fromkeys(self.frame["candidate_id"].tolist()) if c not in known]
        position = {c: i for i, c in enumerate(universe)}
        by_doc = {d: g for d, g in self.frame.groupby("doc_id", sort=False)}
        pools = []
        for done, doc in enumerate(doc_ids, start=1):
            rows = by_doc.get(doc)
            if rows is None:
                pools.append((np.empty(0, dtype=np.int64), np.empty(0)))
            else:
                index = np.array([position[c] for c in rows["candidate_id"]], dtype=np.int64)
                values = rows["score"].to_numpy(dtype=float)
                order = np.lexsort((index, -values if self.kind != "rank" else values))
                pools.append((index[order], values[order]))
            if progress and (done % 1000 == 0 or done == len(doc_ids)):
                progress(done, len(doc_ids), "reading imported candidate scores")
        width = max((len(p[0]) for p in pools), default=0)
        candidates = np.full((len(doc_ids), width), -1, dtype=np.int64)
        raw = np.full((len(doc_ids), width), -np.inf)
        for row, (index, values) in enumerate(pools):
            candidates[row, : len(index)] = index
            raw[row, : len(index)] = values if self.kind != "rank" else -values
        pool_sizes = np.array([len(p[0]) for p in pools], dtype=np.int64)
        if self.kind == "probability":
            raw = np.where(np.isfinite(raw), raw, 0.0)
            total = raw.sum(axis=1, keepdims=True)
            weights = np.divide(raw, total, out=np.zeros_like(raw), where=total > 0)
        elif self.kind == "score":
            weights = softmax_rows(raw, self.temperature)
        else:
            weights = np.where(np.isfinite(raw), raw, 0.0)
        return CandidateTable(np.asarray(doc_ids, dtype=object), candidates, weights, pool_sizes,
                              np.asarray(universe, dtype=object), tuple(texts),
                              "rank" if self.kind == "rank" else "probability")


def load_candidate_scores(source: str | Path | bytes, *, kind: str = "probability", name: str | None = None,
                          columns: Mapping[str, str] | None = None, temperature: float = 1.0,
                          fmt: str | None = None) -> ImportedAttacker:
    """:func:`read_candidate_scores` read as ``kind`` (softmax at ``temperature`` for similarity scores)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown kind of imported scores '{kind}'; expected one of {', '.join(KINDS)}")
    return ImportedAttacker(read_candidate_scores(source, name=name, columns=columns, fmt=fmt), kind, temperature)


def _build(params: dict, context) -> ImportedAttacker:
    if context.scores is None:
        raise ConfigError("the 'imported' attacker needs a table of candidate scores (--scores FILE)")
    return ImportedAttacker(context.scores, params["kind"], params["temperature"])


SPEC = AttackerSpec(
    name="imported", label="Imported scores (bring your own attacker)",
    description="certifies candidate scores computed by an external pipeline (a table with one row per document "
                "and candidate); nothing is computed or sent anywhere",
    params=(
        Param("kind", "choice", "probability", "What the score column holds",
              "probability: a weight per candidate; score: a similarity (larger is more likely), turned into weights "
              "with a softmax; rank: 1 for the top candidate (use the 'rank' nonconformity score).", choices=KINDS,
              option="--scores-kind"),
        Param("temperature", "float", 1.0, "Softmax temperature (kind 'score')",
              "Only used when the table holds similarity scores.", min=0.001, max=1000.0, option="--temperature",
              step=0.01),
    ),
    build=_build,
    needs_scores=True,
)
