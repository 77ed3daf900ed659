"""The redaction worklist: the flagged documents riskiest first (linkage probability, then smallest set, then id) with their top candidates and
evidence, by hand on the toy audit; its CSV (lists joined, formula-like cells neutralised) and JSON."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from tables import audited_groups, toy_audit

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.report.worklist import WORKLIST_COLUMNS, neutralise_cell, worklist, worklist_csv, worklist_json


@pytest.fixture(scope="module")
def audited():
    return audited_groups()


def test_worklist_sorted_riskiest_first_and_csv_neutralised(audited):
    result = audited[0]
    cert = result.certificate(0.8)
    policy = ReleasePolicy(5, acceptable_linkage=0.3)
    frame = worklist(cert, policy, result.config.config_id)
    keys = list(zip(-frame["linkage_probability"].round(12), frame["set_size"]))
    assert keys == sorted(keys)  # highest linkage probability first, then the smallest set
    by_set, by_linkage = frame["set_size"] < 5, frame["linkage_probability"] > 0.3
    assert (by_set | by_linkage).all() and by_set.any() and by_linkage.any()
    assert frame["flagged_by"].tolist() == ["set+linkage" if a and b else "set" if a else "linkage"
                                            for a, b in zip(by_set, by_linkage)]
    assert len(frame) == int(cert.flags(policy).sum())
    frame.at[0, "driving_terms"] = ["=cmd", "term"]  # words of a released text that a spreadsheet would run
    frame.at[0, "evidence"] = [{"offset": 3, "length": 4}, {"offset": 12, "length": 4}]
    text = worklist_csv(frame)
    assert "'=cmd; term" in text and ",3+4; 12+4," in text
    for value, expected in (("=1+1", "'=1+1"), ("+1", "'+1"), ("-2", "'-2"), ("@x", "'@x"), ("ok", "ok"), (3, 3)):
        assert neutralise_cell(value) == expected


@pytest.fixture(scope="module")
def toy():
    return toy_audit()  # d1 and d3 certified: sizes 2 and 2 at 0.5, 1 and 0 at 0.3


def test_the_toy_worklist_by_hand(toy):
    """Linkage probabilities by hand: margins d3 0 < d1 .1 < d0 .3 (a miss) < d2 .5 (a hit), one level each; d1 and
    d3 lie below both calibration documents, so p0 = 0, p1 = 1/2 (pooled with the miss) and p = .5 / 1.5 = 1/3,
    not above the acceptable 1/3 at k = 3: flagged by their sets alone. The interval is [p0, p1] = [0, 1/2]; the first
    guess is each one's top candidate."""
    frame = worklist(toy.certificate(0.5), ReleasePolicy(3), "cfg-1")
    assert list(frame.columns) == list(WORKLIST_COLUMNS)
    assert frame.to_dict(orient="records") == [
        {"doc_id": "d1", "group": None, "flagged_by": "set", "linkage_probability": 0.333333, "linkage_low": 0.0,
         "linkage_high": 0.5, "first_guess": "p1", "set_size": 2,
         "leakage": 0.5, "top_candidates": ["p1", "p0", "p2"],
         "top_weights": [0.5, 0.4, 0.1], "driving_terms": [], "evidence": [], "inferred_clues": [],
         "config_id": "cfg-1", "confidence": 0.5},
        {"doc_id": "d3", "group": None, "flagged_by": "set", "linkage_probability": 0.333333, "linkage_low": 0.0,
         "linkage_high": 0.5, "first_guess": "p0", "set_size": 2,
         "leakage": 0.5, "top_candidates": ["p0", "p2", "p1"],
         "top_weights": [0.4, 0.4, 0.2], "driving_terms": [], "evidence": [], "inferred_clues": [],
         "config_id": "cfg-1", "confidence": 0.5}]


def test_the_smallest_set_comes_first_and_unflagged_documents_are_left_out(toy):
    frame = worklist(toy.certificate(0.3), ReleasePolicy(2), "cfg")
    assert frame[["doc_id", "set_size"]].values.tolist() == [["d3", 0], ["d1", 1]]  # the empty set first
    assert frame["leakage"].tolist() == [1.0, 1.0]
    assert worklist(toy.certificate(0.3), ReleasePolicy(1), "cfg")["doc_id"].tolist() == ["d3"]
    none = worklist(toy.certificate(0.5), ReleasePolicy(2), "cfg")
    assert none.empty and list(none.columns) == list(WORKLIST_COLUMNS)
    # the leakage rule flags too: 1 / 2 > 0.4
    assert worklist(toy.certificate(0.5), ReleasePolicy(1, 0.4), "cfg")["doc_id"].tolist() == ["d1", "d3"]
    assert worklist(toy.certificate(0.5), ReleasePolicy(3), "cfg", n_candidates=1)["top_candidates"].tolist() == [
        ["p1"], ["p0"]]


def test_a_worklist_as_csv_and_json_by_hand():
    frame = pd.DataFrame([{"doc_id": "=d1", "group": None, "set_size": 2, "driving_terms": ["Zoë", "-5"],
                           "evidence": [{"offset": 3, "length": 4}],
                           "edits": [{"offset": 0, "length": 2, "replacement": "[CITY]"}]}])
    assert worklist_csv(frame) == ("doc_id,group,set_size,driving_terms,evidence,edits\n"
                                   "'=d1,,2,Zoë; -5,3+4,0+2=[CITY]\n")
    assert json.loads(worklist_json(frame)) == frame.to_dict(orient="records")
    assert "Zoë" in worklist_json(frame)  # written as such, not escaped
