"""Redaction in rounds on the sample release: the first round is the search under the audit's calibration; each later
one audits the release the decisions so far make and searches what it still flags from where it was left. Earlier
rows are kept as they are, every later row is a new edit or a withholding, every document's edits still apply to its
released text, and the release the rounds make is no riskier than the first round's."""

from __future__ import annotations

import pandas as pd
import pytest
from sample_release import sample_project_fixture  # noqa: F401 (the fixture sample_project)

from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import declare_audit
from cpa_core.redaction.decisions import EDIT, accepted, proposed_decisions
from cpa_core.redaction.rounds import audit_decided, redact_in_rounds
from cpa_core.redaction.suggestions import WITHHOLD, apply_edits, panel_members
from cpa_core.report.metrics import first_guess_figures


@pytest.fixture(scope="module")
def rounds(sample_project):
    project, documents, registry = sample_project
    config, attacker = declare_audit(project, registry, attacker="tfidf", documents=documents)
    result = run_audit(documents, registry, attacker, config)
    lines = []
    found = redact_in_rounds(result, attacker, registry, documents, rounds=3, said=lines.append)
    one = redact_in_rounds(result, attacker, registry, documents, rounds=1)
    return {"result": result, "attacker": attacker, "documents": documents, "registry": registry, "found": found,
            "one": one, "lines": lines}


def flagged(panel) -> int:
    return int(panel.certificate(panel.config.policy_confidence).flags(panel.config.policy).sum())


def test_one_round_is_the_search_under_the_audit_s_calibration(rounds):
    texts = dict(zip(rounds["documents"].frame["doc_id"].astype(str), rounds["documents"].frame["text"]))
    one = rounds["one"]
    table, suggestions = proposed_decisions(rounds["result"], rounds["attacker"], rounds["registry"], texts)
    pd.testing.assert_frame_equal(one.table, table)
    assert [s.doc_id for s in one.suggestions] == [s.doc_id for s in suggestions] and one.count == 1
    first = rounds["found"].table.iloc[:len(table)].reset_index(drop=True)
    pd.testing.assert_frame_equal(first, table)  # the later rounds add rows, and change none


def test_later_rounds_search_what_the_audit_of_the_decided_release_still_flags(rounds):
    found, documents = rounds["found"], rounds["documents"]
    assert found.count >= 2 and [r["round"] for r in found.rounds] == list(range(1, found.count + 1))
    second = found.rounds[1]
    assert second["flagged"] > 0 and second["searched"] >= second["flagged"]  # this release needs a second round
    assert len(rounds["lines"]) == 2 * (found.count - 1) and rounds["lines"][0].startswith("round 2: auditing")
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    edits, withheld = accepted(found.table)
    for doc_id, own in edits.items():  # every document's edits, of every round, apply to its released text
        ordered = sorted(own, key=lambda e: e.offset)
        assert all(a.offset + a.length <= b.offset for a, b in zip(ordered, ordered[1:])), doc_id
        assert all(texts[doc_id][e.offset:e.offset + e.length] == e.original for e in own), doc_id
    later = found.table.iloc[len(rounds["one"].table):]
    assert set(later["action"]) <= {EDIT, WITHHOLD} and later["accept"].all()
    by_id = {s.doc_id: s for s in found.suggestions}
    for doc_id in set(later["doc_id"]):
        rows = found.table[(found.table["doc_id"] == doc_id) & (found.table["action"] == EDIT)]
        assert len(by_id[doc_id].edits) == len(rows)  # its suggestion holds every round's edits
        assert apply_edits(texts[doc_id], by_id[doc_id].edits) == apply_edits(texts[doc_id], edits.get(doc_id, []))


def test_the_release_the_rounds_make_is_no_riskier_than_the_first_round_s(rounds):
    members = panel_members(rounds["result"], rounds["attacker"])
    documents, registry = rounds["documents"], rounds["registry"]
    after_one = audit_decided(documents, registry, members, *accepted(rounds["one"].table))
    after_all = audit_decided(documents, registry, members, *accepted(rounds["found"].table))
    assert flagged(after_all) < flagged(after_one)
    assert first_guess_figures(after_all.members[0])["first_guess"] <= \
        first_guess_figures(after_one.members[0])["first_guess"]
