"""Certainty strata: quantile bins over every document, merged until each holds enough calibration documents."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.conformal.strata import certainty_bins, quantile_cuts


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


def test_bins_with_too_few_calibration_documents_are_merged_into_their_smaller_neighbour():
    members = np.array([1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1], dtype=bool)  # bin 1 (3..5) holds one member
    bins = certainty_bins(np.arange(12.0), members, 4, 3)
    # bin 1 (1 member) joins bin 0 (3) rather than bin 2 (3)? equal neighbours: the lower one
    assert bins.codes.tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2] and bins.members == (4, 3, 3)
    assert certainty_bins(np.arange(12.0), members, 4, 5).members == (10,)  # 4 | 6 after a merge: merged again
    one = certainty_bins(np.arange(12.0), members, 4, 100)  # too few for two bins: one
    assert one.count == 1 and one.codes.tolist() == [0] * 12 and one.members == (10,)


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
    if bins.count > 1:
        assert min(bins.members) >= min_members
    assert sum(bins.sizes) == len(values) and sum(bins.members) == members.sum()
    permutation = np.random.default_rng(seed).permutation(len(values))  # the order of the documents does not matter
    again = certainty_bins(values[permutation], members[permutation], n_bins, min_members)
    assert again.codes.tolist() == bins.codes[permutation].tolist()
