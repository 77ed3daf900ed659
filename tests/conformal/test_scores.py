"""Nonconformity scores: hand-computed cases, ties, padding and monotonicity."""

from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.common.errors import ConfigError
from cpa_core.conformal import scores as score_module
from cpa_core.conformal.scores import SCORES, get_score


def scores(name, weights, pools=None):
    w = np.atleast_2d(np.array(weights, dtype=float))
    pools = np.full(w.shape[0], w.shape[1]) if pools is None else np.array(pools)
    return get_score(name).to_method(get_score(name).sorted_scores(w, pools))


def test_aps_hand_computed_with_ties():
    # s(y) = mass of every candidate at least as likely as y: ties enter together
    assert np.allclose(scores("aps", [0.5, 0.2, 0.2, 0.1]), [[0.5, 0.9, 0.9, 1.0]])
    assert np.allclose(scores("aps", [0.4, 0.4, 0.1, 0.1]), [[0.8, 0.8, 1.0, 1.0]])


def test_rank_hand_computed_with_ties():
    assert scores("rank", [0.5, 0.2, 0.2, 0.1]).tolist() == [[1, 3, 3, 4]]
    assert scores("rank", [0.3, 0.3, 0.3, 0.1]).tolist() == [[3, 3, 3, 4]]
    # a ranking only: weights are minus the rank
    assert scores("rank", [-1, -2, -2, -4]).tolist() == [[1, 3, 3, 4]]


def test_probability_hand_computed():
    assert np.allclose(scores("probability", [0.5, 0.2, 0.2, 0.1]), [[0.5, 0.8, 0.8, 0.9]])


def test_padding_is_infinite_and_does_not_tie_with_zero_weights():
    out = scores("aps", [[0.7, 0.3, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]], pools=[2, 3])
    assert np.allclose(out[0], [0.7, 1.0, np.inf, np.inf])
    assert np.allclose(out[1], [1.0, 1.0, 1.0, np.inf])


def test_unknown_score_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown score 'foo'"):
        get_score("foo")


@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=30), st.sampled_from(sorted(SCORES)))
def test_scores_are_non_decreasing_and_tie_consistent(raw, name):
    w = np.sort(np.array(raw))[::-1]
    w = w / w.sum() if w.sum() > 0 else w
    out = scores(name, w)[0]
    if len(w) >= 2 and w[0] == w[-1]:  # a fully tied pool: no information, the lowest score throughout
        assert np.isneginf(out).all()
        return
    assert (np.diff(out) >= -1e-12).all()
    for i in range(len(w) - 1):
        if w[i] == w[i + 1]:
            assert out[i] == out[i + 1]


@given(st.lists(st.floats(0.001, 1), min_size=2, max_size=30))
def test_aps_brute_force(raw):
    w = np.sort(np.array(raw))[::-1]
    w = w / w.sum()
    expected = [w[w >= w[j]].sum() for j in range(len(w))] if w[0] != w[-1] else [-np.inf] * len(w)
    assert np.allclose(scores("aps", w)[0], expected)


@given(st.lists(st.lists(st.sampled_from([0.0, 0.05, 0.1, 0.2, 0.25, 0.4]), min_size=3, max_size=3), min_size=1,
                max_size=8), st.sampled_from(sorted(SCORES)), st.data())
def test_truth_scores_from_the_unsorted_matrix_equal_the_sorted_path(rows, name, data):
    from cpa_core.attack.candidates import top_candidates

    weights = np.array(rows, dtype=float)
    truth = np.array([data.draw(st.integers(0, 2)) for _ in rows])
    index, ranked = top_candidates(weights, None)
    sorted_scores = get_score(name).sorted_scores(ranked, np.full(len(rows), 3))
    position = np.argmax(index == truth[:, None], axis=1)
    expected = sorted_scores[np.arange(len(rows)), position]
    assert np.allclose(get_score(name).truth_scores(weights, truth), expected, atol=1e-15)


# --- resolution and exact ties ------------------------------------------------------------------------------

def test_a_peaked_tail_keeps_its_order():
    # masses far below 1e-12: the METHOD's scale rounds them all to 1.0; the stored scale keeps them apart
    w = np.array([[1 - 3e-20, 2e-20, 1e-20, 0.0]])
    stored = get_score("aps").sorted_scores(w, np.array([4]))[0]
    assert stored.tolist() == pytest.approx([-3e-20, -1e-20, 0.0, 0.0], rel=1e-15, abs=0)
    assert (get_score("aps").to_method(stored)[1:] == 1.0).all()  # what a display shows


@pytest.mark.parametrize("name", sorted(SCORES))
def test_a_fully_tied_pool_scores_lowest_so_its_set_is_the_whole_pool(name):
    from cpa_core.conformal.calibration import set_sizes

    w = np.array([[0.25, 0.25, 0.25, 0.25], [0.4, 0.3, 0.2, 0.1], [0.5, 0.5, 0.0, 0.0]])
    pools = np.array([4, 4, 2])
    stored = get_score(name).sorted_scores(w, pools)
    assert np.isneginf(stored[0]).all() and np.isneginf(stored[2, :2]).all() and np.isinf(stored[2, 2:]).all()
    assert np.isfinite(stored[1]).all()
    # any threshold: the tied pools' sets are whole, never empty (the lowest finite APS threshold included)
    assert set_sizes(stored, pools, -1.0).tolist()[0::2] == [4, 2]
    assert get_score(name).truth_scores(w[:1], np.array([2])).tolist() == [-np.inf]
    # one candidate is not a tie; a tied shortlist with mass below it is not a fully tied pool
    assert np.isfinite(get_score(name).sorted_scores(np.array([[1.0]]), np.array([1]))).all()
    assert np.isfinite(get_score(name).sorted_scores(np.array([[0.3, 0.3]]), np.array([2]), np.array([0.4]))).all()
    # the whole pool tied through a shortlist cut at the tie: two listed, two cut, nothing below
    stored = get_score(name).sorted_scores(np.array([[0.25, 0.25]]), np.array([2]), np.array([0.0]), np.array([2]))
    assert np.isneginf(stored).all()


def test_a_tiny_mass_below_a_tie_at_the_cut_keeps_its_precision():
    """Weights 1 - 2e-30 - 1e-60 (top), 1e-30, 1e-30 and 1e-60, cut after the second: the last kept candidate's APS
    mass below is 1e-60 (not 0, as subtracting the tied mass from the whole tail would give)."""
    from cpa_core.attack.candidates import CandidateTable

    full = CandidateTable(np.array(["d"], dtype=object), np.array([[0, 1, 2, 3]]),
                          np.array([[1 - 2e-30 - 1e-60, 1e-30, 1e-30, 1e-60]]), np.array([4]),
                          np.array(["r0", "r1", "r2", "r3"], dtype=object))
    short = full.truncate(2)
    assert short.cut_ties.tolist() == [1] and short.tail_mass.tolist() == [1e-60]
    whole = get_score("aps").sorted_scores(full.weights, full.pool_sizes)[0]
    kept = get_score("aps").sorted_scores(short.weights, short.pool_sizes, short.tail_mass, short.cut_ties)[0]
    assert kept.tolist() == pytest.approx(whole[:2].tolist(), rel=1e-12) and kept[1] == -1e-60


def test_the_cut_mass_tied_with_a_kept_candidate_counts_at_or_above_it():
    """Weights .4/.3/.3 with top-K 2: the cut .3 ties with the kept .3, so the kept one's APS is 1.0 (not .7) and its
    rank 3 (not 2), as without the shortlist; at q_hat = .7 the set is {r0} either way."""
    from cpa_core.attack.candidates import CandidateTable
    from cpa_core.conformal.calibration import set_sizes

    full = CandidateTable(np.array(["d"], dtype=object), np.array([[0, 1, 2]]), np.array([[0.4, 0.3, 0.3]]),
                          np.array([3]), np.array(["r0", "r1", "r2"], dtype=object))
    short = full.truncate(2)
    assert short.cut_ties.tolist() == [1] and short.tail_mass.tolist() == [0.0]  # the tied .3 is no tail: its group
    for name in ("aps", "rank"):
        whole = get_score(name).sorted_scores(full.weights, full.pool_sizes)
        kept = get_score(name).sorted_scores(short.weights, short.pool_sizes, short.tail_mass, short.cut_ties)
        assert kept[0].tolist() == pytest.approx(whole[0, :2].tolist())
    aps = get_score("aps")
    kept = aps.sorted_scores(short.weights, short.pool_sizes, short.tail_mass, short.cut_ties)
    assert set_sizes(kept, short.pool_sizes, -0.3 + 1e-12).tolist() == [1]  # q_hat = .7 on the stored scale
    from cpa_core.conformal.scores import tie_pessimistic_ranks
    assert tie_pessimistic_ranks(short.weights, short.pool_sizes, np.array([1]), short.cut_ties).tolist() == [3]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.05, 0.1, 0.15, 0.2]), min_size=6, max_size=6), min_size=1,
                max_size=6), st.integers(1, 5), st.sampled_from(sorted(SCORES)), st.integers(0, 5))
def test_a_shortlist_never_changes_the_scores_it_keeps(rows, k, name, truth):
    """Random pools with many ties: every kept candidate's score (and the truth's rank) is the same with and without
    a top-K cut, twice truncated included."""
    from cpa_core.attack.candidates import CandidateTable, top_candidates
    from cpa_core.conformal.scores import tie_pessimistic_ranks

    raw = np.array(rows, dtype=float) + 1e-3
    weights = raw / raw.sum(axis=1, keepdims=True)
    index, ranked = top_candidates(weights, None)
    n = len(rows)
    full = CandidateTable(np.arange(n).astype(str).astype(object), index, ranked, np.full(n, 6),
                          np.arange(6).astype(str).astype(object))
    for short in (full.truncate(k), full.truncate(min(k + 1, 6)).truncate(k)):
        whole = get_score(name).sorted_scores(full.weights, full.pool_sizes)
        kept = get_score(name).sorted_scores(short.weights, short.pool_sizes, short.tail_mass, short.cut_ties)
        both = np.isfinite(whole[:, :k])
        assert np.array_equal(np.isneginf(kept), np.isneginf(whole[:, :short.width]))
        assert np.allclose(kept[both[:, :short.width]], whole[:, :short.width][both[:, :short.width]], rtol=1e-12,
                           atol=1e-15)
        position = np.argmax(full.candidates == truth, axis=1)
        inside = position < short.width
        ranks_full = tie_pessimistic_ranks(full.weights, full.pool_sizes, position)
        ranks_short = tie_pessimistic_ranks(short.weights, short.pool_sizes, np.minimum(position, short.width - 1),
                                            short.cut_ties)
        assert ranks_short[inside].tolist() == ranks_full[inside].tolist()


def test_the_shortlist_tail_counts_below_every_kept_candidate():
    w = np.array([[0.5, 0.2]])
    stored = get_score("aps").sorted_scores(w, np.array([2]), tail_mass=np.array([0.3]))[0]
    assert get_score("aps").to_method(stored).tolist() == pytest.approx([0.5, 0.7])


def _exact_sets(rows, truths, n_cal, confidence):
    """Brute force in exact arithmetic from the decimals as written: APS of every candidate, the
    k-th smallest calibration score, and each test document's set size."""
    import math
    from fractions import Fraction

    def aps(row):
        exact = [Fraction(v) for v in row]
        return [sum(e for e in exact if e >= exact[j]) for j in range(len(row))]

    cal = sorted(aps(row)[t] for row, t in zip(rows[:n_cal], truths[:n_cal]))
    k = math.ceil((n_cal + 1) * Fraction(str(confidence)))
    q = cal[k - 1] if k <= n_cal else None
    return [len(row) if q is None else sum(s <= q for s in aps(row)) for row in rows[n_cal:]]


def _float_sets(rows, truths, n_cal, confidence):
    from cpa_core.conformal.calibration import calibrate, set_sizes

    weights = np.array([[float(v) for v in row] for row in rows])
    order = np.argsort(-weights, axis=1, kind="stable")
    ranked = np.take_along_axis(weights, order, axis=1)
    pools = np.full(len(rows), weights.shape[1])
    stored = get_score("aps").sorted_scores(ranked, pools)
    position = np.argmax(order == np.array(truths)[:, None], axis=1)
    truth_scores = stored[np.arange(len(rows)), position]
    calibration = calibrate(truth_scores[:n_cal], [confidence])
    return set_sizes(stored[n_cal:], pools[n_cal:], calibration.q_hat(confidence)).tolist()


BOUNDARY_CASES = [
    # 0.6 + 0.3 and 0.5 + 0.4 are both 0.9: equal in exact arithmetic, not in floating point
    ([["0.6", "0.3", "0.1"], ["0.1", "0.6", "0.3"], ["0.5", "0.4", "0.1"], ["0.3", "0.2", "0.5"]], [1, 2, 1, 0]),
    # 1e-13 apart: a 12-decimal rounding merged them; exact arithmetic keeps them apart
    ([["0.5", "0.3000000000001", "0.1999999999999"], ["0.5", "0.3", "0.2"], ["0.5", "0.3", "0.2"],
      ["0.5", "0.3000000000002", "0.1999999999998"]], [1, 1, 0, 1]),
    # a peaked tail: 1e-15 and 2e-15 masses
    ([["0.999999999999997", "0.000000000000002", "0.000000000000001"], ["0.999999999999997", "0.000000000000001",
      "0.000000000000002"], ["0.999999999999998", "0.000000000000001", "0.000000000000001"]], [1, 2, 1]),
]


@pytest.mark.parametrize("rows,truths,n_cal,confidence", [
    (rows, truths, n_cal, confidence) for rows, truths in BOUNDARY_CASES
    for n_cal, confidence in ((2, 0.5), (2, 0.6), (3, 0.5), (3, 0.7)) if n_cal < len(rows)])
def test_sets_agree_with_exact_arithmetic_at_rounding_boundaries(rows, truths, n_cal, confidence):
    assert _float_sets(rows, truths, n_cal, confidence) == _exact_sets(rows, truths, n_cal, confidence)


# a distribution over 4 candidates in steps of 1/10,000, written as decimals: cut points of 10,000
distributions = st.lists(st.integers(0, 10_000), min_size=3, max_size=3).map(
    lambda cuts: [f"{(b - a) / 10_000:.4f}" for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), 10_000])])


@given(st.lists(distributions, min_size=3, max_size=12), st.data(), st.sampled_from([0.5, 0.6, 0.75, 0.8]))
def test_sets_agree_with_exact_arithmetic_on_decimal_weights(rows, data, confidence):
    truths = [data.draw(st.integers(0, 3)) for _ in rows]
    n_cal = len(rows) // 2
    assert _float_sets(rows, truths, n_cal, confidence) == _exact_sets(rows, truths, n_cal, confidence)


def test_a_sum_of_small_masses_equals_one_mass_of_the_same_decimal_value():
    # below the top: 0.1 + 0.1 + 0.1 in one document, 0.3 in the other; in floating point they are an ulp apart
    many, one = ["0.7", "0.1", "0.1", "0.1"], ["0.7", "0.3", "0", "0"]
    for rows in ([many, one], [one, many]):
        assert _float_sets(rows, [0, 0], 1, 0.5) == _exact_sets(rows, [0, 0], 1, 0.5) == [1]


def neumaier_loop(weights: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """Neumaier's compensated sum from the bottom of each row, one position at a time: the reference."""
    total, compensation = tail.astype(float).copy(), np.zeros(weights.shape[0])
    below = np.empty(weights.shape)
    for j in range(weights.shape[1] - 1, -1, -1):
        below[:, j] = total + compensation
        w = weights[:, j]
        summed = total + w
        compensation += np.where(np.abs(total) >= np.abs(w), (total - summed) + w, (w - summed) + total)
        total = summed
    return below


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 70), st.floats(0.01, 2.0), st.integers(0, 2**32 - 1), st.booleans())
def test_mass_below_equals_the_compensated_loop_bitwise(n, width, concentration, seed, with_tail):
    rng = np.random.default_rng(seed)
    raw = rng.standard_gamma(concentration, size=(n, width)) * 10.0 ** rng.integers(-30, 1, size=(n, width))
    weights = -np.sort(-raw / raw.sum(axis=1, keepdims=True), axis=1)
    tail = rng.random(n) * 1e-6 if with_tail else np.zeros(n)
    expected = neumaier_loop(weights, tail)
    for block in (1, 7, 1 << 16):  # row blocks of one row, a few rows, everything at once
        with patch.object(score_module, "MASS_BLOCK_ENTRIES", block * width):
            assert np.array_equal(score_module.mass_below(weights, tail), expected)
            assert np.array_equal(score_module.mass_below(weights, tail, negated=True), -expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.5]), min_size=1, max_size=8), min_size=1, max_size=10),
       st.data())
def test_tie_pessimistic_ranks_equal_the_rank_score(rows, data):
    width = max(map(len, rows))
    pools = np.array([len(r) for r in rows])
    weights = np.array([sorted(r, reverse=True) + [0.0] * (width - len(r)) for r in rows])
    positions = np.array([data.draw(st.integers(0, p - 1)) for p in pools])
    ranks = SCORES["rank"].sorted_scores(weights, pools)[np.arange(len(rows)), positions]
    tied = np.isneginf(ranks)  # a fully tied pool scores lowest; as a ranking metric its candidates share the worst rank
    ranks = np.where(tied, pools, ranks)
    assert score_module.tie_pessimistic_ranks(weights, pools, positions).tolist() == ranks.astype(int).tolist()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.5]), min_size=1, max_size=8), min_size=1, max_size=12),
       st.integers(1, 20))
def test_scores_do_not_depend_on_the_row_blocks(rows, block):
    """Ties, padding and pools of every size, scored a few rows at a time and all at once."""
    width = max(map(len, rows))
    pools = np.array([len(r) for r in rows])
    weights = np.array([sorted(r, reverse=True) + [0.0] * (width - len(r)) for r in rows])
    whole = {name: SCORES[name].sorted_scores(weights, pools) for name in ("aps", "rank")}
    positions = np.zeros(len(rows), dtype=np.int64)
    ranks = score_module.tie_pessimistic_ranks(weights, pools, positions)
    with patch.object(score_module, "MASS_BLOCK_ENTRIES", block):
        for name, expected in whole.items():
            assert np.array_equal(SCORES[name].sorted_scores(weights, pools), expected)
        assert np.array_equal(score_module.tie_pessimistic_ranks(weights, pools, positions), ranks)
