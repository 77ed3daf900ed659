"""Venn-Abers probabilities of a binary event from a one-dimensional statistic (METHOD, "Linkage probability").

For a document with statistic level ``g``, the inductive Venn-Abers predictor fits an isotonic regression of the
event on the level over the calibration documents plus the document itself, once labelled 0 and once labelled 1;
the two fits at ``g`` give ``[p0, p1]`` and the single probability ``p1 / (1 - p0 + p1)``. Under exchangeability the
pair is perfectly calibrated in the Venn sense, whatever the statistic.

The statistic is first cut into at most :data:`LEVELS` levels at its quantiles over every document (a symmetric,
label-free discretisation), so each fit is a weighted pool-adjacent-violators pass over a few dozen points. A
calibration document is predicted without its own label (its own pair is taken out before its fits).

**Cross Venn-Abers** (Vovk, Petej and Fedorova 2015) serves a statistic that is itself learned from labels: the
calibration documents are cut into folds, fold ``k``'s statistic is learned from the *other* folds, and fold ``k``
calibrates it (:func:`cross_venn_abers`). A calibration document of fold ``k`` gets fold ``k``'s pair alone (every
other fold's statistic read its label); any other document gets the folds' pairs merged by their geometric means,
``low = 1 - GM(1 - p0)`` and ``high = GM(p1)``, so that its single probability is the cross Venn-Abers
``GM(p1) / (GM(1 - p0) + GM(p1))``. With one fold it is the inductive predictor above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cpa_core.conformal.strata import quantile_cuts

LEVELS = 50
"""The most levels the statistic is cut into."""


def level_cuts(statistic: np.ndarray, levels: int = LEVELS) -> np.ndarray:
    """The inner cut points of the statistic's levels: its quantiles over every document (distinct, ascending;
    :func:`~cpa_core.conformal.strata.quantile_cuts`)."""
    return quantile_cuts(statistic, levels)


def level_of(cuts: np.ndarray, statistic: np.ndarray) -> np.ndarray:
    """Level codes of values of the statistic under given cut points (a value goes above every cut it exceeds)."""
    return np.searchsorted(cuts, np.asarray(statistic, dtype=float), side="left").astype(np.int64)


def statistic_levels(statistic: np.ndarray, levels: int = LEVELS) -> np.ndarray:
    """Level codes ``0..L-1`` of the statistic, cut at its quantiles over every document (ties share a level)."""
    return level_of(level_cuts(statistic, levels), statistic)


def isotonic_at(hits: np.ndarray, totals: np.ndarray, level: int) -> float:
    """The weighted isotonic (non-decreasing) regression of the rates ``hits / totals`` over the levels, at ``level``
    (levels with no weight are skipped; ``totals[level]`` must be positive)."""
    blocks: list[list[float]] = []  # [sum of hits, weight, first level, last level]
    for g in np.flatnonzero(totals > 0):
        blocks.append([float(hits[g]), float(totals[g]), int(g), int(g)])
        while len(blocks) > 1 and blocks[-2][0] * blocks[-1][1] >= blocks[-1][0] * blocks[-2][1]:
            last = blocks.pop()  # the previous mean is at least this one's: pool them
            blocks[-1][0] += last[0]
            blocks[-1][1] += last[1]
            blocks[-1][3] = last[3]
    for total, weight, first, final in blocks:
        if first <= level <= final:
            return total / weight
    raise ValueError(f"level {level} carries no weight")


@dataclass(frozen=True)
class VennAbers:
    """Per document: ``low`` and ``high`` (``p0``, ``p1``) and the single probability ``p``."""

    low: np.ndarray
    high: np.ndarray

    @property
    def p(self) -> np.ndarray:
        return self.high / (1.0 - self.low + self.high)


def venn_abers(levels: np.ndarray, events: np.ndarray, calibrating: np.ndarray) -> VennAbers:
    """Inductive Venn-Abers probabilities of every document's event, each from the *other* calibration documents.

    Parameters
    ----------
    levels : ndarray of shape (N,), int: each document's level (:func:`statistic_levels`)
    events : ndarray of shape (N,), bool: the event, read only where ``calibrating``
    calibrating : ndarray of shape (N,), bool: the documents whose event is known and calibrates
    """
    levels = np.asarray(levels, dtype=np.int64)
    events = np.asarray(events, dtype=bool)
    calibrating = np.asarray(calibrating, dtype=bool)
    n = levels.shape[0]
    width = int(levels.max()) + 1 if n else 0
    totals = np.bincount(levels[calibrating], minlength=width).astype(float)
    hits = np.bincount(levels[calibrating], weights=events[calibrating].astype(float), minlength=width)
    low, high = np.empty(n), np.empty(n)
    # a document's fits depend on its level and on its own pair only: own = -1 (not calibrating), 0 or 1
    own = np.where(calibrating, events.astype(np.int64), -1)
    for level, mine in set(zip(levels.tolist(), own.tolist())):
        base_hits, base_totals = hits.copy(), totals.copy()
        if mine >= 0:  # leave its own pair out
            base_totals[level] -= 1
            base_hits[level] -= mine
        base_totals[level] += 1  # the document itself, labelled 0, then 1
        p0 = isotonic_at(base_hits, base_totals, level)
        base_hits[level] += 1
        p1 = isotonic_at(base_hits, base_totals, level)
        rows = (levels == level) & (own == mine)
        low[rows], high[rows] = p0, p1
    return VennAbers(low, high)


def merged(fits: Sequence[VennAbers]) -> VennAbers:
    """The pairs of several folds merged per document by geometric means: ``low = 1 - GM(1 - p0)``, ``high = GM(p1)``
    (every ``p0 < 1`` and ``p1 > 0``: the document itself weighs in each fit with either label)."""
    lows, highs = np.array([f.low for f in fits]), np.array([f.high for f in fits])
    return VennAbers(1.0 - np.exp(np.log1p(-lows).mean(axis=0)), np.exp(np.log(highs).mean(axis=0)))


def cross_venn_abers(levels_by_fold: list[np.ndarray], events: np.ndarray, folds: np.ndarray) -> VennAbers:
    """Cross Venn-Abers probabilities of every document's event.

    Parameters
    ----------
    levels_by_fold : per fold ``k``, ndarray of shape (N,), int: every document's level under fold ``k``'s statistic
        (learned without fold ``k``'s labels)
    events : ndarray of shape (N,), bool: the event, read only where a document calibrates
    folds : ndarray of shape (N,), int: the fold a calibration document belongs to, ``-1`` for any other document
    """
    folds = np.asarray(folds, dtype=np.int64)
    fits = [venn_abers(levels, events, folds == k) for k, levels in enumerate(levels_by_fold)]
    out = merged(fits)
    low, high = out.low.copy(), out.high.copy()
    for k, fit in enumerate(fits):  # a calibration document: its own fold's pair, the one fit blind to its label
        own = folds == k
        low[own], high[own] = fit.low[own], fit.high[own]
    return VennAbers(low, high)


@dataclass(frozen=True)
class VennAbersModel:
    """A stored Venn-Abers fit for documents that do not calibrate: the statistic's cut points and, per level, the
    calibration documents (``totals``) and their events (``hits``). :meth:`predict` places a new document (an
    edited text, say) among the same calibration documents, as :func:`venn_abers` places a non-calibrating one."""

    cuts: np.ndarray
    hits: np.ndarray
    totals: np.ndarray

    @classmethod
    def fit(cls, statistic: np.ndarray, events: np.ndarray, calibrating: np.ndarray,
            levels: int = LEVELS) -> VennAbersModel:
        cuts = level_cuts(statistic, levels)
        codes = level_of(cuts, statistic)
        calibrating = np.asarray(calibrating, dtype=bool)
        width = cuts.size + 1
        totals = np.bincount(codes[calibrating], minlength=width).astype(float)
        hits = np.bincount(codes[calibrating], weights=np.asarray(events, dtype=bool)[calibrating].astype(float),
                           minlength=width)
        return cls(cuts, hits, totals)

    def predict(self, statistic: np.ndarray) -> VennAbers:
        """The Venn-Abers pair of new documents with these values of the statistic."""
        return self.predict_levels(level_of(self.cuts, statistic))

    def predict_levels(self, codes: np.ndarray) -> VennAbers:
        """The Venn-Abers pair of new documents at these levels."""
        codes = np.asarray(codes, dtype=np.int64)
        low, high = np.empty(codes.shape[0]), np.empty(codes.shape[0])
        for level in np.unique(codes).tolist():
            hits, totals = self.hits.copy(), self.totals.copy()
            totals[level] += 1
            p0 = isotonic_at(hits, totals, level)
            hits[level] += 1
            rows = codes == level
            low[rows], high[rows] = p0, isotonic_at(hits, totals, level)
        return VennAbers(low, high)


@dataclass(frozen=True)
class CrossVennAbersModel:
    """A stored cross Venn-Abers fit: one :class:`VennAbersModel` per fold (its calibration documents, the cuts of its
    statistic). :meth:`predict` places a new document among them, as :func:`cross_venn_abers` places a document that
    does not calibrate."""

    folds: tuple[VennAbersModel, ...]

    def predict(self, statistics: list[np.ndarray]) -> VennAbers:
        """The merged pair of new documents, given each fold's statistic of them."""
        return merged([model.predict(statistic) for model, statistic in zip(self.folds, statistics, strict=True)])

    @property
    def floor(self) -> float:
        """The lowest probability the fit gives a new document: each fold at its lowest level (both fits, hence the
        merged probability, are non-decreasing in each fold's level)."""
        return float(merged([model.predict_levels(np.array([0])) for model in self.folds]).p[0])
