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

**Resolution.** With a peaked softmax, all but the first few candidates carry tiny masses, and
``1 - tiny`` rounds to 1.0 in floating point: every tail candidate would tie with the truth of any hard
calibration document and the sets would become the whole pool. Scores are therefore *stored* on a scale
that keeps relative precision, a strictly increasing function of the METHOD's score (so thresholds and
sets are the same): APS as minus the mass *below* the candidate, ``-(1 - s)``, summed from the bottom of
the ranking with compensated (Neumaier) summation, the probability score as ``-p``. The mass below
includes the pool's mass outside the table (``tail_mass``: candidates cut by a top-K shortlist, invalid
LLM picks), so a shortlist never changes the scores of the candidates it keeps. :meth:`Score.to_method`
converts stored scores back to the METHOD's scale for display.

**Ties at the cut.** Cut candidates tied with the last listed one (``cut_ties`` of them) weigh what it weighs and
belong to its tie group: their mass counts at or above the group (APS), their number in its rank, exactly as
without the shortlist. ``tail_mass`` is then the mass strictly below the last listed candidate (no subtraction
ever takes the tied mass out of a sum: a tiny mass below the tie keeps its relative precision).

**Ties carry no information.** A pool whose candidates all tie (nothing outside the table but their own ties: no
candidate cut below them, ``cut_below``, however little it weighs, and no mass below them, ``tail_mass``)
certifies nothing: every score gives its candidates the lowest score, ``-inf``, so its set is the whole pool at
any threshold, never an empty set (a fixed function of the document's output, so every guarantee holds). An
empty set arises only when the attacker is more certain than the threshold needs.

**Ties across documents.** Stored scores come from floating-point sums whose error is a few units in the
last place; two scores are compared as equal when they agree to :data:`RELATIVE_TOLERANCE` (32 units in
the last place, about 3.6e-15 relative). Scores that differ by more, such as masses 1e-13 apart, stay
apart; scores equal in exact arithmetic are never split by summation order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cpa_core.common.errors import ConfigError

RELATIVE_TOLERANCE = 2.0 ** -48
"""Stored scores within this relative distance are equal: far above the few ulps of a compensated sum,
far below any difference that matters (1e-13 apart is a difference)."""


def _tie_group_end(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Replace each entry by its value at the last position of its run of equal weights.

    ``values`` must be non-decreasing along each row, so the value at the end of a candidate's tie group
    is the smallest end value at or after its position. Only rows with ties are touched, a block of rows at a
    time (temporaries of :data:`MASS_BLOCK_ENTRIES` entries); ``values`` is modified in place (callers pass a
    fresh array).
    """
    n, width = weights.shape
    if width < 2:
        return values
    step = max(1, MASS_BLOCK_ENTRIES // width)
    for start in range(0, n, step):
        block = slice(start, min(n, start + step))
        ties = weights[block, :-1] == weights[block, 1:]
        tied = np.flatnonzero(ties.any(axis=1))
        if tied.size == 0:  # no ties: every candidate ends its own group
            continue
        rows = start + tied
        is_end = np.ones((tied.size, width), dtype=bool)
        is_end[:, :-1] = ~ties[tied]
        ends = np.where(is_end, values[rows], np.inf)
        values[rows] = np.minimum.accumulate(ends[:, ::-1], axis=1)[:, ::-1]
    return values


MASS_BLOCK_ENTRIES = 1 << 16
"""Entries of the row blocks :func:`mass_below` works on: temporaries that stay in the cache, whatever the table's size."""


def mass_below(weights: np.ndarray, tail_mass: np.ndarray | None = None, *, negated: bool = False) -> np.ndarray:
    """Mass strictly after each position of each row, plus the row's ``tail_mass`` (Neumaier-compensated);
    ``negated``: minus that mass (the stored APS score, written in the same pass).

    ``weights`` are sorted by decreasing weight; padding (any entry that is not finite) adds no mass. The sum
    runs from the bottom, so tiny tails keep their relative precision.

    Neumaier's running sum is the plain sequential sum, and its compensation the plain sequential sum of each
    step's rounding error, which the partial sums determine exactly (Knuth's two-sum): both are prefix sums
    (``np.add.accumulate`` is sequential), so the result equals the step-by-step loop bitwise, computed over
    row blocks of :data:`MASS_BLOCK_ENTRIES` entries.
    """
    n, width = weights.shape
    tail = np.zeros(n) if tail_mass is None else np.asarray(tail_mass, dtype=float)
    below = np.empty((n, width))
    if width == 0:
        return below
    step = max(1, MASS_BLOCK_ENTRIES // width)
    for start in range(0, n, step):
        stop = min(n, start + step)
        # the terms from the bottom: the tail, then the weights from the last position up to the second
        terms = np.empty((stop - start, width))
        terms[:, 0] = tail[start:stop]
        terms[:, 1:] = weights[start:stop, :0:-1]
        np.copyto(terms, 0.0, where=~np.isfinite(terms))
        sums = np.add.accumulate(terms, axis=1)
        before, added, after = sums[:, :-1], terms[:, 1:], sums[:, 1:]
        part = after - before                 # two-sum: the exact error of each step, in place
        errors = after - part
        np.subtract(before, errors, out=errors)
        np.subtract(added, part, out=part)
        errors += part
        np.add.accumulate(errors, axis=1, out=errors)
        after += errors
        if negated:
            np.negative(sums[:, ::-1], out=below[start:stop])
        else:
            below[start:stop] = sums[:, ::-1]
    return below


def tie_pessimistic_ranks(weights: np.ndarray, pool_sizes: np.ndarray, positions: np.ndarray,
                          cut_ties: np.ndarray | None = None) -> np.ndarray:
    """The rank score of one candidate per row (``positions``, each inside its row's pool): the number of pool
    candidates weighing at least as much (1 = the unique top; tied candidates share the worst rank), the row's
    ``cut_ties`` included when the candidate ties with the last listed one.

    Rows are ranked by decreasing weight, so a candidate whose successor in the pool weighs strictly less has
    rank ``position + 1``; only the other rows (a tie, or a weight that does not compare) are counted.
    """
    weights = np.asarray(weights)
    n, width = weights.shape
    pool_sizes = np.asarray(pool_sizes)
    positions = np.asarray(positions, dtype=np.int64)
    if n == 0 or width == 0:
        return np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    chosen = weights[rows, positions]
    following = positions + 1
    has_next = following < np.minimum(pool_sizes, width)
    successor = np.where(has_next, weights[rows, np.minimum(following, width - 1)], -np.inf)
    ranks = following.copy()
    counted = np.flatnonzero(~(successor < chosen))
    step = max(1, MASS_BLOCK_ENTRIES // width)
    for start in range(0, counted.size, step):
        block = counted[start:start + step]
        pool = np.arange(width)[None, :] < pool_sizes[block, None]
        ranks[block] = np.count_nonzero((weights[block] >= chosen[block, None]) & pool, axis=1)
    if cut_ties is not None:
        ranks += np.where(chosen == last_listed(weights, pool_sizes), np.asarray(cut_ties, dtype=np.int64), 0)
    return ranks


def last_listed(weights: np.ndarray, pool_sizes: np.ndarray) -> np.ndarray:
    """Each row's last listed weight (the first column's of an empty pool; the table must have a column)."""
    width = weights.shape[1]
    return weights[np.arange(weights.shape[0]), np.clip(np.minimum(pool_sizes, width) - 1, 0, width - 1)]


def last_tie_group(weights: np.ndarray, pool_sizes: np.ndarray, cut_ties: np.ndarray | None) -> np.ndarray | None:
    """Mask of the listed candidates tied with cut ones (the last listed tie group of rows with ``cut_ties``), or
    ``None`` when no row has such ties."""
    if cut_ties is None or not np.any(cut_ties):
        return None
    width = weights.shape[1]
    if width == 0:
        return None
    pool = np.arange(width)[None, :] < np.minimum(pool_sizes, width)[:, None]
    return (np.asarray(cut_ties)[:, None] > 0) & pool & (weights == last_listed(weights, pool_sizes)[:, None])


def fully_tied(weights: np.ndarray, pool_sizes: np.ndarray, tail_mass: np.ndarray | None,
               cut_ties: np.ndarray | None, cut_below: np.ndarray | None = None) -> np.ndarray:
    """Rows whose whole pool ties: at least two candidates (listed or cut), every listed weight equal, no candidate
    cut below them and no mass below them outside the table (the attacker tells the candidates apart in no way).

    A shortlist that cuts candidates below a tie (even of weight 0, a softmax that underflows) leaves a pool that
    does not tie: the row's scores are those the pool gives without the shortlist.
    """
    n, width = weights.shape
    if width == 0:
        return np.zeros(n, dtype=bool)
    pool_sizes = np.minimum(np.asarray(pool_sizes), width)
    ties = np.zeros(n) if cut_ties is None else np.asarray(cut_ties, dtype=float)
    tied = (pool_sizes > 0) & (pool_sizes + ties >= 2) & (weights[:, 0] == last_listed(weights, pool_sizes))
    if tail_mass is not None:  # the mass below the last listed candidate: none in a fully tied pool
        tied &= ~(np.asarray(tail_mass, dtype=float) > 0)
    if cut_below is not None:  # candidates below the last listed one, whatever they weigh: none in a fully tied pool
        tied &= ~(np.asarray(cut_below) > 0)
    return tied


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
    Both return stored scores; :meth:`to_method` gives the METHOD's scale.
    """

    name: str
    needs_weights: bool
    _compute: Callable[[np.ndarray, np.ndarray], np.ndarray]
    description: str
    _truth: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    _method: Callable[[np.ndarray], np.ndarray]
    stored_as: str = "the METHOD's score"

    def truth_scores(self, weights: np.ndarray, columns: np.ndarray, tail_mass: np.ndarray | None = None) -> np.ndarray:
        """Score of candidate ``columns[i]`` in row ``i`` of an unsorted weight matrix (no padding, nothing cut).

        Equal (to :data:`RELATIVE_TOLERANCE`) to the corresponding entry of :meth:`sorted_scores` on the
        sorted rows (a fully tied row included: ``-inf``).

        Parameters
        ----------
        weights : ndarray of shape (n, M)
        columns : ndarray of shape (n,), int
        tail_mass : ndarray of shape (n,), optional
        """
        tail = np.zeros(weights.shape[0]) if tail_mass is None else np.asarray(tail_mass, dtype=float)
        truth = np.take_along_axis(weights, np.asarray(columns)[:, None], axis=1)
        scores = self._truth(weights, truth, tail)
        if weights.shape[1]:
            tied = (weights.shape[1] >= 2) & (weights.max(axis=1) == weights.min(axis=1))
            tied &= ~(tail > 0)  # mass outside the table: the candidates are not the whole story
            scores = np.where(tied, -np.inf, scores)
        return scores

    def sorted_scores(self, weights: np.ndarray, pool_sizes: np.ndarray, tail_mass: np.ndarray | None = None,
                      cut_ties: np.ndarray | None = None, cut_below: np.ndarray | None = None) -> np.ndarray:
        """Stored scores of the ranked candidates.

        Parameters
        ----------
        weights : ndarray of shape (n, K)
            Each row sorted by decreasing weight; entries beyond the row's pool size are padding.
        pool_sizes : ndarray of shape (n,)
        tail_mass : ndarray of shape (n,), optional
            Probability mass of each pool outside the table below its last listed candidate (the APS score counts
            it below every candidate).
        cut_ties : ndarray of shape (n,), optional
            Cut candidates tied with each row's last listed candidate (their mass is *not* in ``tail_mass``).
        cut_below : ndarray of shape (n,), optional
            Cut candidates strictly below each row's last listed candidate (their mass, possibly 0, is in
            ``tail_mass``): they change no score, but a row with any is not a fully tied pool.

        Returns
        -------
        ndarray of shape (n, K), non-decreasing along each row, ``+inf`` at padding, ``-inf`` throughout a fully
        tied pool (:func:`fully_tied`).
        """
        tail = np.zeros(weights.shape[0]) if tail_mass is None else np.asarray(tail_mass, dtype=float)
        group = last_tie_group(weights, pool_sizes, cut_ties)
        below = tail
        if group is not None:  # the cut ties' mass lies below every listed candidate but their own tie group
            last = last_listed(weights, pool_sizes)
            tail = tail + np.asarray(cut_ties) * np.where(np.isfinite(last), last, 0.0)
        padding = _padding(weights, pool_sizes)
        if padding is None:
            scores = self._compute(weights, tail)
        else:
            scores = self._compute(np.where(padding, -np.inf, weights), tail)
        if group is not None:
            scores = self._at_cut(scores, group, below, np.asarray(cut_ties))
        tied = fully_tied(weights, pool_sizes, tail_mass, cut_ties, cut_below)
        if tied.any():
            scores[tied] = -np.inf
        if padding is not None:
            scores[padding] = np.inf
        return scores

    def _at_cut(self, scores: np.ndarray, group: np.ndarray, below: np.ndarray, cut_ties: np.ndarray) -> np.ndarray:
        """The last listed tie group's scores with its cut ties counted in it (not below it)."""
        rows = np.flatnonzero(group.any(axis=1))
        if self.name == "aps":  # minus the mass strictly below the group: the tail without the tied mass
            scores[rows] = np.where(group[rows], -below[rows, None], scores[rows])
        elif self.name == "rank":
            scores[rows] = np.where(group[rows], scores[rows] + cut_ties[rows, None], scores[rows])
        return scores

    def to_method(self, stored):
        """Stored scores on the METHOD's scale (APS mass, rank, ``1 - p``); for display only."""
        values = np.asarray(stored, dtype=float)
        out = np.where(np.isfinite(values), self._method(values), values)
        return float(out) if out.ndim == 0 else out


def _aps(weights: np.ndarray, tail: np.ndarray) -> np.ndarray:
    return _tie_group_end(mass_below(weights, tail, negated=True), weights)  # padding (-inf) adds no mass


def _rank(weights: np.ndarray, tail: np.ndarray) -> np.ndarray:
    positions = np.broadcast_to(np.arange(1, weights.shape[1] + 1, dtype=float), weights.shape).copy()
    return _tie_group_end(positions, weights)


def _minus_weight(weights: np.ndarray, tail: np.ndarray) -> np.ndarray:
    return -weights.astype(float)


def _aps_truth(weights, truth, tail):
    return -(tail + np.where(weights < truth, weights, 0.0).sum(axis=1))


SCORES: dict[str, Score] = {
    "aps": Score("aps", True, _aps, "probability mass accumulated from the top down to the candidate", _aps_truth,
                 lambda s: 1.0 + s, "minus the probability mass below the candidate (APS = 1 + stored)"),
    "rank": Score("rank", False, _rank, "rank of the candidate in the attacker's list (ties share the worst rank)",
                  lambda w, t, tail: np.count_nonzero(w >= t, axis=1).astype(float), lambda s: s),
    "probability": Score("probability", True, _minus_weight, "one minus the candidate's weight",
                         lambda w, t, tail: -t[:, 0].astype(float), lambda s: 1.0 + s,
                         "minus the candidate's weight (1 - p = 1 + stored)"),
    "given": Score("given", True, _minus_weight, "the attacker's own score of the candidate (minus its weight)",
                   lambda w, t, tail: -t[:, 0].astype(float), lambda s: s, "the attacker's score (minus its weight)"),
}


def get_score(score: str | Score) -> Score:
    """The score named ``score`` (``aps``, ``rank``, ``probability``, ``given``), or ``score`` itself."""
    if isinstance(score, Score):
        return score
    try:
        return SCORES[score]
    except KeyError:
        raise ConfigError(f"unknown score '{score}'; expected one of {', '.join(SCORES)}") from None
