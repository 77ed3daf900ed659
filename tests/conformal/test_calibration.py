"""The threshold, the sets and p-values: hand-computed cases, brute force and properties."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.common.errors import ConfigError
from cpa_core.conformal.calibration import (
    alpha_from_confidence,
    calibrate,
    confidence_label,
    conformal_threshold,
    minimum_calibration_size,
    p_values,
    set_sizes,
    threshold_rank,
)


def test_threshold_rank_is_exact_where_floating_point_is_not():
    # (99 + 1) * (1 - 0.45) is 55.000000000000014 in floating point, whose ceiling is 56.
    assert math.ceil(100 * (1 - 0.45)) == 56
    assert threshold_rank(99, 0.45) == 55
    # 0.3 in binary is slightly below 3/10; read as written, (9 + 1) * 0.7 = 7 exactly.
    assert threshold_rank(9, 0.3) == 7
    assert threshold_rank(9, 0.1) == 9
    assert threshold_rank(8, 0.1) == 9  # > n: infinite threshold
    assert threshold_rank(19, Fraction(1, 20)) == 19


def test_alpha_and_labels_read_decimals_as_written():
    assert alpha_from_confidence(0.95) == Fraction(1, 20)
    assert alpha_from_confidence("0.9") == Fraction(1, 10)
    assert confidence_label(0.95) == "0.95"
    assert confidence_label(0.9) == "0.9"
    assert confidence_label(Fraction(1, 3)) == repr(1 / 3)
    for bad in (0, 1, 1.5, -0.1, float("nan"), "x", True):
        with pytest.raises(ConfigError):
            alpha_from_confidence(bad)


def test_threshold_hand_computed():
    scores = np.array([0.1, 0.4, 0.2, 0.3, 0.5])
    assert conformal_threshold(scores, 0.2) == 0.5   # k = ceil(6 * 0.8) = 5
    assert conformal_threshold(scores, 0.5) == 0.3   # k = ceil(6 * 0.5) = 3
    assert conformal_threshold(scores, 0.34) == 0.4  # k = ceil(6 * 0.66) = ceil(3.96) = 4
    assert conformal_threshold(scores, 0.1) == math.inf  # k = ceil(5.4) = 6 > 5


def test_threshold_with_tied_and_infinite_scores():
    scores = np.array([0.3, 0.3, 0.3, np.inf, 0.1])
    assert conformal_threshold(scores, 0.5) == 0.3   # k = 3 -> sorted [0.1, 0.3, 0.3, 0.3, inf][2]
    assert conformal_threshold(scores, 0.2) == math.inf  # k = 5 -> the miss


def test_empty_calibration_gives_infinite_threshold():
    assert conformal_threshold(np.array([]), 0.5) == math.inf


def _brute_force_rank(n: int, alpha: Fraction) -> int:
    """The smallest k with k >= (n + 1)(1 - alpha), found by counting up in integers."""
    k = 0
    while k * alpha.denominator < (n + 1) * (alpha.denominator - alpha.numerator):
        k += 1
    return k


def test_threshold_rank_brute_force_all_n_up_to_300():
    alphas = [Fraction(i, 1000) for i in range(1, 1000, 7)] + [Fraction(45, 100), Fraction(1, 3), Fraction(1, 20)]
    for n in range(0, 301):
        for alpha in alphas:
            assert threshold_rank(n, alpha) == _brute_force_rank(n, alpha), (n, alpha)


def test_threshold_equals_brute_force_quantile():
    rng = np.random.default_rng(0)
    for n in range(1, 120):
        scores = np.round(rng.random(n), 2)  # ties included
        for alpha in (0.01, 0.05, 0.1, 0.2, 0.45, 0.5, 0.9):
            k = _brute_force_rank(n, Fraction(repr(alpha)))
            # smallest calibration score q with #{T_i <= q} >= k
            candidates = [q for q in sorted(scores) if np.sum(scores <= q) >= k]
            expected = candidates[0] if candidates and k <= n else math.inf
            assert conformal_threshold(scores, alpha) == expected


def test_calibrate_notes_when_too_small_and_never_warns(recwarn):
    calibration = calibrate(np.linspace(0, 1, 50), [0.90, 0.99])
    assert math.isfinite(calibration.q_hat(0.90))
    assert calibration.q_hat(0.99) == math.inf
    assert "needs at least 99" in calibration.notes_for(0.99)[0] and not calibration.notes_for(0.90)
    assert len(recwarn) == 0  # one channel: the notes, not Python warnings
    assert minimum_calibration_size(Fraction(1, 100)) == 99


def test_mondrian_calibration_is_per_stratum():
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7, 0.6])
    strata = ["a"] * 4 + ["b"] * 4
    calibration = calibrate(scores, [0.5], strata)  # k = ceil(5 * 0.5) = 3 within each stratum
    assert calibration.q_hat(0.5, "a") == 0.3
    assert calibration.q_hat(0.5, "b") == 0.8
    assert calibration.n_ == {"a": 4, "b": 4}
    q = calibration.thresholds_for(0.5, ["b", "a", "unseen"], 3)
    assert q.tolist() == [0.8, 0.3, math.inf]


def test_set_sizes_count_scores_up_to_threshold_within_pool():
    sorted_scores = np.array([[0.5, 0.9, 0.9, 1.0], [0.2, 0.6, np.inf, np.inf]])
    pools = np.array([4, 2])
    assert set_sizes(sorted_scores, pools, 0.9).tolist() == [3, 2]
    assert set_sizes(sorted_scores, pools, 0.59).tolist() == [1, 1]
    assert set_sizes(sorted_scores, pools, 0.49).tolist() == [0, 1]
    assert set_sizes(sorted_scores, pools, np.inf).tolist() == [4, 2]  # padding never enters
    assert set_sizes(sorted_scores, pools, np.array([1.0, 0.6])).tolist() == [4, 2]


def test_p_values_hand_computed():
    cal = np.sort(np.array([0.1, 0.2, 0.3, 0.4]))
    # p(s) = (1 + #{T_i >= s}) / 5
    assert p_values(cal, np.array([0.05, 0.2, 0.35, 0.5])).tolist() == [1.0, 0.8, 0.4, 0.2]


scores_strategy = st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=60)
alpha_strategy = st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.3, 0.45, 0.5, 0.8])


@given(scores_strategy, alpha_strategy)
def test_threshold_is_a_calibration_score_or_infinite(scores, alpha):
    q = conformal_threshold(np.array(scores), alpha)
    assert q == math.inf or q in scores


@given(scores_strategy, alpha_strategy, st.randoms())
def test_threshold_is_permutation_invariant(scores, alpha, random):
    shuffled = list(scores)
    random.shuffle(shuffled)
    assert conformal_threshold(np.array(scores), alpha) == conformal_threshold(np.array(shuffled), alpha)


@settings(max_examples=60)
@given(scores_strategy, st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=12))
def test_sets_grow_with_confidence(cal, candidate_scores):
    row = np.sort(np.array(candidate_scores))[None, :]
    pool = np.array([row.shape[1]])
    calibration = calibrate(np.array(cal), [0.5, 0.8, 0.9, 0.95, 0.99])
    sizes = [set_sizes(row, pool, calibration.q_hat(c))[0] for c in (0.5, 0.8, 0.9, 0.95, 0.99)]
    assert sizes == sorted(sizes)


@settings(max_examples=80)
@given(scores_strategy, st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=12), alpha_strategy)
def test_membership_by_threshold_equals_membership_by_p_value(cal, candidate_scores, alpha):
    cal = np.array(cal)
    candidates = np.array(candidate_scores)
    q = conformal_threshold(cal, alpha)
    n = cal.shape[0]
    at_least = np.round(p_values(np.sort(cal), candidates) * (n + 1)).astype(int) - 1
    # p > alpha  <=>  1 + #{T >= s} > alpha (n + 1), compared exactly
    by_p = (1 + at_least) * Fraction(repr(alpha)).denominator > Fraction(repr(alpha)).numerator * (n + 1)
    assert ((candidates <= q) == by_p).all()


# --- certifying a whole release: leave-one-out thresholds ---------------------------------------------------

def _brute_loo(scores, members, confidence):
    from fractions import Fraction

    alpha = 1 - Fraction(str(confidence))
    member_scores = [s for s, m in zip(scores, members) if m]
    n = len(member_scores)
    out = []
    for i, (score, member) in enumerate(zip(scores, members)):
        if member:
            others = sorted(member_scores[:sum(members[:i])] + member_scores[sum(members[:i]) + 1:])
            k = math.ceil(n * (1 - alpha))
        else:
            others = sorted(member_scores)
            k = math.ceil((n + 1) * (1 - alpha))
        out.append(others[k - 1] if 1 <= k <= len(others) else math.inf)
    return out


def test_leave_one_out_by_hand():
    from cpa_core.conformal.calibration import leave_one_out_thresholds

    scores = np.array([0.1, 0.4, 0.2, 0.3, 9.0])
    members = np.array([True, True, True, True, False])
    # n = 4, confidence 0.5: k = ceil(4 * 0.5) = 2 among the other three; the outsider: ceil(5 * 0.5) = 3 of four
    assert leave_one_out_thresholds(scores, members, 0.5).tolist() == [0.3, 0.2, 0.3, 0.2, 0.3]
    assert leave_one_out_thresholds(scores, members, 0.5).tolist() == _brute_loo(scores.tolist(), members.tolist(), 0.5)


@settings(max_examples=150)
@given(st.lists(st.sampled_from([0.1, 0.2, 0.3, 0.5, 0.8, math.inf]), min_size=1, max_size=25), st.data(),
       st.sampled_from([0.5, 0.6, 0.8, 0.9, 0.95]))
def test_leave_one_out_equals_brute_force_with_ties(scores, data, confidence):
    from cpa_core.conformal.calibration import leave_one_out_thresholds

    members = [data.draw(st.booleans()) for _ in scores]
    got = leave_one_out_thresholds(np.array(scores), np.array(members), confidence).tolist()
    assert got == _brute_loo(scores, members, confidence)


def test_a_document_s_own_score_never_enters_its_threshold():
    from cpa_core.conformal.calibration import leave_one_out_thresholds

    rng = np.random.default_rng(2)
    scores = rng.random(50)
    members = np.ones(50, dtype=bool)
    base = leave_one_out_thresholds(scores, members, 0.9)
    for i in (0, 7, 33):
        moved = scores.copy()
        moved[i] = rng.random() * 10  # whatever document i scores, its own threshold does not move
        assert leave_one_out_thresholds(moved, members, 0.9)[i] == base[i]


def test_leave_one_out_per_stratum():
    from cpa_core.conformal.calibration import leave_one_out_thresholds

    scores = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9, 0.5])
    members = np.array([True, True, True, True, True, True, False])
    strata = ["a", "a", "a", "b", "b", "b", "c"]
    out = leave_one_out_thresholds(scores, members, 0.5, strata)
    # a, b: n = 3, k = ceil(1.5) = 2 among the other two; c has no member: no threshold
    assert out.tolist() == [0.3, 0.3, 0.2, 0.9, 0.9, 0.8, math.inf]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.1, 0.2, 0.3, 0.5, math.inf]), st.booleans(), st.sampled_from("abc")),
                min_size=1, max_size=30),
       st.lists(st.sampled_from([0.5, 0.6, 0.8, 0.9, 0.95, 0.99]), min_size=1, max_size=4))
def test_one_sort_serves_every_level_per_stratum(rows, confidences):
    """A ranking built once gives, at every level asked later, each stratum's brute-force leave-one-out thresholds;
    calibration scores grouped once give the thresholds of a fresh calibration at every level."""
    from cpa_core.conformal.calibration import CalibrationScores, LeaveOneOutRanking, calibrate

    scores, members, strata = (list(column) for column in zip(*rows))
    codes = np.unique(np.array(strata), return_inverse=True)[1]
    ranking = LeaveOneOutRanking(np.array(scores), np.array(members), codes)
    grouped = CalibrationScores(np.array(scores), strata)
    for confidence in confidences:
        expected = [math.inf] * len(scores)
        for stratum in set(strata):
            at = [i for i, s in enumerate(strata) if s == stratum]
            for i, value in zip(at, _brute_loo([scores[i] for i in at], [members[i] for i in at], confidence)):
                expected[i] = value
        assert ranking.thresholds([confidence])[0].tolist() == expected
        assert grouped.calibrate([confidence]) == calibrate(np.array(scores), [confidence], strata)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 25), st.integers(1, 9), st.integers(1, 6), st.integers(0, 2**32 - 1), st.sampled_from([3, 50, 1 << 20]),
       st.sampled_from([1, 4096]))
def test_set_size_table_counts_as_set_sizes_level_by_level(n, width, levels, seed, entries, values):
    """Ties with the thresholds (within tolerance), padding, infinite thresholds, blocks of any size, and the
    level-by-level path when there are many distinct thresholds."""
    from unittest.mock import patch

    import cpa_core.conformal.calibration as conformal

    rng = np.random.default_rng(seed)
    grid = np.round(rng.random(12) - 1.0, 2)  # few values: ties between scores and thresholds
    scores = np.sort(rng.choice(grid, size=(n, width)), axis=1)
    pools = rng.integers(0, width + 1, size=n)
    scores[np.arange(width)[None, :] >= pools[:, None]] = np.inf
    thresholds = rng.choice(np.append(grid, np.inf), size=(levels, n))
    thresholds[:, ::3] *= 1 + 1e-16  # within the tolerance of a score
    expected = np.array([set_sizes(scores, pools, row) for row in thresholds])
    with patch.object(conformal, "SIZE_TABLE_ENTRIES", entries), patch.object(conformal, "SIZE_TABLE_VALUES", values):
        assert np.array_equal(conformal.set_size_table(scores, pools, thresholds), expected)


def test_the_notes_of_many_one_document_strata_are_said_in_one_line_per_level():
    """1,000 one-document groups: every group keeps its note (kind, size, size needed), and the notes at a level
    read as one line with their count and a few of the groups, not 1,000 lines."""
    from cpa_core.conformal.calibration import NOTES_NAMED, TOO_SMALL

    strata = [f"g{i}" for i in range(1000)]
    calibration = calibrate(np.linspace(0, 1, 1000), [0.9, 0.95], strata=strata)
    assert len(calibration.notes_) == 2000
    assert {(note.kind, note.n) for note in calibration.notes_} == {(TOO_SMALL, 1)}
    assert [note.needed for note in calibration.notes_[::1000]] == [9, 19]
    [said] = calibration.notes_for(0.9)
    assert said == ("calibration set too small for confidence 0.9 in 1,000 groups ('g0', 'g1', 'g2', …): n = 1 each, "
                    "needs at least 9; their thresholds are infinite and every set in them is the whole pool")
    assert len(calibration.notes_for(0.95)) == 1 and "1,000 groups" in calibration.notes_for(0.95)[0]
    few = calibrate(np.linspace(0, 1, 10), [0.9], strata=[f"g{i % NOTES_NAMED}" for i in range(10)])
    assert len(few.notes_for(0.9)) == NOTES_NAMED  # a few strata: each said with its own figures
    mixed = calibrate(np.linspace(0, 1, 12), [0.9], strata=["a"] * 3 + [f"s{i} · certainty 1 of 2" for i in range(9)])
    assert mixed.notes_for(0.9)[0].startswith("calibration set too small for confidence 0.9 in 10 strata ('a', "
                                              "'s0 · certainty 1 of 2', 's1 · certainty 1 of 2', …): n from 1 to 3")
