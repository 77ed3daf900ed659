"""The History page under Streamlit's AppTest: calibrations are recorded, a past audit is reopened as the current
one without attacking again, two audits are compared, and bad cases (a missing snapshot, an unusable or damaged
history, rows that cannot be read) are said on the page."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from apptest import PAGES, assert_clean, calibrate, metric, new_app, shown
from recorded_audits import damage

from cpa_core.report.metrics import summarize
from cpa_core.report.worklist import worklist
from cpa_core.store.history import list_audits, load_audit, record_audit
from cpa_ui import nav


@pytest.fixture
def history(tmp_path, monkeypatch):
    """A history of this test's own (the dashboard reads ``$CPA_HISTORY`` at every call)."""
    path = tmp_path / "history.sqlite"
    monkeypatch.setenv("CPA_HISTORY", str(path))
    return path


def flagged_ids(result) -> set[str]:
    config = result.config
    return set(worklist(result.certificate(config.policy_confidence), config.policy, config.config_id)["doc_id"])


def summary_of(result) -> str:
    return json.dumps(summarize(result).to_dict())


def test_calibrate_twice_reopen_the_first_and_compare(history, sample_paths):
    at = calibrate(new_app().run(), knowledge="K2")
    first = at.session_state["cpa.run"]
    at = calibrate(at, knowledge="K3")
    second = at.session_state["cpa.run"]
    assert list_audits(history)["knowledge"].tolist() == ["K2", "K3"]
    assert list_audits(history)["source"].tolist() == ["dashboard", "dashboard"]

    at.switch_page(nav.HISTORY).run()
    assert_clean(at)
    listed = at.dataframe[0].value
    assert listed["id"].tolist() == [2, 1] and listed["knowledge"].tolist() == ["K3", "K2"]  # the latest first
    assert listed["redacted_from"].tolist() == ["—", "—"]  # not redacted from another audit: no "None"

    at.selectbox(key="w.history.audit").set_value(1).run()
    at.button(key="history.reopen").click().run()
    assert_clean(at)
    reopened = at.session_state["cpa.run"]
    assert reopened is not second and "audit 1" in reopened.label
    assert reopened.result.config.config_id == first.result.config.config_id
    assert summary_of(reopened.result) == summary_of(first.result)
    assert any("Audit 1 is the current audit" in shown(s) for s in at.success)
    at.switch_page(nav.REPORT).run()  # viewed under its declared policy, it exports the configuration it recorded
    assert f"Every export declares configuration **{load_audit(1, history).config_id}**" in at.markdown[0].value
    for page in PAGES:  # every page works on the reopened audit
        at.switch_page(page).run()
        assert not at.exception, (page, [shown(e) for e in at.exception])
        assert not any("No calibrated audit yet" in shown(i) for i in at.info), page
    at.switch_page(nav.FLAGGED).run()
    assert "<mark>" in at.get("html")[0].proto.body  # the rebuilt TF-IDF attacker explains the matches
    at.switch_page(nav.THREAT).run()
    at.radio(key="w.threat.knowledge").set_value("K2").run()
    at.switch_page(nav.CALIBRATE).run()  # declaring the reopened audit's configuration: it is the current result
    assert not any("These results are" in shown(w) for w in at.warning)
    assert at.button(key="calibrate.run").label == "Run again"

    at.switch_page(nav.HISTORY).run()
    assert at.selectbox(key="w.history.a").value == 1 and at.selectbox(key="w.history.b").value == 2
    levels = at.dataframe[1].value
    for suffix, run in (("a", first), ("b", second)):
        summary = summarize(run.result)
        for row in levels.itertuples():
            assert getattr(row, f"coverage_{suffix}") == pytest.approx(summary.level(row.confidence).coverage)
            assert getattr(row, f"n_flagged_{suffix}") == summary.level(row.confidence).n_flagged
    before, after = flagged_ids(first.result), flagged_ids(second.result)
    assert metric(at, "Newly flagged in B") == f"{len(after - before):,}"
    assert metric(at, "No longer flagged in B") == f"{len(before - after):,}"  # the same documents: none withheld
    assert metric(at, "Withheld from B") == "0"
    assert metric(at, "Flagged in both") == f"{len(before & after):,}"
    changes = at.dataframe[2].value
    assert set(changes.loc[changes["change"] == "newly flagged", "doc_id"]) == after - before
    assert set(changes.loc[changes["change"] == "no longer flagged", "doc_id"]) == before - after
    assert len(at.get("plotly_chart")) == 1


def test_an_audit_of_other_data_is_listed_but_not_reopened(history, sample_paths):
    from tables import small_audit

    record_audit(small_audit(1), source="cli", path=history)
    at = new_app().run()
    at.switch_page(nav.HISTORY).run()
    assert_clean(at)
    assert any("not the loaded one" in shown(i) and "load that file on the Data page" in shown(i) for i in at.info)
    assert at.button(key="history.reopen").disabled
    assert any("Comparing needs two recorded audits" in shown(i) for i in at.info)


def test_a_missing_snapshot_is_said_and_the_audit_stays_listed(history, sample_paths):
    at = calibrate(new_app().run(), knowledge="K2")
    os.unlink(load_audit(1, history).snapshot)
    at.switch_page(nav.HISTORY).run()
    at.button(key="history.reopen").click().run()
    assert not at.exception
    assert any("could not be reopened" in shown(e) and "not found" in shown(e) for e in at.error)
    assert at.dataframe[0].value["id"].tolist() == [1]


def test_an_unusable_history_is_a_warning_and_the_calibration_is_kept(tmp_path, monkeypatch, sample_paths):
    monkeypatch.setenv("CPA_HISTORY", str(tmp_path))  # a folder
    at = new_app().run()
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert not at.exception and not at.error
    assert any("not recorded in the audit history" in shown(w) and "is a folder" in shown(w) for w in at.warning)
    assert at.session_state["cpa.run"] is not None
    at.switch_page(nav.HISTORY).run()
    assert not at.exception
    assert any("audit history cannot be read" in shown(e) for e in at.error)


def test_rows_that_cannot_be_read_are_listed_and_said_and_a_damaged_history_is_one_error(history, sample_paths):
    from tables import small_audit

    ids = [record_audit(small_audit(seed), source="cli", path=history) for seed in (1, 2, 3, 4)]
    with sqlite3.connect(history) as connection:
        connection.execute("UPDATE audits SET summary = 'not json' WHERE id = ?", (ids[3],))  # the latest
        connection.execute("UPDATE audits SET summary = '[1, 2]' WHERE id = ?", (ids[0],))
    at = new_app().run()
    at.switch_page(nav.HISTORY).run()
    assert_clean(at)
    assert at.dataframe[0].value["id"].tolist() == ids[::-1]  # every audit is listed
    said = [shown(w) for w in at.warning]
    assert any(f"Audit {ids[3]} cannot be read (its stored summary is not JSON)" in w for w in said)
    assert any(f"Audit {ids[0]} cannot be read (its stored summary is JSON but an array, not an object)" in w
               for w in said)
    assert at.selectbox(key="w.history.audit").value == ids[2]  # the latest that can be read
    assert (at.selectbox(key="w.history.a").value, at.selectbox(key="w.history.b").value) == (ids[1], ids[2])
    assert len(at.get("plotly_chart")) == 1

    damage(history)
    at.run()
    assert not at.exception
    assert any("The audit cannot be read" in shown(e) and "is damaged" in shown(e) for e in at.error)
