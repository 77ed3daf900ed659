"""The softmax temperature of a similarity attacker, fitted on a tuning fold when declared ``auto``.

A temperature chosen from the labelled documents' identities makes those documents no longer exchangeable with
the others: a document whose subject is unknown would be certified by thresholds tuned on documents the
temperature was fitted to. ``auto`` therefore fits on a **tuning fold** and never calibrates against it
(METHOD, "Nothing fitted on labels may read them asymmetrically"):

- the fold is the labelled documents whose id hashes lowest (:func:`tuning_fold`), a share
  :data:`TUNING_SHARE` of them, at most :data:`TUNING_MAX`: a function of the ids alone, never of a text or a label;
- the temperature is the grid point whose certificates of the fold are the most informative: the smallest mean
  certified set (APS, leave-one-out thresholds among the fold at 90 %; the conformal layer's own scores, thresholds
  and set rule, :func:`fit_temperature`); only the fold's similarities are read, a few hundred rows, so ``auto``
  costs a small share of the attack;
- the audit leaves the fold out of calibration (its documents are audited like documents whose subject is unknown),
  so calibration documents and every other document stay exchangeable, and the certificates keep their guarantee.
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from collections.abc import Callable, Sequence

import numpy as np

from cpa_core.conformal.calibration import leave_one_out_thresholds, minimum_calibration_size, set_sizes
from cpa_core.conformal.scores import SCORES

APS = SCORES["aps"]
FIT_CONFIDENCE = 0.9
"""The confidence level at which ``auto`` compares the certified set sizes of the grid's temperatures."""

AUTO = "auto"
DEFAULT_TEMPERATURE = AUTO
"""The retrieval attackers' default temperature: fitted on a tuning fold of the labelled documents."""

TEMPERATURE_GRID = tuple(float(t) for t in np.geomspace(0.002, 2.0, 11))
FALLBACK_TEMPERATURE = 1.0
"""The temperature ``auto`` falls back to when no tuning document's identity is in the registry."""

TUNING_SHARE = 0.2
"""The share of the labelled documents ``auto`` tunes on (and leaves out of calibration)."""
TUNING_MAX = 200
"""The tuning fold's size at most: enough for one scalar, and few documents taken from calibration."""

FIT_BLOCK_ENTRIES = 1 << 22
"""Similarities in one block of :func:`fit_temperature` at most: a wide registry is read a few documents at a time."""


def fit_block_rows(chunk_size: int, n_registry: int) -> int:
    """Documents per block of :func:`fit_temperature`: the attack's ``chunk_size``, fewer for a wide registry."""
    return max(1, min(chunk_size, FIT_BLOCK_ENTRIES // max(n_registry, 1)))


def _id_draws(doc_ids: Sequence[str]) -> np.ndarray:
    """A uniform draw in [0, 1) per document from its id alone (BLAKE2b)."""
    return np.array([int.from_bytes(hashlib.blake2b(str(d).encode("utf-8"), digest_size=8, person=b"cpa-tuning")
                                    .digest(), "big") for d in doc_ids], dtype=np.float64) / 2.0 ** 64


def tuning_size(n_labelled: int) -> int:
    """Documents in the tuning fold of ``n_labelled`` labelled documents: ``TUNING_SHARE`` of them (at least one
    when there are two or more, so that one is left to calibrate), at most :data:`TUNING_MAX`."""
    if n_labelled < 2:
        return 0
    return int(min(TUNING_MAX, max(1, round(TUNING_SHARE * n_labelled))))


def tuning_fold(doc_ids: Sequence[str], labelled: np.ndarray) -> np.ndarray:
    """Row indices (increasing) of the tuning fold: the :func:`tuning_size` labelled documents whose ids hash lowest.

    Whether a document is in the fold depends on the ids and on which documents are labelled, never on a text or on
    whom a document is about: the other labelled documents stay exchangeable with every other document.
    """
    labelled = np.asarray(labelled, dtype=bool)
    rows = np.flatnonzero(labelled)
    size = tuning_size(rows.size)
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    draws = _id_draws([doc_ids[i] for i in rows])
    order = np.lexsort((np.asarray([str(doc_ids[i]) for i in rows], dtype=object), draws))
    return np.sort(rows[order[:size]])


SCORED_PREFIX = 256
"""Candidates per tuning document that :func:`fit_temperature` scores at every temperature (the mass of the others
below them, their ties at the cut counted, as a top-K shortlist does): a set that ends within them is the set of
the whole row; a row whose set reaches the cut is scored whole."""


def fit_temperature(similarities: Callable[[int, int], np.ndarray], n: int, truth_columns: np.ndarray,
                    chunk_size: int, grid: tuple[float, ...] = TEMPERATURE_GRID,
                    confidence: float = FIT_CONFIDENCE) -> float | None:
    """The grid temperature ``T`` whose certificates of the ``n`` (tuning) documents are the most informative: the
    smallest mean certified set, each document's set under the leave-one-out threshold of the others at
    ``confidence`` (ties go to the larger ``T``); ``None`` when no document's identity is in the registry. Documents
    too few for a finite leave-one-out threshold certify nothing at any ``T``: then the likeliest temperature
    (:func:`likeliest_temperature`).

    Scores, thresholds and sets are the conformal layer's own (APS, leave-one-out thresholds, the set rule, ties and
    tolerance included). Each block of rows is read and sorted once; at each temperature one exponential pass over
    it gives the truths' scores and the first :data:`SCORED_PREFIX` candidates' weights with the mass below them;
    only a row whose set reaches past them is scored whole (its block read again).

    Parameters
    ----------
    similarities : ``(start, stop) -> (stop - start, m)`` block function over the ``n`` documents
    truth_columns : ndarray of shape (n,), the column of each document's identity, ``-1`` when unknown or absent
    """
    truth_columns = np.asarray(truth_columns)
    members = truth_columns >= 0
    if not members.any():
        return None
    if members.sum() <= minimum_calibration_size(1 - Fraction(str(confidence))):  # too few for a finite threshold
        return likeliest_temperature(similarities, n, truth_columns, chunk_size, grid)
    truth_scores = np.full((len(grid), n), np.inf)
    blocks = []  # per block: its rows, and per temperature the prefix weights and the mass below them
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        raw = np.asarray(similarities(start, stop), dtype=np.float64)
        ranked = -np.sort(-raw, axis=1)
        rows, m = ranked.shape
        width = min(SCORED_PREFIX, m)
        cut_ties = np.count_nonzero(ranked[:, width:] == ranked[:, width - 1:width], axis=1) if width < m else None
        below_cut = None if cut_ties is None or not cut_ties.any() else ranked[:, width:] < ranked[:, width - 1:width]
        truth = truth_columns[start:stop]
        known = truth >= 0
        value = np.where(known, raw[np.arange(rows), np.maximum(truth, 0)], np.inf)
        end = np.count_nonzero(ranked >= value[:, None], axis=1)  # the truth's tie group ends before ``end``
        deep = np.flatnonzero(known & (end > width))
        per_temperature = []
        shifted = ranked - ranked[:, :1]
        exps = np.empty_like(shifted)
        for j, temperature in enumerate(grid):
            np.divide(shifted, temperature, out=exps)  # the operations of :func:`_weights`, in place
            np.exp(exps, out=exps)
            listed, cut = exps[:, :width].sum(axis=1), exps[:, width:].sum(axis=1)
            total = listed + cut
            weights = exps[:, :width] / total[:, None]
            tail = (cut if below_cut is None else np.where(below_cut, exps[:, width:], 0.0).sum(axis=1)) / total
            prefix = APS.sorted_scores(weights, np.full(rows, width), tail, cut_ties,
                                       None if cut_ties is None else m - width - cut_ties)
            # the truth's tie group ends within the listed candidates: its score is theirs
            scores = np.where(known & (end <= width), prefix[np.arange(rows), np.clip(end - 1, 0, width - 1)], np.inf)
            for row in deep:
                scores[row] = -exps[row, end[row]:].sum() / total[row]
            scores = np.where(known & np.isneginf(prefix[:, 0]), -np.inf, scores)  # a fully tied row (deep truth too)
            truth_scores[j, start:stop] = np.where(known, scores, np.inf)
            per_temperature.append(prefix)
        blocks.append((start, stop, m, width, per_temperature))
    thresholds = [leave_one_out_thresholds(truth_scores[j], members, confidence) for j in range(len(grid))]
    totals = np.zeros(len(grid))
    for start, stop, m, width, per_temperature in blocks:
        whole = None
        for j, prefix in enumerate(per_temperature):
            q_hat = thresholds[j][start:stop]
            sizes = set_sizes(prefix, np.full(stop - start, width), q_hat)
            wide = np.flatnonzero((sizes >= width) & (width < m))
            if wide.size:  # the set reaches the cut: the whole row decides
                if whole is None:
                    whole = -np.sort(-np.asarray(similarities(start, stop), dtype=np.float64), axis=1)
                pools = np.full(wide.size, m)
                full = APS.sorted_scores(_weights(whole[wide], grid[j]), pools)
                sizes[wide] = set_sizes(full, pools, q_hat[wide])
            totals[j] += float(sizes.sum())
    best = np.flatnonzero(totals == totals.min())
    return float(grid[int(best[-1])])


def _weights(ranked: np.ndarray, temperature: float) -> np.ndarray:
    """The softmax of rows sorted by decreasing similarity, by the operations :func:`fit_temperature` applies to its
    listed candidates (so that a row scored whole gives bitwise the same weights)."""
    exps = np.exp((ranked - ranked[:, :1]) / temperature)
    width = min(SCORED_PREFIX, ranked.shape[1])
    return exps / (exps[:, :width].sum(axis=1) + exps[:, width:].sum(axis=1))[:, None]


def likeliest_temperature(similarities: Callable[[int, int], np.ndarray], n: int, truth_columns: np.ndarray,
                          chunk_size: int, grid: tuple[float, ...] = TEMPERATURE_GRID) -> float:
    """The grid temperature with the smallest negative log-likelihood of the documents' identities under the softmax
    over the whole registry (temperature scaling; ties go to the larger ``T``)."""
    truth_columns = np.asarray(truth_columns)
    members = truth_columns >= 0
    loss = np.zeros(len(grid))
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        rows = np.flatnonzero(members[start:stop])
        if rows.size == 0:
            continue
        block = np.asarray(similarities(start, stop), dtype=np.float64)[rows]
        truth = block[np.arange(rows.size), truth_columns[start:stop][rows]]
        top = block.max(axis=1)
        for j, temperature in enumerate(grid):
            log_total = np.log(np.exp((block - top[:, None]) / temperature).sum(axis=1))
            loss[j] += float(np.sum(log_total - (truth - top) / temperature))
    best = np.flatnonzero(loss <= loss.min() + 1e-9 * max(1.0, abs(loss.min())))
    return float(grid[int(best[-1])])
