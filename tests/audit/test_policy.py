"""The release policy: which set sizes are flagged, and the rule stated once (the worklist of the flagged
documents: tests/report/test_worklist.py)."""

import numpy as np

from cpa_core.audit.policy import ReleasePolicy


def test_leakage_and_flags():
    sizes = np.array([0, 1, 5, 11, 40])
    assert ReleasePolicy(11).flags(sizes).tolist() == [True, True, True, False, False]
    assert ReleasePolicy(2, leakage_threshold=0.1).flags(sizes).tolist() == [True, True, True, False, False]
    assert ReleasePolicy(1).flags(sizes).tolist() == [True, False, False, False, False]


def test_the_rule_is_stated_once():
    assert ReleasePolicy(11).rule == "|C| < 11"
    assert ReleasePolicy(3, 0.09).rule == "|C| < 3 or leakage > 0.09"
    assert "fewer than 3 people" in ReleasePolicy(3, 0.09).sentence and "0.09" in ReleasePolicy(3, 0.09).sentence
