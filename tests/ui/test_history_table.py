"""The History page's tables: an attacker panel's members, each recorded as an audit of its own, are one entry of the
list, named by its audits and attackers; its figures are each member's own."""

from __future__ import annotations

from tables import small_audit
from toy_panel import toy_panel

from cpa_core.store.history import list_audits, record_audit
from cpa_ui.history import Entry, history_entries, history_table, panel_label, panel_members_table


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
