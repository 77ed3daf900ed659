"""Calibration/test splits: disjoint, sized, seeded, stratified."""

import numpy as np
import pytest

from cpa_core.common.errors import ConfigError
from cpa_core.io.split import split_indices


def test_split_is_disjoint_sized_and_seeded():
    cal, test = split_indices(100, 30, 50, seed=5)
    assert len(cal) == 30 and len(test) == 50 and not set(cal) & set(test)
    again = split_indices(100, 30, 50, seed=5)
    assert (again[0] == cal).all() and (again[1] == test).all()
    assert not (split_indices(100, 30, 50, seed=6)[0] == cal).all()


def test_stratified_split_is_proportional_and_exact():
    strata = ["a"] * 60 + ["b"] * 30 + ["c"] * 10
    cal, test = split_indices(100, 40, 50, seed=1, strata=strata)
    labels = np.array(strata)
    assert len(cal) == 40 and len(test) == 50 and not set(cal) & set(test)
    assert [int((labels[cal] == g).sum()) for g in "abc"] == [24, 12, 4]
    assert [int((labels[test] == g).sum()) for g in "abc"] == [30, 15, 5]


@pytest.mark.parametrize("n_cal,n_test", [(60, 50), (0, 10), (10, 0)])
def test_impossible_split_sizes_are_config_errors(n_cal, n_test):
    with pytest.raises(ConfigError):
        split_indices(100, n_cal, n_test, seed=0)
