"""Step 8: the audits of this machine (dashboard calibrations and command-line runs; an attacker panel as one entry
with its attackers): reopen one without attacking again, compare any two."""

from __future__ import annotations

import streamlit as st

from cpa_core.common.errors import CPAError
from cpa_core.report.formatting import fmt_confidence
from cpa_core.report.help import HELP, column_label
from cpa_core.store.history import compare_audits, history_path, list_audits, load_audit, release_difference
from cpa_ui import nav
from cpa_ui.components import show_error, table_columns
from cpa_ui.figures import fig_set_size_ecdf
from cpa_ui.history import (
    data_mismatch,
    entry_label,
    history_entries,
    history_table,
    panel_label,
    panel_members_table,
    reopen_panel,
    unreadable_notes,
    worklist_changes,
)
from cpa_ui.memory import adopt_run
from cpa_ui.state import set_widget, state, widget_key, widget_value
from cpa_ui.text import plain

st.title("History")
st.markdown("Every calibration run here and every `cpa audit` run on this machine is recorded in the audit history "
            f"({plain(history_path())}): its configuration, input checksums, figures and worklist, and a snapshot of "
            "the attack, so that a past audit can be reopened without attacking again. The history holds ids and "
            "figures; the snapshots hold the attacked texts and are readable by their owner only.")
try:
    audits = list_audits()
except CPAError as error:
    show_error(error, "The audit history cannot be read: ")
    st.stop()
if audits.empty:
    st.info("No audit recorded yet: run the calibration, or `cpa audit` on the command line.",
            icon=":material/hourglass_empty:")
    st.page_link(nav.CALIBRATE, label="Go to Calibrate", icon=":material/tune:")
    st.stop()

listed = history_table(audits)
st.dataframe(listed, hide_index=True, width="stretch", height=240, key="history.table",
             column_config={**table_columns(listed), "members": st.column_config.TextColumn(
                 "members", help="An attacker panel is one entry: each of its attackers was recorded as an audit of "
                                 "its own (this column: the attackers and their audits)."),
                 "redacted_from": st.column_config.TextColumn(column_label("redacted_from"),
                                                              help=HELP["redacted_from"])})
for note in unreadable_notes(audits):
    st.warning(plain(note), icon=":material/warning:")
readable = audits[audits["unreadable"].isna()]
labels = {int(row["id"]): entry_label(row) for _, row in readable.iterrows()}
ids = list(labels)[::-1]  # the latest first
if not ids:
    st.stop()
entries = {entry.id: entry for entry in history_entries(audits) if all(i in labels for i in entry.ids)}
entry_labels = {entry_id: panel_label(audits, entry) for entry_id, entry in entries.items()}
entry_ids = list(entry_labels)[::-1]


def choice(name: str, label: str, default: int, container=st, options: dict | None = None) -> int:
    """A choice among the recorded audits (or ``options``) that survives a history changed by another process."""
    options = labels if options is None else options
    key = widget_key(name, default)
    if widget_value(key) not in options:
        set_widget(key, default)
    return container.selectbox(label, list(options)[::-1], format_func=options.get, key=key)


def entry(audit_id: int):
    try:
        return load_audit(audit_id)
    except CPAError as error:
        show_error(error, "The audit cannot be read: ")
        st.stop()


st.subheader("Reopen an audit")
st.caption("The audit becomes the current one on every page, recomputed from its snapshot: nothing is attacked "
           "again. It needs the documents and registry it certified to be loaded. An attacker panel reopens whole: "
           "its attackers side by side, each one's certificate from its own snapshot.")
picked = entries[choice("history.audit", "Audit to reopen", entry_ids[0], options=entry_labels)]
if picked.is_panel:
    st.markdown(f"**An attacker panel** ({plain(picked.panel)}): {len(picked.ids)} attackers, each recorded as an "
                "audit of its own; the panel's verdict is computed when it is reopened.")
    members = panel_members_table(audits, picked)
    st.dataframe(members, hide_index=True, width="stretch", key="history.members",
                 column_config=table_columns(members))
loaded = [entry(audit_id) for audit_id in picked.ids]
mismatch = next((found for found in (data_mismatch(one, state.data) for one in loaded) if found is not None), None)
if mismatch is not None:
    st.info(plain(mismatch), icon=":material/info:")
if st.button("Reopen", key="history.reopen", type="primary", disabled=mismatch is not None,
             icon=":material/history:"):
    try:
        adopt_run(reopen_panel(loaded, state.data))  # the audit it replaces is let go
    except CPAError as error:
        show_error(error, "The audit could not be reopened: ")
    else:
        state.adopt_policy(state.run.result.config)
        what = f"Audits {', '.join(map(str, picked.ids))} are" if picked.is_panel else f"Audit {picked.id} is"
        st.success(f"{what} the current audit ({plain(state.run.label)}), viewed at its flagging "
                   f"level {fmt_confidence(state.confidence)} with its release policy ({state.policy.rule}).",
                   icon=":material/check_circle:")
        st.page_link(nav.EXPLORE, label="Explore its certificate", icon=":material/query_stats:")

st.subheader("Compare two audits")
if len(ids) < 2:
    st.info("Comparing needs two recorded audits.", icon=":material/info:")
    st.stop()
left, right = st.columns(2)
first = entry(choice("history.a", "A", ids[1], left))
second = entry(choice("history.b", "B", ids[0], right))
comparison = compare_audits(first, second)
different = release_difference(first, second)
if different is not None:
    st.warning(plain(different), icon=":material/difference:")
levels = comparison.to_frame()
st.dataframe(levels, hide_index=True, width="stretch", key="history.levels", column_config=table_columns(levels))
st.caption("Coverage, median set size and flagged documents per confidence level (empty where an audit did not "
           "certify that level).")
common = [level for level in first.levels if level in second.set_sizes]
if common:
    level = st.selectbox("Set sizes at", common,
                         format_func={label: fmt_confidence(float(label)) for label in common}.get,
                         key=widget_key("history.level", first.flag_confidence if first.flag_confidence in common
                                        else common[0]))
    st.plotly_chart(fig_set_size_ecdf({f"A: audit {first.id}": first.set_sizes_at(level),
                                       f"B: audit {second.id}": second.set_sizes_at(level)},
                                      second.policy.flag_below,
                                      title=f"Share of documents with a set of at most |C|, at "
                                            f"{fmt_confidence(float(level))}"), key="history.ecdf")
changes = worklist_changes(comparison, second)
a_worklist = f"On A's worklist (at {fmt_confidence(float(first.flag_confidence))})"
columns = st.columns(4)
columns[0].metric("Newly flagged in B", f"{len(changes.newly_flagged):,}",
                  help=f"On B's worklist (at {fmt_confidence(float(second.flag_confidence))}), not on A's.")
columns[1].metric("No longer flagged in B", f"{len(changes.no_longer_flagged):,}",
                  help=f"{a_worklist}, audited in B and not on its worklist.")
columns[2].metric("Withheld from B", f"{len(changes.withheld):,}",
                  help=f"{a_worklist}, withheld from B's release by the redaction B was audited after: not released, "
                       "so not audited in B.")
columns[3].metric("Flagged in both", f"{len(changes.flagged_in_both):,}", help="On both worklists.")
if changes.not_audited:
    st.caption(f"{len(changes.not_audited):,} documents of A's worklist are not among B's audited documents (another "
               "release, or another test split) and were not withheld by a redaction: neither flagged nor cleared "
               "in B.")
flagged = changes.to_frame()
st.dataframe(flagged, hide_index=True, width="stretch", height=240, key="history.flagged",
             column_config=table_columns(flagged))
