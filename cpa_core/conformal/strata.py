"""Certainty strata: bins of a label-free statistic of the attacker's own output (METHOD, "Certainty strata").

A set's size is governed by the ``1 - alpha`` quantile of the truth's score over documents, i.e. by the documents
the attacker cannot place; calibrating within bins of the attacker's certainty ``c(x)`` (e.g. its top-1 margin)
certifies the documents it is sure about against each other. The bins are a symmetric function of the whole bag of
documents: edges are quantiles of ``c`` over *all* documents, labelled or not, and adjacent bins are merged until
each holds ``min_members`` calibration documents (which documents calibrate is fixed before any score is read).
Calibration within a bin (Mondrian) then keeps the guarantee within each bin.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def quantile_cuts(statistic: np.ndarray, parts: int) -> np.ndarray:
    """The inner cut points that split ``statistic`` into ``parts`` equal shares: for ``j = 1 .. parts - 1`` the
    ``ceil(N j / parts)``-th smallest of its ``N`` values (its inverted-CDF quantile at ``j / parts``), distinct and
    ascending. The rank is computed in integers: ``N * (j / parts)`` in floating point exceeds an integer ``N j / parts``
    for some ``N`` (e.g. ``N = 50``, ``parts = 50``) and its ceiling would take the next order statistic.

    Parameters
    ----------
    statistic : ndarray of shape (N,)
    parts : int, at least 1

    Returns
    -------
    ndarray of shape (at most ``parts - 1``,); empty when ``N = 0`` or ``parts = 1``
    """
    values = np.sort(np.asarray(statistic, dtype=float))
    n = values.shape[0]
    if n == 0 or parts < 2:
        return np.zeros(0)
    ranks = -(-n * np.arange(1, parts, dtype=np.int64) // parts)  # ceil(n j / parts), at least 1
    return np.unique(values[ranks - 1])


@dataclass(frozen=True)
class CertaintyBins:
    """The bins of one release: ``codes[i]`` is document ``i``'s bin (``0`` = least certain), ``edges[b]`` the
    ``(low, high)`` values of ``c`` in bin ``b`` (inclusive), ``sizes[b]`` its documents and ``members[b]`` its
    calibration documents."""

    codes: np.ndarray
    edges: tuple[tuple[float, float], ...]
    sizes: tuple[int, ...]
    members: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.edges)


def certainty_bins(statistic: np.ndarray, members: np.ndarray, n_bins: int, min_members: int) -> CertaintyBins:
    """At most ``n_bins`` bins of ``statistic`` with quantile edges over every document, merged (the bin with the
    fewest calibration documents into its smaller neighbour, repeatedly) until each bin holds at least
    ``min_members`` of them; a single bin when the calibration documents are too few for two.

    Parameters
    ----------
    statistic : ndarray of shape (N,), the label-free certainty of every document (finite)
    members : ndarray of shape (N,), bool: the documents that calibrate
    n_bins : the most bins (1: no stratification)
    min_members : the fewest calibration documents a bin may hold
    """
    values = np.asarray(statistic, dtype=float)
    members = np.asarray(members, dtype=bool)
    n = values.shape[0]
    if n_bins < 1:
        raise ValueError(f"n_bins must be at least 1, found {n_bins}")
    if n == 0:
        return CertaintyBins(np.zeros(0, dtype=np.int64), (), (), ())
    # inner edges: quantiles over every document; a document goes above every edge it exceeds
    inner = quantile_cuts(values, n_bins)
    codes = np.searchsorted(inner, values, side="left")
    bins = [np.flatnonzero(codes == b) for b in range(inner.size + 1)]
    bins = [rows for rows in bins if rows.size]
    counts = [int(members[rows].sum()) for rows in bins]
    while len(bins) > 1 and min(counts) < max(min_members, 1):
        b = int(np.argmin(counts))  # the first bin with the fewest members
        if b == 0:
            other = 1
        elif b == len(bins) - 1:
            other = b - 1
        else:
            other = b - 1 if counts[b - 1] <= counts[b + 1] else b + 1
        low, high = min(b, other), max(b, other)
        bins[low:high + 1] = [np.concatenate([bins[low], bins[high]])]
        counts[low:high + 1] = [counts[low] + counts[high]]
    out = np.empty(n, dtype=np.int64)
    edges = []
    for code, rows in enumerate(bins):
        out[rows] = code
        edges.append((float(values[rows].min()), float(values[rows].max())))
    return CertaintyBins(out, tuple(edges), tuple(int(rows.size) for rows in bins), tuple(counts))
