"""Bring your own attacker: certify the output of any external pipeline.

The input is a long table with one row per (document, candidate): ``doc_id, candidate_id, score``.
``kind`` says what ``score`` is:

- ``probability``: a weight per candidate (normalised per document; need not be calibrated);
- ``score``: a similarity, larger is more likely, turned into weights by a temperature softmax;
- ``rank``: 1 for the top candidate; only the ``rank`` nonconformity score can use it.

A document with no row has an empty pool: its identity counts as a candidate miss.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
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
from cpa_core.io.candidate_scores import (CandidateScores, first_refused, negative, not_ranks,
                                          read_candidate_scores)
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
        if self.kind == "probability":
            refused, expected, problem = negative, "a non-negative weight", "negative probability"
        elif self.kind == "rank":
            refused, expected, problem = not_ranks, "an integer rank >= 1", "invalid rank"
        else:
            return
        first = first_refused(refused, self.scores.scores)
        if first is not None:
            raise DataError(self.scores.file, problem, column="score", row=first + 1, expected=expected,
                            found=self.scores.found(first + 1))

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
        position = {c: i for i, c in enumerate(universe)}
        for c in self.scores.candidate_ids.tolist():  # candidates outside the registry, in the order of their first row
            if c not in position:
                position[c] = len(universe)
                universe.append(c)
        candidates, raw, pool_sizes = ranked_pools(self.scores, doc_ids, position, len(universe),
                                                   ascending=self.kind == "rank", progress=progress)
        if self.kind == "probability":
            raw = np.where(np.isfinite(raw), raw, 0.0)
            total = raw.sum(axis=1, keepdims=True)
            weights = np.divide(raw, total, out=np.zeros_like(raw), where=total > 0)
        elif self.kind == "score":
            weights = softmax_rows(raw, self.temperature) if raw.shape[1] else raw.copy()  # no document has rows
        else:
            weights = np.where(np.isfinite(raw), raw, 0.0)
        return CandidateTable(np.asarray(doc_ids, dtype=object), candidates, weights, pool_sizes,
                              np.asarray(universe, dtype=object), tuple(texts),
                              "rank" if self.kind == "rank" else "probability")


DENSE = 2
"""A documents x candidates matrix is filled directly when it has at most this many cells per row of the table."""
ROWS_AT_ONCE = 1000
"""Documents ranked at a time (the progress is said after each such block)."""
THREADS = min(2, os.cpu_count() or 1)
"""Blocks of documents ranked at once."""


def ranked_pools(scores: CandidateScores, doc_ids: Sequence[str], position: Mapping[str, int], n_candidates: int,
                 ascending: bool = False, progress: Progress | None = None, dense: bool | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each document's rows of the table, ranked: by decreasing score (increasing when ``ascending``: ranks),
    tied scores by increasing candidate position; a document without rows has an empty pool.

    Returns the candidates (int64 positions, ``-1`` padding), the signed scores (the score, minus the rank when
    ``ascending``; ``-inf`` padding), both (documents, width of the largest pool), and the pool sizes (int64).

    Array operations only: each row's document and candidate position are looked up from its codes, the scores are
    written into a documents x candidates matrix (``dense``: when it has at most :data:`DENSE` cells per row of the
    table) or each document's rows side by side, then every document's row is sorted (ties put back in candidate
    order), blocks of :data:`ROWS_AT_ONCE` documents on :data:`THREADS` threads.
    """
    n = len(doc_ids)
    code_of = {d: i for i, d in enumerate(scores.doc_ids.tolist())}
    row_of_code = np.full(len(scores.doc_ids), -1, dtype=np.int32)
    repeated = []  # (row, earlier row of the same document)
    for row, doc in enumerate(doc_ids):
        code = code_of.get(doc, -1)
        if code >= 0:
            if row_of_code[code] < 0:
                row_of_code[code] = row
            else:
                repeated.append((row, int(row_of_code[code])))
    doc_rows = row_of_code[scores.doc_codes]
    cand_pos = np.fromiter((position[c] for c in scores.candidate_ids.tolist()), dtype=np.int32,
                           count=len(scores.candidate_ids))
    kept = doc_rows >= 0
    if kept.all():
        positions, keys = cand_pos[scores.candidate_codes], scores.scores if ascending else -scores.scores
    else:
        taken = np.flatnonzero(kept)
        doc_rows = doc_rows[taken]
        positions = cand_pos[scores.candidate_codes[taken]]
        keys = scores.scores[taken] if ascending else -scores.scores[taken]
    del kept
    sizes = np.bincount(doc_rows, minlength=n).astype(np.int64)
    width = int(sizes.max()) if n else 0
    candidates = np.empty((n, width), dtype=np.int64)  # every row written below
    signed = np.empty((n, width))
    if width:
        if dense is None:
            dense = n * n_candidates <= DENSE * doc_rows.size
        if dense:  # a column per candidate: the column is the position
            matrix = np.full((n, n_candidates), np.inf)
            matrix[doc_rows, positions] = keys
            columns = None
        else:  # each document's rows side by side, in the table's order
            matrix, columns = _side_by_side(doc_rows, positions, keys, sizes, n, width)
        del doc_rows, positions, keys

        def rank(start: int) -> int:
            stop = min(start + ROWS_AT_ONCE, n)
            _rank_rows(matrix[start:stop], None if columns is None else columns[start:stop], sizes[start:stop],
                       width, n_candidates, candidates[start:stop], signed[start:stop])
            return stop

        threads = min(THREADS, -(-n // ROWS_AT_ONCE))
        with ThreadPoolExecutor(threads) if threads > 1 else nullcontext() as pool:  # numpy sorts without the GIL
            for stop in (pool.map if pool else map)(rank, range(0, n, ROWS_AT_ONCE)):
                if progress:
                    progress(stop, n, "reading imported candidate scores")
    else:
        candidates.fill(-1)
        signed.fill(-np.inf)
        if progress:
            progress(n, n, "reading imported candidate scores")
    for row, earlier in repeated:  # a document asked for twice: the same pool
        candidates[row], signed[row], sizes[row] = candidates[earlier], signed[earlier], sizes[earlier]
    return candidates, signed, sizes


def _side_by_side(doc_rows: np.ndarray, positions: np.ndarray, keys: np.ndarray, sizes: np.ndarray, n: int,
                  width: int) -> tuple[np.ndarray, np.ndarray]:
    """The keys and candidate positions of each document's rows, left-aligned in a (documents, width) matrix
    (``+inf`` and ``-1`` after them)."""
    starts = np.cumsum(sizes) - sizes
    changes = np.flatnonzero(doc_rows[1:] != doc_rows[:-1]) + 1
    if changes.size + 1 == np.count_nonzero(sizes):  # each document's rows together: no sort needed
        runs = np.diff(np.concatenate([[0], changes, [doc_rows.size]]))
        slot = np.arange(doc_rows.size) - np.repeat(np.concatenate([[0], changes]), runs)
        order = None
    else:
        order = np.argsort(doc_rows.astype(np.uint16) if n <= 1 << 16 else doc_rows, kind="stable")
        doc_rows = doc_rows[order]
        slot = np.arange(doc_rows.size) - starts[doc_rows]
    matrix = np.full((n, width), np.inf)
    matrix[doc_rows, slot] = keys if order is None else keys[order]
    columns = np.full((n, width), -1, dtype=np.int64)
    columns[doc_rows, slot] = positions if order is None else positions[order]
    return matrix, columns


def _rank_rows(matrix: np.ndarray, columns: np.ndarray | None, sizes: np.ndarray, width: int, n_candidates: int,
               candidates: np.ndarray, signed: np.ndarray) -> None:
    """Sort each row of ``matrix`` (keys, ``+inf`` after the real ones) and write its first ``width`` candidate
    positions (``columns``, or the column itself) and minus the keys into ``candidates`` and ``signed``; equal keys
    in increasing position."""
    order = np.argsort(matrix, axis=1)[:, :width]
    keys = np.take_along_axis(matrix, order, axis=1)
    picked = order if columns is None else np.take_along_axis(columns, order, axis=1)
    real = np.arange(width)[None, :] < sizes[:, None]
    same = (keys[:, 1:] == keys[:, :-1]) & real[:, 1:]
    tied = np.flatnonzero(same.any(axis=1))
    if tied.size:  # the sort above is not stable: tied keys go back in increasing position
        group = np.zeros((tied.size, width), dtype=np.int64)
        np.cumsum(~same[tied], axis=1, out=group[:, 1:])
        combined = group * n_candidates + picked[tied]
        combined.sort(axis=1)
        picked[tied] = combined - group * n_candidates
    candidates[...] = np.where(real, picked, -1)
    np.negative(keys, out=signed)


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
