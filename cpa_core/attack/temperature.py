"""The softmax temperature of a similarity attacker, fitted on the documents when declared ``auto``."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import numpy as np

from cpa_core.attack.candidates import softmax_rows
from cpa_core.conformal.calibration import leave_one_out_thresholds, set_sizes
from cpa_core.conformal.scores import SCORES

APS = SCORES["aps"]

AUTO = "auto"
DEFAULT_TEMPERATURE = AUTO
"""The retrieval attackers' default temperature: chosen from the labelled documents (:func:`fit_temperature`)."""


TEMPERATURE_GRID = tuple(float(t) for t in np.geomspace(0.005, 2.0, 12))
FALLBACK_TEMPERATURE = 1.0
"""The temperature ``auto`` falls back to when no labelled document's identity is in the pool."""


FIT_CONFIDENCE = 0.9
"""The confidence level at which ``auto`` compares the certified set sizes of the grid's temperatures."""


FIT_BLOCK_ENTRIES = 1 << 22
"""Similarities in one block of :func:`fit_temperature` at most (its temporaries are a few arrays of this size, on
each core): a wide registry is read a few documents at a time."""


def fit_block_rows(chunk_size: int, n_registry: int) -> int:
    """Documents per block of :func:`fit_temperature`: the attack's ``chunk_size``, fewer for a wide registry."""
    return max(1, min(chunk_size, FIT_BLOCK_ENTRIES // max(n_registry, 1)))


def fit_temperature(similarities: Callable[[int, int], np.ndarray], n: int, truth_columns: np.ndarray,
                    chunk_size: int, grid: tuple[float, ...] = TEMPERATURE_GRID,
                    confidence: float = FIT_CONFIDENCE) -> float | None:
    """The temperature ``T`` of the grid whose certificates are the most informative: the smallest mean
    certified set (APS, leave-one-out thresholds at ``confidence``) over all ``n`` documents.

    The rule is a symmetric function of all the documents and of all the labelled ones (it never singles out
    calibration documents): their scores under the chosen ``T`` stay exchangeable, so the certificates keep
    their guarantee. It needs two passes over the similarity blocks: one for the truths' scores (hence the
    thresholds), one for the set sizes (each block sorted once for the whole grid: the softmax keeps the order
    of the similarities). Scores, thresholds and set sizes are the conformal layer's own (the APS
    :class:`~cpa_core.conformal.scores.Score`, :func:`~cpa_core.conformal.calibration.leave_one_out_thresholds`
    and :func:`~cpa_core.conformal.calibration.set_sizes`, ties and tolerance included, :func:`aps_set_sizes`), so
    ``T`` is judged by the very sets a certificate would give. Ties of the mean go to the larger ``T``; ``None`` when no document's
    identity is in the pool.

    Parameters
    ----------
    similarities : ``(start, stop) -> (stop - start, m)`` block function, as for :func:`rank_by_similarity`
    truth_columns : ndarray of shape (n,), the column of each document's identity, ``-1`` when unknown or absent
    """
    truth_columns = np.asarray(truth_columns)
    members = truth_columns >= 0
    if not members.any():
        return None
    truth_scores = np.full((len(grid), n), np.inf)
    blocks = list(range(0, n, chunk_size))
    threads = max(1, int(getattr(similarities, "threads", 1)))
    with ThreadPoolExecutor(threads) as pool:  # the grid's temperatures of a block on every core
        for start in blocks:
            stop = min(start + chunk_size, n)
            rows = np.flatnonzero(members[start:stop])
            if rows.size == 0:
                continue
            block = np.asarray(similarities(start, stop), dtype=np.float64)[rows]
            columns = truth_columns[start:stop][rows]

            def truth_score(j: int) -> None:
                truth_scores[j, start + rows] = APS.truth_scores(softmax_rows(block, grid[j]), columns)

            list(pool.map(truth_score, range(len(grid))))
        thresholds = [leave_one_out_thresholds(truth_scores[j], members, confidence) for j in range(len(grid))]
        totals = np.zeros(len(grid))
        for start in blocks:
            stop = min(start + chunk_size, n)
            block = np.asarray(similarities(start, stop), dtype=np.float64)
            halves = [part for part in np.array_split(np.arange(stop - start), threads) if part.size]
            # weights rise with similarity at every T: one sort serves the grid (rows sorted on every core)
            ranked = np.concatenate(list(pool.map(lambda part: -np.sort(-block[part], axis=1), halves)))

            def total_size(j: int) -> int:
                return int(aps_set_sizes(softmax_rows(ranked, grid[j]), thresholds[j][start:stop]).sum())

            totals += np.array(list(pool.map(total_size, range(len(grid)))), dtype=float)
    best = np.flatnonzero(totals == totals.min())
    return grid[int(best[-1])]


SCORED_PREFIX = 128
"""Candidates :func:`aps_set_sizes` scores first: a set that ends within them needs no more."""


def aps_set_sizes(ranked: np.ndarray, q_hat: np.ndarray) -> np.ndarray:
    """The size of each APS set ``{y : s(x, y) <= q_hat}`` of rows of weights ranked by decreasing weight (a whole
    pool each), by the conformal layer's score and set rule.

    The first :data:`SCORED_PREFIX` candidates are scored with the mass of the others below them (as a top-K
    shortlist is): a set that ends within them is the set the whole row gives, a tie across the cut aside, which
    only a set reaching the cut can see; rows whose set reaches the cut are scored whole.
    """
    n, m = ranked.shape
    if m <= SCORED_PREFIX:
        return set_sizes(APS.sorted_scores(ranked, np.full(n, m)), np.full(n, m), q_hat)
    head = np.full(n, SCORED_PREFIX)
    sizes = set_sizes(APS.sorted_scores(ranked[:, :SCORED_PREFIX], head, ranked[:, SCORED_PREFIX:].sum(axis=1)), head,
                      q_hat)
    wide = np.flatnonzero(sizes >= SCORED_PREFIX)
    if wide.size:
        whole = np.full(wide.size, m)
        sizes[wide] = set_sizes(APS.sorted_scores(ranked[wide], whole), whole, q_hat[wide])
    return sizes


FIT_SIMILARITIES = 200_000_000
"""The similarities ``auto`` reads at most (documents x registry): beyond, it fits on a sample (:func:`fit_sample`)."""


def fit_sample(doc_ids: Sequence[str], n_registry: int, budget: int | None = None) -> np.ndarray | None:
    """The documents ``auto`` chooses the temperature on: all of them (``None``) while ``n x n_registry`` is within
    ``budget``; else those whose id hashes below the share ``budget / (n x n_registry)`` (about ``budget /
    n_registry`` documents; row indices, increasing).

    Whether a document is in the sample depends on its own id alone, never on its position, its text or the other
    documents: the temperature stays a symmetric function of all the documents, so their scores stay exchangeable
    and the certificates keep their guarantee, as with :func:`fit_temperature` on every document.
    """
    budget = FIT_SIMILARITIES if budget is None else budget
    n = len(doc_ids)
    if n * n_registry <= budget:
        return None
    share = budget / (n * n_registry)
    draws = np.array([int.from_bytes(hashlib.blake2b(str(d).encode("utf-8"), digest_size=8).digest(), "big")
                      for d in doc_ids], dtype=np.float64) / 2.0**64
    return np.flatnonzero(draws < share)
