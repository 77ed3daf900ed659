"""The release policy: which set sizes and linkage probabilities are flagged, by which rule, and the rule stated once
(the worklist of the flagged documents: tests/report/test_worklist.py)."""

import numpy as np
import pytest

from cpa_core.audit.policy import ReleasePolicy


def test_leakage_and_flags():
    sizes = np.array([0, 1, 5, 11, 40])
    assert ReleasePolicy(11).flags(sizes).tolist() == [True, True, True, False, False]
    assert ReleasePolicy(2, leakage_threshold=0.1).flags(sizes).tolist() == [True, True, True, False, False]
    assert ReleasePolicy(1).flags(sizes).tolist() == [True, False, False, False, False]


def test_a_linkage_probability_above_the_acceptable_rate_flags_whatever_the_set():
    sizes = np.array([0, 5, 40, 40, 40])
    linkage = np.array([0.01, 0.5, 1 / 11, 0.0910, 0.5])
    policy = ReleasePolicy(11)
    assert policy.linkage_rate == pytest.approx(1 / 11)  # the default: 1/k
    assert policy.flags(sizes, linkage).tolist() == [True, True, False, True, True]  # 1/11 itself is acceptable
    assert policy.reasons(sizes, linkage).tolist() == ["set", "set+linkage", "", "linkage", "linkage"]
    declared = ReleasePolicy(11, acceptable_linkage=0.4)
    assert declared.reasons(sizes, linkage).tolist() == ["set", "set+linkage", "", "", "linkage"]
    assert policy.flags(sizes).tolist() == [True, True, False, False, False]  # no probability: the set rule alone


def test_the_rule_is_stated_once():
    assert ReleasePolicy(11).rule == "|C| < 11 or linkage > 0.0909"
    assert ReleasePolicy(3, 0.09, 0.05).rule == "|C| < 3 or leakage > 0.09 or linkage > 0.05"
    sentence = ReleasePolicy(3, 0.09).sentence
    assert "fewer than 3 people" in sentence and "0.09" in sentence and "linkage probability exceeds" in sentence
    assert ReleasePolicy(4).to_dict() == {"flag_below": 4, "leakage_threshold": None, "acceptable_linkage": 0.25}
