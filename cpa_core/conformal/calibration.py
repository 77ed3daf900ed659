"""Split-conformal calibration: the only place the conformal quantile is computed.

The threshold for miscoverage ``alpha`` over ``n`` calibration scores is the ``k``-th smallest
score with ``k = ceil((n + 1) * (1 - alpha))``, computed in exact rational arithmetic. If
``k > n`` the threshold is ``+inf`` (every set is the whole pool) and the calibration carries a note
(:attr:`Calibration.notes_`) saying how many calibration documents the level needs.

A certified set is ``{y in pool : s(x, y) <= q_hat}``. Because every score in :mod:`cpa_core.conformal.scores`
is non-decreasing along the attacker's ranking, a set is a prefix of the ranked pool and its size is
a count over the document's sorted scores: re-thresholding at a new level is a search, not a re-sort.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Hashable, Iterable, Sequence

import numpy as np

from cpa_core.common.errors import ConfigError
from cpa_core.conformal.scores import RELATIVE_TOLERANCE

ALL = "__all__"  # the stratum key of a calibration without groups


def exact_fraction(value: float | str | Fraction | Decimal) -> Fraction:
    """The decimal number the user wrote, as an exact fraction.

    Floats are read through their shortest representation (``0.3`` -> ``3/10``), not their binary
    expansion (``0.299999999999999988...``), so that ``0.95`` means ninety-five hundredths.
    """
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise ConfigError(f"expected a number, found {value!r}")
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise ConfigError(f"expected a finite number, found {value!r}")
        return Fraction(repr(float(value)))
    try:
        return Fraction(value)
    except (TypeError, ValueError):
        raise ConfigError(f"expected a number, found {value!r}") from None


def alpha_from_confidence(confidence: float | str | Fraction) -> Fraction:
    """Miscoverage ``alpha = 1 - confidence``, exactly; the confidence must lie in (0, 1)."""
    level = exact_fraction(confidence)
    if not 0 < level < 1:
        raise ConfigError(f"a confidence level must lie strictly between 0 and 1, found {confidence!r}")
    return 1 - level


def confidence_label(confidence: float | str | Fraction) -> str:
    """A stable text key for a confidence level: ``0.95`` -> ``"0.95"``."""
    level = exact_fraction(confidence)
    denominator = level.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    if denominator == 1:  # a terminating decimal: print it exactly
        return format(Decimal(level.numerator) / Decimal(level.denominator), "f")
    return repr(float(level))


def threshold_rank(n: int, alpha: float | Fraction) -> int:
    """``k = ceil((n + 1) * (1 - alpha))`` in exact arithmetic (may exceed ``n``)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, found {n}")
    a = exact_fraction(alpha)
    if not 0 < a < 1:
        raise ConfigError(f"alpha must lie strictly between 0 and 1, found {alpha!r}")
    return math.ceil((n + 1) * (1 - a))


def minimum_calibration_size(alpha: float | Fraction) -> int:
    """The smallest ``n`` with a finite threshold: ``ceil(1/alpha - 1)``."""
    a = exact_fraction(alpha)
    return max(0, math.ceil(1 / a - 1))


def conformal_threshold(calibration_scores: np.ndarray, alpha: float | Fraction) -> float:
    """``q_hat``: the ``k``-th smallest calibration score, or ``+inf`` when ``k > n``.

    Parameters
    ----------
    calibration_scores : ndarray of shape (n,)
        Nonconformity scores of the true identities (``+inf`` for a truth outside the pool).
    alpha : float or Fraction
        Target miscoverage.
    """
    scores = np.asarray(calibration_scores, dtype=float)
    n = scores.shape[0]
    k = threshold_rank(n, alpha)
    if k > n:
        return math.inf
    return float(np.partition(scores, k - 1)[k - 1])


TOO_SMALL = "too small"
"""The kind of a note whose stratum's calibration set is too small for its level (``k > n``)."""

NOTES_NAMED = 5
"""Notes of one kind at one level are said one by one up to this many strata; beyond, in one line with the count
and :data:`EXAMPLES_NAMED` of the strata (a release of 1,000 one-document groups gives one line per level, not
1,000)."""
EXAMPLES_NAMED = 3


@dataclass(frozen=True)
class CalibrationNote:
    """Why a threshold certifies nothing: ``message`` at confidence ``confidence`` (a label) in ``stratum``, a note
    of kind ``kind`` (:data:`TOO_SMALL`) whose figures are ``n`` calibration documents where ``needed`` are needed."""

    confidence: str
    stratum: Hashable
    message: str
    kind: str = TOO_SMALL
    n: int = 0
    needed: int = 0


def examples(strata: Sequence[Hashable], shown: int = EXAMPLES_NAMED) -> str:
    """The first ``shown`` of some strata, quoted, with an ellipsis when there are more: ``'a', 'b', 'c', …``."""
    quoted = [f"'{_cut(stratum)}'" for stratum in list(strata)[:shown]]
    return ", ".join(quoted + (["…"] if len(strata) > shown else []))


def _cut(stratum: Hashable, width: int = 40) -> str:
    text = str(stratum)
    return text if len(text) <= width else text[:width] + "…"


def grouped_notes(notes: Iterable[CalibrationNote]) -> list[str]:
    """The notes' messages, those of one kind at one level in one line when more than :data:`NOTES_NAMED` strata
    share it: their count, a few of them, and what it means (the notes themselves keep every stratum)."""
    by_kind: dict[tuple[str, str], list[CalibrationNote]] = {}
    for note in notes:
        by_kind.setdefault((note.kind, note.confidence), []).append(note)
    out = []
    for (kind, level), same in by_kind.items():
        if len(same) <= NOTES_NAMED or kind != TOO_SMALL:  # the only kind of note so far
            out.extend(note.message for note in same)
            continue
        strata = [note.stratum for note in same]
        out.append(f"calibration set too small for confidence {level} in {strata_counted(strata)}: "
                   f"{sizes_said([note.n for note in same])}, needs at least {same[0].needed:,}; their thresholds are "
                   "infinite and every set in them is the whole pool")
    return out


def strata_counted(strata: Sequence[Hashable]) -> str:
    """``1,000 groups ('g1', 'g2', 'g3', …)``: how many strata and the first few (strata when any is a certainty
    stratum, groups otherwise)."""
    return f"{len(strata):,} {strata_noun(strata)} ({examples(strata)})"


def strata_noun(strata: Sequence[Hashable]) -> str:
    """``strata`` when any of them is a certainty stratum (``'g1 · certainty 1 of 2'``), ``groups`` otherwise."""
    return "strata" if any("certainty " in str(stratum) for stratum in strata) else "groups"


def sizes_said(sizes: Sequence[int]) -> str:
    """``n = 1 each`` or ``n from 1 to 4``: the calibration sizes of several strata."""
    low, high = min(sizes), max(sizes)
    return f"n = {low:,} each" if low == high else f"n from {low:,} to {high:,}"


@dataclass(frozen=True)
class Calibration:
    """Thresholds per confidence level and stratum, learned from calibration scores.

    ``q_hat_[label][stratum]`` is the threshold; ``n_[stratum]`` the calibration size; ``notes_`` the
    levels and strata whose threshold is infinite because the calibration set is too small.
    """

    confidences: tuple[Fraction, ...]
    q_hat_: dict[str, dict[Hashable, float]]
    n_: dict[Hashable, int]
    notes_: tuple[CalibrationNote, ...] = ()

    def notes_for(self, confidence) -> list[str]:
        """The messages of the notes at one confidence level, grouped by kind (:func:`grouped_notes`)."""
        label = confidence_label(confidence)
        return grouped_notes(note for note in self.notes_ if note.confidence == label)

    @property
    def strata(self) -> list[Hashable]:
        return list(self.n_)

    def thresholds_for(self, confidence, strata: Sequence[Hashable] | None, n_docs: int) -> np.ndarray:
        """Per-document threshold for documents of the given strata (``None``: one stratum).

        A stratum never seen during calibration has no data, hence ``+inf``.
        """
        if strata is None:
            return np.full(n_docs, self.q_hat_[confidence_label(confidence)][ALL])
        keys, codes = np.unique(np.asarray(strata, dtype=object).astype(str), return_inverse=True)
        return self.thresholds_by_code(confidence, keys, codes)

    def thresholds_by_code(self, confidence, keys: Sequence[Hashable], codes: np.ndarray) -> np.ndarray:
        """Per-document threshold for strata given as ``keys[codes]`` (no per-document lookups)."""
        by_key = {str(k): v for k, v in self.q_hat_[confidence_label(confidence)].items()}
        return np.array([by_key.get(str(k), math.inf) for k in keys], dtype=float)[codes]

    def q_hat(self, confidence, stratum: Hashable = ALL) -> float:
        return self.q_hat_[confidence_label(confidence)].get(stratum, math.inf)


def calibrate(calibration_scores: np.ndarray, confidences: Iterable,
              strata: Sequence[Hashable] | None = None) -> Calibration:
    """Learn ``q_hat`` for each confidence level, per stratum when ``strata`` is given (Mondrian).

    Parameters
    ----------
    calibration_scores : ndarray of shape (n,)
    confidences : iterable of confidence levels in (0, 1)
    strata : sequence of length n, optional
        Stratum of each calibration document; thresholds are computed within each stratum.
    """
    return CalibrationScores(calibration_scores, strata).calibrate(confidences)


class CalibrationScores:
    """Calibration scores split by stratum once: :meth:`calibrate` at any level without regrouping them (what a
    confidence slider asks for, level after level). Parameters are those of :func:`calibrate`."""

    def __init__(self, calibration_scores: np.ndarray, strata: Sequence[Hashable] | None = None):
        scores = np.asarray(calibration_scores, dtype=float)
        if np.isnan(scores).any():
            raise ConfigError("calibration scores contain NaN")
        if strata is None:
            self.groups = {ALL: scores}
        else:
            keys = np.asarray(list(strata), dtype=object)
            if keys.shape[0] != scores.shape[0]:
                raise ConfigError(f"{keys.shape[0]} strata given for {scores.shape[0]} calibration scores")
            self.groups = {key: scores[keys == key] for key in dict.fromkeys(keys.tolist())}

    def calibrate(self, confidences: Iterable) -> Calibration:
        """``q_hat`` of each stratum at each level, with a note where the calibration set is too small."""
        levels = tuple(exact_fraction(c) for c in confidences)
        for level in levels:
            alpha_from_confidence(level)
        q_hat: dict[str, dict[Hashable, float]] = {}
        notes: list[CalibrationNote] = []
        for level in levels:
            alpha = 1 - level
            row = {}
            for key, values in self.groups.items():
                row[key] = conformal_threshold(values, alpha)
                if math.isinf(row[key]) and threshold_rank(values.shape[0], alpha) > values.shape[0]:
                    where = "" if key == ALL else f" in group '{key}'"
                    notes.append(CalibrationNote(
                        confidence_label(level), key,
                        f"calibration set too small for confidence {confidence_label(level)}{where}: "
                        f"n = {values.shape[0]}, needs at least {minimum_calibration_size(alpha)}; "
                        "the threshold is infinite and every set is the whole pool",
                        TOO_SMALL, int(values.shape[0]), minimum_calibration_size(alpha)))
            q_hat[confidence_label(level)] = row
        return Calibration(confidences=levels, q_hat_=q_hat,
                           n_={key: int(values.shape[0]) for key, values in self.groups.items()}, notes_=tuple(notes))


def set_sizes(sorted_scores: np.ndarray, pool_sizes: np.ndarray, q_hat: np.ndarray | float) -> np.ndarray:
    """Size of each certified set ``{y : s(x, y) <= q_hat}`` (scores within tolerance of ``q_hat`` are in).

    Parameters
    ----------
    sorted_scores : ndarray of shape (n, K)
        Each row non-decreasing: the scores of a document's candidates in ranked order
        (padding beyond the pool is ``+inf``).
    pool_sizes : ndarray of shape (n,)
        Number of real candidates in each row.
    q_hat : float or ndarray of shape (n,)
    """
    q = within_tolerance(np.asarray(q_hat, dtype=float))
    if q.ndim == 0:
        counts = np.count_nonzero(sorted_scores <= q, axis=1)
    else:
        counts = np.count_nonzero(sorted_scores <= q[:, None], axis=1)
    return np.minimum(counts, pool_sizes)


def within_tolerance(q_hat: np.ndarray) -> np.ndarray:
    """The largest stored score that compares as at most ``q_hat``: ``q_hat`` plus its relative tolerance
    (:data:`~cpa_core.conformal.scores.RELATIVE_TOLERANCE`; sums equal in exact arithmetic are not split)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(q_hat), q_hat + RELATIVE_TOLERANCE * np.abs(q_hat), q_hat)


def p_values(sorted_calibration_scores: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Conformal p-value of each candidate: ``(1 + #{i : T_i >= s}) / (n + 1)``.

    ``y`` is in the set at miscoverage ``alpha`` exactly when its p-value exceeds ``alpha``.
    """
    cal = np.asarray(sorted_calibration_scores, dtype=float)
    n = cal.shape[0]
    at_least = n - np.searchsorted(cal, np.asarray(scores, dtype=float), side="left")
    return (1 + at_least) / (n + 1)


def leave_one_out_thresholds(scores: np.ndarray, members: np.ndarray, confidence,
                             strata: Sequence[Hashable] | None = None) -> np.ndarray:
    """Per-document thresholds that certify a whole release (METHOD, "Certifying a whole release").

    A calibration member ``i`` (``members[i]``) gets ``q_hat_(-i)``, the ``ceil(n (1 - alpha))``-th smallest
    of the *other* ``n - 1`` members' scores of its stratum: the split-conformal threshold with ``n - 1``
    calibration documents, so its own score never enters its own threshold. Any other document gets the
    threshold over all ``n`` members of its stratum, ``ceil((n + 1)(1 - alpha))``-th smallest. A threshold
    that does not exist (too few members, a stratum without members) is ``+inf``. One sort per stratum
    (:class:`LeaveOneOutRanking`, which serves any number of levels).

    Parameters
    ----------
    scores : ndarray of shape (N,)
        Every document's calibration score (its truth's score; ``+inf`` for a truth outside the pool);
        only the members' are read.
    members : ndarray of shape (N,), bool
    confidence : the confidence level ``1 - alpha``
    strata : sequence of length N, optional
    """
    codes = None if strata is None else np.unique(np.asarray(strata, dtype=object).astype(str), return_inverse=True)[1]
    return LeaveOneOutRanking(scores, members, codes).thresholds([confidence])[0]


class LeaveOneOutRanking:
    """Each stratum's member scores sorted once: :func:`leave_one_out_thresholds` at any level then costs one
    pass over the documents, no sort (what a confidence slider asks for, level after level).

    Parameters are those of :func:`leave_one_out_thresholds`, the strata given as integer codes (documents with
    the same code share a stratum; ``None``: one stratum).
    """

    def __init__(self, scores: np.ndarray, members: np.ndarray, codes: np.ndarray | None = None):
        scores = np.asarray(scores, dtype=float)
        members = np.asarray(members, dtype=bool)
        n_docs = scores.shape[0]
        codes = np.zeros(n_docs, dtype=np.int64) if codes is None else np.asarray(codes)
        self.size = n_docs
        self.members = members
        self.strata = []  # per stratum: its members, its other documents, the members' sorted scores and ranks
        for code in np.unique(codes):
            inside = codes == code
            mine = np.flatnonzero(inside & members)
            others = np.flatnonzero(inside & ~members)
            order = np.argsort(scores[mine], kind="stable")
            position = np.empty(mine.shape[0], dtype=np.int64)
            position[order] = np.arange(mine.shape[0])
            self.strata.append((mine, others, scores[mine][order], position))

    def thresholds(self, confidences: Sequence) -> np.ndarray:
        """Every document's threshold at each level, shape ``(len(confidences), N)`` (``+inf`` where none exists)."""
        alphas = [alpha_from_confidence(c) for c in confidences]
        out = np.full((len(alphas), self.size), math.inf)
        for mine, others, ranked, position in self.strata:
            n = mine.shape[0]
            for level, alpha in enumerate(alphas):
                if n:
                    k = math.ceil(n * (1 - alpha))  # the rank among the other n - 1 scores
                    below = position < k  # removing a score below the k-th shifts the k-th up by one
                    shifted = ranked[k] if k < n else math.inf
                    kept = ranked[k - 1] if k <= n - 1 else math.inf
                    out[level, mine] = np.where(below, shifted, kept)
                k_all = threshold_rank(n, alpha)
                out[level, others] = ranked[k_all - 1] if 1 <= k_all <= n else math.inf
        return out


SIZE_TABLE_ENTRIES = 1 << 20
"""Scores :func:`set_size_table` buckets at a time (bounded temporaries, whatever the table's size)."""
SIZE_TABLE_VALUES = 4096
"""Beyond this many distinct thresholds, :func:`set_size_table` counts level by level."""


def set_size_table(sorted_scores: np.ndarray, pool_sizes: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """:func:`set_sizes` at several thresholds per document, shape ``(L, n)`` for thresholds of shape ``(L, n)``,
    in one pass over the scores.

    Thresholds are few distinct values (one or two per stratum and level), so each score is placed once among
    them (its bucket), each row's buckets are counted, and a set's size is the count of its row's scores in the
    buckets at or below its threshold: the count :func:`set_sizes` makes, level by level, with the same tolerance.
    """
    thresholds = np.asarray(thresholds, dtype=float)
    n = sorted_scores.shape[0]
    q = within_tolerance(thresholds)
    values = np.unique(q[np.isfinite(q)])
    if values.size > SIZE_TABLE_VALUES or np.isneginf(q).any():
        return np.array([set_sizes(sorted_scores, pool_sizes, row) for row in thresholds], dtype=np.int64)
    width = values.size + 1  # bucket b: the scores above the first b values (the last: above them all)
    where = np.searchsorted(values, np.where(np.isfinite(q), q, values[-1] if values.size else 0.0))
    sizes = np.empty(thresholds.shape, dtype=np.int64)
    step = max(1, SIZE_TABLE_ENTRIES // max(sorted_scores.shape[1], 1))
    for start in range(0, n, step):
        stop = min(n, start + step)
        block = sorted_scores[start:stop]
        bucket = np.searchsorted(values, block, side="left")  # a score <= values[j] exactly when j >= its bucket
        rows = np.arange(stop - start)[:, None]
        counts = np.bincount((rows * width + bucket).ravel(), minlength=(stop - start) * width)
        at_most = np.cumsum(counts.reshape(stop - start, width), axis=1)  # at_most[r, j]: scores <= values[j]
        sizes[:, start:stop] = at_most[np.arange(stop - start)[None, :], where[:, start:stop]]
    infinite = np.isposinf(q)
    sizes[infinite] = np.broadcast_to(np.asarray(pool_sizes)[None, :], sizes.shape)[infinite]
    return np.minimum(sizes, np.asarray(pool_sizes)[None, :])
