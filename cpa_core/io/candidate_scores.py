"""An outside attacker's output, read as a long table ``doc_id, candidate_id, score`` (CSV, JSONL or Parquet).

What the scores mean (probabilities, similarities or ranks) is declared by the imported attacker's ``kind``
(:mod:`cpa_core.attack.attackers.imported`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from cpa_core.common.errors import DataError
from cpa_core.io.columns import _apply_mapping
from cpa_core.io.reading import read_table, short
from cpa_core.io.tables import _as_id, _describe, _is_missing


@dataclass(frozen=True)
class CandidateScores:
    """A validated long table of candidate scores: ``frame`` has doc_id, candidate_id, score (float),
    row (its row in the file, from 1) and given (the score as the file wrote it, for messages)."""

    frame: pd.DataFrame = field(repr=False)
    file: str
    sha256: str


def read_candidate_scores(source: str | Path | bytes, *, name: str | None = None,
                          columns: Mapping[str, str] | None = None, fmt: str | None = None) -> CandidateScores:
    """Read and validate a long table ``doc_id, candidate_id, score`` (CSV, JSONL or Parquet).

    What the scores mean (probabilities, similarities or ranks) is declared by the attacker's ``kind``.
    """
    frame, digest = read_table(source, name, fmt)
    name = name or str(source)
    frame = _apply_mapping(name, frame, columns, ("doc_id", "candidate_id", "score"))
    out = {"doc_id": [], "candidate_id": [], "score": [], "row": [], "given": []}
    seen: dict[tuple[str, str], int] = {}
    for row, (doc, cand, value) in enumerate(zip(frame["doc_id"], frame["candidate_id"], frame["score"]), start=1):
        for column, ident in (("doc_id", doc), ("candidate_id", cand)):
            if _is_missing(ident) or _as_id(ident) is None:
                raise DataError(name, "invalid identifier", column=column, row=row,
                                expected="a non-empty text id", found=_describe(ident))
        doc, cand = _as_id(doc), _as_id(cand)
        try:
            number = float(value) if not isinstance(value, bool) else float("nan")
        except (TypeError, ValueError):
            number = float("nan")
        if not np.isfinite(number):
            raise DataError(name, "invalid score", column="score", row=row, expected="a finite number",
                            found=repr(value))
        if (doc, cand) in seen:
            raise DataError(name, f"candidate '{short(cand)}' listed twice for document '{short(doc)}'", row=row,
                            column="candidate_id",
                            expected="one row per (doc_id, candidate_id)", found=f"the same pair in row {seen[doc, cand]}")
        seen[doc, cand] = row
        for key, item in (("doc_id", doc), ("candidate_id", cand), ("score", number), ("row", row), ("given", value)):
            out[key].append(item)
    return CandidateScores(pd.DataFrame(out), name, digest)
