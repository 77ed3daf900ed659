"""Certainty strata: quantile bins over every document, merged until each is expected to hold enough calibration
documents, whichever documents those are."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.conformal.strata import certainty_bins, holds_enough, quantile_cuts


def test_quantile_bins_hand_computed():
    bins = certainty_bins(np.arange(12.0), np.ones(12, dtype=bool), 4, 3)
    assert bins.codes.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert bins.edges == ((0, 2), (3, 5), (6, 8), (9, 11)) and bins.members == (3, 3, 3, 3)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 400), st.integers(1, 60))
def test_quantile_cuts_are_the_ceil_order_statistics(n, parts):
    """The j-th cut is the ceil(N j / parts)-th smallest value, in exact arithmetic (hand-checkable with values 1..N)."""
    from fractions import Fraction
    from math import ceil

    values = np.arange(1.0, n + 1)[::-1]
    expected = sorted({ceil(Fraction(n * j, parts)) for j in range(1, parts)})
    assert quantile_cuts(values, parts).tolist() == expected


def test_enough_is_the_expected_count_but_for_three_standard_deviations_by_hand():
    assert holds_enough(3, 1.0, 3) and not holds_enough(2, 1.0, 3)  # every document calibrates: the exact count
    assert not holds_enough(20, 0.5, 5)  # 10 - 3 sqrt(5) = 3.29
    assert holds_enough(40, 0.5, 5)  # 20 - 3 sqrt(10) = 10.51
    assert not holds_enough(100, 0.0, 0)  # nothing calibrates: never enough, even for none


def test_bins_expected_to_hold_too_few_are_merged_into_their_smaller_neighbour():
    every = np.ones(12, dtype=bool)
    # quarters of 3: with 5 needed, bin 0 joins bin 1 (its only neighbour), then bin 1 (3) joins bin 2 (3, the
    # smaller neighbour of 6 | 3 | 3)
    bins = certainty_bins(np.arange(12.0), every, 4, 5)
    assert bins.codes.tolist() == [0] * 6 + [1] * 6 and bins.sizes == (6, 6) and bins.members == (6, 6)
    one = certainty_bins(np.arange(12.0), every, 4, 100)  # too few for two bins: one
    assert one.count == 1 and one.codes.tolist() == [0] * 12 and one.members == (12,)
    # 120 documents, 60 of them calibrating, 5 needed: quarters of 30 hold enough (15 - 3 sqrt(7.5) = 6.78), whichever
    # 60 calibrate, even all from the first two quarters (the counts say so; those bins' thresholds are infinite)
    values = np.arange(120.0)
    lopsided = certainty_bins(values, values < 60, 4, 5)
    assert lopsided.sizes == (30, 30, 30, 30) and lopsided.members == (30, 30, 0, 0)
    assert certainty_bins(values, values % 2 == 0, 4, 5).codes.tolist() == lopsided.codes.tolist()
    # 9 needed: 15 - 8.2 = 6.8 is too few, halves hold 30 - 3 sqrt(15) = 18.4: two bins
    assert certainty_bins(values, values % 2 == 0, 4, 9).sizes == (60, 60)


def test_ties_and_a_constant_statistic():
    bins = certainty_bins(np.array([0.0] * 8 + [1.0, 2.0]), np.ones(10, dtype=bool), 4, 1)
    assert bins.codes.tolist() == [0] * 8 + [1, 1] and bins.count == 2  # the quartiles are all 0: one edge
    assert certainty_bins(np.ones(5), np.ones(5, dtype=bool), 4, 1).count == 1
    assert certainty_bins(np.zeros(0), np.zeros(0, dtype=bool), 4, 1).count == 0
    with pytest.raises(ValueError):
        certainty_bins(np.ones(3), np.ones(3, dtype=bool), 0, 1)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.booleans()), min_size=1, max_size=80), st.integers(1, 6),
       st.integers(1, 15), st.integers(0, 2**32 - 1))
def test_bins_are_contiguous_big_enough_and_a_function_of_the_bag(pairs, n_bins, min_members, seed):
    values = np.array([v for v, _ in pairs], dtype=float)
    members = np.array([m for _, m in pairs], dtype=bool)
    bins = certainty_bins(values, members, n_bins, min_members)
    assert 1 <= bins.count <= n_bins
    order = np.argsort(values, kind="stable")
    assert (np.diff(bins.codes[order]) >= 0).all()  # contiguous in the statistic
    share = members.sum() / len(values)
    if bins.count > 1:
        assert all(holds_enough(size, share, min_members) for size in bins.sizes)
    assert sum(bins.sizes) == len(values) and sum(bins.members) == members.sum()
    rng = np.random.default_rng(seed)
    permutation = rng.permutation(len(values))  # the order of the documents does not matter
    again = certainty_bins(values[permutation], members[permutation], n_bins, min_members)
    assert again.codes.tolist() == bins.codes[permutation].tolist()
    # nor which of them calibrate: a document that does not and one that does are placed alike
    others = certainty_bins(values, rng.permutation(members), n_bins, min_members)
    assert others.codes.tolist() == bins.codes.tolist()
