"""The History page's tables: an attacker panel's members, each recorded as an audit of its own, are one entry of the
list, named by its audits and attackers; its figures are each member's own."""

from __future__ import annotations

from tables import small_audit
from toy_panel import toy_panel

from cpa_core.store.history import HistoryEntry, compare_audits, list_audits, record_audit
from cpa_ui.history import (
    NOT_REDACTED,
    Entry,
    history_entries,
    history_table,
    panel_label,
    panel_members_table,
    worklist_changes,
)


def test_a_panel_is_one_entry_of_the_history_with_its_members(tmp_path):
    history = tmp_path / "h.sqlite"
    panel = toy_panel()
    single = record_audit(small_audit(1), source="cli", path=history)
    members = tuple(record_audit(member, source="dashboard", path=history) for member in panel.members)
    audits = list_audits(history)
    entries = history_entries(audits)
    assert entries == [Entry((single,)), Entry(members, panel.config_id, panel.names)]
    assert [entry.id for entry in entries] == [single, members[0]] and entries[1].is_panel
    listed = history_table(audits)
    assert listed["id"].tolist() == [members[0], single]  # the latest first, one row per entry
    row = listed.iloc[0]
    assert row["attacker"] == f"panel: {', '.join(panel.names)}" and row["config_id"] == panel.config_id
    assert row["members"] == ", ".join(f"{name} (audit {i})" for name, i in zip(panel.names, members))
    assert row[["verdict", "first_guess_rate", "n_flagged"]].isna().all()  # the panel's: computed when reopened
    assert listed.iloc[1]["attacker"] == "toy" and listed["members"].isna().iloc[1]
    table = panel_members_table(audits, entries[1])
    assert table["id"].tolist() == list(members) and table["attacker"].tolist() == list(panel.names)
    assert table["first_guess_rate"].tolist() == audits.set_index("id").loc[list(members), "first_guess_rate"].tolist()
    label = panel_label(audits, entries[1])
    assert label.startswith(f"audits {members[0]}, {members[1]} · ") and " + ".join(panel.names) in label
    assert panel_label(audits, entries[0]).startswith(f"audit {single} · ")
    assert listed["redacted_from"].tolist() == [NOT_REDACTED, NOT_REDACTED]  # neither was redacted from another


def test_an_audit_redacted_from_another_names_it_and_the_others_show_a_dash(tmp_path):
    history = tmp_path / "h.sqlite"
    first = record_audit(small_audit(1), source="cli", path=history)
    redacted = small_audit(2).with_inputs(redaction={"from_audit": first, "decisions": {"withheld": []}})
    second = record_audit(redacted, source="dashboard", path=history)
    listed = history_table(list_audits(history))
    assert listed.set_index("id")["redacted_from"].to_dict() == {second: str(first), first: NOT_REDACTED}
    assert "None" not in listed["redacted_from"].tolist()


def _entry(audit_id: int, sizes: dict[str, int], flagged: tuple[str, ...], summary: dict | None = None):
    return HistoryEntry(audit_id, "2026-01-01T00:00:00Z", "cli", f"c{audit_id}", {}, {},
                        {"confidence": {}, **(summary or {})}, "0.9", {"0.9": sizes}, flagged, None, {}, None, None)


def test_documents_withheld_from_b_are_counted_as_withheld_not_as_no_longer_flagged():
    a = _entry(1, {"d1": 1, "d2": 2, "d3": 3, "d4": 20, "d5": 30, "d6": 30}, ("d1", "d2", "d3", "d4"))
    # B: the release redacted from A, d1 and d2 withheld; d4 audited and cleared; d5 newly flagged
    b = _entry(2, {"d3": 2, "d4": 25, "d5": 3, "d6": 40}, ("d3", "d5"),
               {"redaction": {"from_audit": 1, "decisions": {"withheld": ["d1", "d2", "d9"]}}})
    comparison = compare_audits(a, b)
    assert comparison.flagged_removed == ("d1", "d2", "d4")  # on A's worklist only: withheld and cleared together
    changes = worklist_changes(comparison, b)
    assert changes.withheld == ("d1", "d2") and changes.no_longer_flagged == ("d4",)
    assert changes.newly_flagged == ("d5",) and changes.flagged_in_both == ("d3",) and changes.not_audited == ()
    frame = changes.to_frame()
    assert dict(zip(frame["doc_id"], frame["change"])) == {"d5": "newly flagged", "d4": "no longer flagged",
                                                           "d1": "withheld", "d2": "withheld", "d3": "flagged in both"}


def test_documents_not_audited_in_b_and_not_withheld_are_neither_cleared_nor_withheld():
    a = _entry(1, {"d1": 1, "d2": 2}, ("d1", "d2"))
    b = _entry(2, {"d2": 30, "d3": 1}, ("d3",))  # another test split: d1 is not among B's documents
    changes = worklist_changes(compare_audits(a, b), b)
    assert changes.not_audited == ("d1",) and changes.no_longer_flagged == ("d2",) and changes.withheld == ()
