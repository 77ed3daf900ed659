"""Certainty strata: bins of a label-free statistic of the attacker's own output (METHOD, "Certainty strata").

A set's size is governed by the ``1 - alpha`` quantile of the truth's score over documents, i.e. by the documents
the attacker cannot place; calibrating within bins of the attacker's certainty ``c(x)`` (e.g. its top-1 margin)
certifies the documents it is sure about against each other. The bins are a function of the bag of values of ``c``
over *all* documents, labelled or not, and of *how many* of them calibrate, never of *which*: edges are quantiles
of ``c`` over every document, and adjacent bins are merged until each holds enough documents that its expected
calibration documents (its documents times the share that calibrates) reach ``min_members`` but for
:data:`SPREAD` standard deviations (:func:`holds_enough`). So a document that does not calibrate (of unknown subject,
or held out) and the calibration documents are placed by the same rule, and swapping which of them calibrates
changes no bin: calibration within a bin (Mondrian) then keeps the guarantee within each bin for both (the proof is
in ``docs/guarantee.md``, "Certainty strata"). A bin may still hold fewer calibration documents than
``min_members``; its threshold is then infinite and says so, never a smaller bin chosen by who calibrates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SPREAD = 3.0
"""How many standard deviations below its expected count a bin's calibration documents may fall and still number
``min_members`` (:func:`holds_enough`): were the calibrating documents a random share ``p`` of a bin's ``d``
documents, their count is binomial, mean ``d p`` and variance ``d p (1 - p)``; three standard deviations leave a bin
short about once in 700 (normal approximation)."""


def quantile_cuts(statistic: np.ndarray, parts: int) -> np.ndarray:
    """The inner cut points that split ``statistic`` into ``parts`` equal shares: for ``j = 1 .. parts - 1`` the
    ``ceil(N j / parts)``-th smallest of its ``N`` values (its inverted-CDF quantile at ``j / parts``), distinct and
    ascending. The rank is computed in integers: ``N * (j / parts)`` in floating point exceeds an integer
    ``N j / parts`` for some ``N`` (e.g. ``N = 50``, ``parts = 50``), and its ceiling would take the next order
    statistic.

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


def holds_enough(documents: int, share: float, min_members: int) -> bool:
    """Whether a bin of ``documents`` documents, of which a share ``share`` calibrates on average, is expected to hold
    ``min_members`` calibration documents (at least one) but for :data:`SPREAD` standard deviations:
    ``d p - SPREAD sqrt(d p (1 - p)) >= min_members``. When every document calibrates (``p = 1``) that is
    ``d >= min_members``, the bin's exact count. A function of counts alone, never of which documents calibrate."""
    expected = documents * share
    return expected - SPREAD * math.sqrt(expected * (1.0 - share)) >= max(min_members, 1)


def certainty_bins(statistic: np.ndarray, members: np.ndarray, n_bins: int, min_members: int) -> CertaintyBins:
    """At most ``n_bins`` bins of ``statistic`` with quantile edges over every document, merged (the bin with the
    fewest documents into its smaller neighbour, repeatedly) until each :func:`holds_enough` documents for
    ``min_members`` calibration documents, the share that calibrates being ``members.sum() / N``; a single bin when
    they are too few for two. The bins depend on ``members`` through its count only: which documents calibrate
    changes no bin (only the counts ``members`` reports, which may fall short of ``min_members``).

    Parameters
    ----------
    statistic : ndarray of shape (N,), the label-free certainty of every document (finite)
    members : ndarray of shape (N,), bool: the documents that calibrate
    n_bins : the most bins (1: no stratification)
    min_members : the calibration documents a bin must be expected to hold
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
    share = float(members.sum()) / n
    sizes = [int(rows.size) for rows in bins]
    while len(bins) > 1 and not holds_enough(min(sizes), share, min_members):
        b = int(np.argmin(sizes))  # the first bin with the fewest documents
        if b == 0:
            other = 1
        elif b == len(bins) - 1:
            other = b - 1
        else:
            other = b - 1 if sizes[b - 1] <= sizes[b + 1] else b + 1
        low, high = min(b, other), max(b, other)
        bins[low:high + 1] = [np.concatenate([bins[low], bins[high]])]
        sizes[low:high + 1] = [sizes[low] + sizes[high]]
    counts = [int(members[rows].sum()) for rows in bins]
    out = np.empty(n, dtype=np.int64)
    edges = []
    for code, rows in enumerate(bins):
        out[rows] = code
        edges.append((float(values[rows].min()), float(values[rows].max())))
    return CertaintyBins(out, tuple(edges), tuple(int(rows.size) for rows in bins), tuple(counts))
