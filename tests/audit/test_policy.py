"""The release policy and the redaction worklist."""

import numpy as np
import pytest
from tables import audited_groups

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.report.worklist import neutralise_cell, worklist, worklist_csv


@pytest.fixture(scope="module")
def audited():
    return audited_groups()


def test_leakage_and_flags():
    sizes = np.array([0, 1, 5, 11, 40])
    assert ReleasePolicy(11).flags(sizes).tolist() == [True, True, True, False, False]
    assert ReleasePolicy(2, leakage_threshold=0.1).flags(sizes).tolist() == [True, True, True, False, False]
    assert ReleasePolicy(1).flags(sizes).tolist() == [True, False, False, False, False]


def test_the_rule_is_stated_once():
    assert ReleasePolicy(11).rule == "|C| < 11"
    assert ReleasePolicy(3, 0.09).rule == "|C| < 3 or leakage > 0.09"
    assert "fewer than 3 people" in ReleasePolicy(3, 0.09).sentence and "0.09" in ReleasePolicy(3, 0.09).sentence


def test_worklist_sorted_smallest_first_and_csv_neutralised(audited):
    result = audited[0]
    cert = result.certificate(0.8)
    frame = worklist(cert, ReleasePolicy(5), result.config.config_id)
    assert (np.diff(frame["set_size"].to_numpy()) >= 0).all()
    assert (frame["set_size"] < 5).all()
    assert len(frame) == int((cert.set_sizes < 5).sum())
    frame.at[0, "driving_terms"] = ["=cmd", "term"]  # words of a released text that a spreadsheet would run
    frame.at[0, "evidence"] = [{"offset": 3, "length": 4}, {"offset": 12, "length": 4}]
    text = worklist_csv(frame)
    assert "'=cmd; term" in text and ",3+4; 12+4," in text
    for value, expected in (("=1+1", "'=1+1"), ("+1", "'+1"), ("-2", "'-2"), ("@x", "'@x"), ("ok", "ok"), (3, 3)):
        assert neutralise_cell(value) == expected
