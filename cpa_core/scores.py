"""Nonconformity scores, one small unit each, chosen by name.

Every score maps a document's ranked candidate weights (sorted by decreasing weight) to the score of
each candidate, and is non-decreasing along the ranking, with tied weights sharing one score. That is
what makes a certified set a prefix of the ranking (see :mod:`cpa_core.conformal`).

- ``aps`` (default): ``s(x, y) = sum of p(y'|x) over y' with p(y'|x) >= p(y|x)``, the mass to
  accumulate from the top to include ``y`` (tied candidates enter together).
- ``rank``: the number of candidates with ``p(y'|x) >= p(y|x)`` (1 = the unique top candidate); needs
  only the ranking.
- ``probability``: ``1 - p(y|x)``.
- ``given``: the attacker's own nonconformity score, stored as minus the weight (attackers that score
  candidates directly, such as Profile-CPA, declare it and need it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .errors import ConfigError


def _tie_group_end(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Replace each entry by its value at the last position of its run of equal weights.

    ``values`` must be increasing along each row, so the value at the end of a candidate's tie group
    is the smallest end value at or after its position. Only rows with ties are touched; ``values``
    is modified in place (callers pass a fresh array).
    """
    n, width = weights.shape
    if width < 2:
        return values
    ties = weights[:, :-1] == weights[:, 1:]
    rows = np.flatnonzero(ties.any(axis=1))
    if rows.size == 0:  # no ties: every candidate ends its own group
        return values
    is_end = np.ones((rows.size, width), dtype=bool)
    is_end[:, :-1] = ~ties[rows]
    ends = np.where(is_end, values[rows], np.inf)
    values[rows] = np.minimum.accumulate(ends[:, ::-1], axis=1)[:, ::-1]
    return values


SCORE_DECIMALS = 12
"""Weights sums are rounded to this many decimals: masses equal in exact arithmetic (0.6 + 0.3 and
0.5 + 0.4) must compare equal across documents. Rounding is monotone, so validity is unaffected."""


def _round(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to ``SCORE_DECIMALS`` decimals, in place."""
    scale = 10.0 ** SCORE_DECIMALS
    values *= scale
    np.rint(values, out=values)
    values /= scale
    return values


def _padding(weights: np.ndarray, pool_sizes: np.ndarray) -> np.ndarray | None:
    """Mask of the padding entries, or ``None`` when every row fills the table."""
    if (pool_sizes >= weights.shape[1]).all():
        return None
    return np.arange(weights.shape[1])[None, :] >= pool_sizes[:, None]


@dataclass(frozen=True)
class Score:
    """A nonconformity score: ``name``, whether it needs weights, and its computation.

    ``sorted_scores`` scores every ranked candidate (what certified sets need); ``truth_scores`` scores
    one candidate per row straight from an unsorted weight matrix (what calibration needs), in one pass.
    """

    name: str
    needs_weights: bool
    _compute: Callable[[np.ndarray], np.ndarray]
    description: str
    _truth: Callable[[np.ndarray, np.ndarray], np.ndarray] = None

    def truth_scores(self, weights: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """Score of candidate ``columns[i]`` in row ``i`` of an unsorted weight matrix (no padding).

        Equal to the corresponding entry of :meth:`sorted_scores` on the sorted rows.

        Parameters
        ----------
        weights : ndarray of shape (n, M)
        columns : ndarray of shape (n,), int
        """
        truth = np.take_along_axis(weights, np.asarray(columns)[:, None], axis=1)
        return self._truth(weights, truth)

    def sorted_scores(self, weights: np.ndarray, pool_sizes: np.ndarray) -> np.ndarray:
        """Scores of the ranked candidates.

        Parameters
        ----------
        weights : ndarray of shape (n, K)
            Each row sorted by decreasing weight; entries beyond the row's pool size are padding.
        pool_sizes : ndarray of shape (n,)

        Returns
        -------
        ndarray of shape (n, K), non-decreasing along each row, ``+inf`` at padding.
        """
        padding = _padding(weights, pool_sizes)
        if padding is None:
            return self._compute(weights)
        scores = self._compute(np.where(padding, -np.inf, weights))
        scores[padding] = np.inf
        return scores


def _aps(weights: np.ndarray) -> np.ndarray:
    padded = weights.shape[1] > 0 and not np.isfinite(weights[:, -1]).all()  # padding sits at the row ends
    cumulative = _round(np.cumsum(np.where(np.isfinite(weights), weights, 0.0) if padded else weights, axis=1))
    return _tie_group_end(cumulative, weights)


def _rank(weights: np.ndarray) -> np.ndarray:
    positions = np.broadcast_to(np.arange(1, weights.shape[1] + 1, dtype=float), weights.shape).copy()
    return _tie_group_end(positions, weights)


def _probability(weights: np.ndarray) -> np.ndarray:
    return _round(1.0 - np.where(np.isfinite(weights), weights, 0.0))


def _given(weights: np.ndarray) -> np.ndarray:
    return _round(-weights.astype(float))


def _at_least(weights: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return weights >= truth


SCORES: dict[str, Score] = {
    "aps": Score("aps", True, _aps, "probability mass accumulated from the top down to the candidate",
                 lambda w, t: _round(np.where(_at_least(w, t), w, 0.0).sum(axis=1))),
    "rank": Score("rank", False, _rank, "rank of the candidate in the attacker's list (ties share the worst rank)",
                  lambda w, t: np.count_nonzero(_at_least(w, t), axis=1).astype(float)),
    "probability": Score("probability", True, _probability, "one minus the candidate's weight",
                         lambda w, t: _round(1.0 - t[:, 0])),
    "given": Score("given", True, _given, "the attacker's own score of the candidate (minus its weight)",
                   lambda w, t: _round(-t[:, 0].astype(float))),
}


def get_score(score: str | Score) -> Score:
    """The score named ``score`` (``aps``, ``rank``, ``probability``), or ``score`` itself."""
    if isinstance(score, Score):
        return score
    try:
        return SCORES[score]
    except KeyError:
        raise ConfigError(f"unknown score '{score}'; expected one of {', '.join(SCORES)}") from None
