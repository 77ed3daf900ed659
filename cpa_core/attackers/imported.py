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

from ..candidates import CandidateTable, Progress, softmax_rows
from ..data import Registry, _apply_mapping, _as_id, _is_missing, read_table
from ..errors import ConfigError, DataError
from ..knowledge import KnowledgeLevel

KINDS = ("probability", "score", "rank")


@dataclass
class ImportedAttacker:
    """Candidate scores computed elsewhere; see :func:`load_candidate_scores`."""

    frame: pd.DataFrame = field(repr=False)
    kind: str
    file: str
    sha256: str
    temperature: float = 1.0
    name: str = "imported"

    def params(self) -> dict:
        return {"attacker": self.name, "kind": self.kind, "file": self.file, "sha256": self.sha256,
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
    """Read and validate a long table ``doc_id, candidate_id, score`` (CSV, JSONL or Parquet)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown kind of imported scores '{kind}'; expected one of {', '.join(KINDS)}")
    if not temperature > 0:
        raise ConfigError(f"temperature must be positive, found {temperature}")
    frame, digest = read_table(source, name, fmt)
    name = name or str(source)
    frame = _apply_mapping(name, frame, columns, ("doc_id", "candidate_id", "score"))
    out = {"doc_id": [], "candidate_id": [], "score": []}
    seen: dict[tuple[str, str], int] = {}
    for row, (doc, cand, value) in enumerate(zip(frame["doc_id"], frame["candidate_id"], frame["score"]), start=1):
        for column, ident in (("doc_id", doc), ("candidate_id", cand)):
            if _is_missing(ident) or _as_id(ident) is None:
                raise DataError(name, "invalid identifier", column=column, row=row,
                                expected="a non-empty text or integer id", found=repr(ident))
        doc, cand = _as_id(doc), _as_id(cand)
        try:
            number = float(value) if not isinstance(value, bool) else float("nan")
        except (TypeError, ValueError):
            number = float("nan")
        if not np.isfinite(number):
            raise DataError(name, "invalid score", column="score", row=row, expected="a finite number",
                            found=repr(value))
        if kind == "probability" and number < 0:
            raise DataError(name, "negative probability", column="score", row=row,
                            expected="a non-negative weight", found=repr(value))
        if kind == "rank" and (number < 1 or not float(number).is_integer()):
            raise DataError(name, "invalid rank", column="score", row=row, expected="an integer rank >= 1",
                            found=repr(value))
        if (doc, cand) in seen:
            raise DataError(name, f"candidate '{cand}' listed twice for document '{doc}'", row=row, column="candidate_id",
                            expected="one row per (doc_id, candidate_id)", found=f"the same pair in row {seen[doc, cand]}")
        seen[doc, cand] = row
        out["doc_id"].append(doc)
        out["candidate_id"].append(cand)
        out["score"].append(number)
    return ImportedAttacker(pd.DataFrame(out), kind, name, digest, temperature)
