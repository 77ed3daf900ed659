"""Step 7: the redaction worklist, the per-document records, the manifest and the HTML certificate report."""

from __future__ import annotations

import json

import streamlit as st

from cpa_core.policy import worklist_csv, worklist_json
from cpa_core.records import jsonl_lines, manifest, record_splits, records
from cpa_ui.analysis import flagged_table
from cpa_ui.cache import curve, explained_worklist
from cpa_ui.components import require_data, require_run, stale_notice, table_columns
from cpa_ui.report import certificate_report
from cpa_ui.state import state
from cpa_ui.text import fmt_confidence, plain

data = require_data()
run = require_run()
result = run.result
confidence, policy = state.confidence, state.policy
st.title("Report & export")
stale_notice(run)
rule = policy.rule
st.markdown(f"Exports of configuration **{result.config.config_id}** ({plain(run.label)}) at **{fmt_confidence(confidence)}** "
            f"confidence, flagging documents with {rule} (set both on the Explore page). Files are generated on "
            "this machine and downloaded by your browser; nothing is uploaded anywhere.")
stem = f"cpa-{result.config.config_id}-{round(confidence * 1000):04d}"

work = explained_worklist(run.key, confidence, policy.flag_below, policy.leakage_threshold, data, run)
audit_manifest = {**manifest(result), "dashboard_view": {"confidence": confidence, **policy.to_dict()}}


def records_jsonl() -> bytes:
    levels = sorted(set(result.config.confidences) | {confidence})
    return "".join(line for name in record_splits(result)
                   for line in jsonl_lines(records(result, name, levels))).encode("utf-8")


def report_html() -> bytes:
    return certificate_report(result, confidence=confidence, policy=policy, curve=curve(run.key, result),
                              worklist=work, manifest=audit_manifest).encode("utf-8")


st.subheader("For the privacy officer")
st.download_button("Certificate report (HTML)", report_html, file_name=f"{stem}-report.html", mime="text/html",
                   type="primary", icon=":material/description:", key="export.report",
                   help="One self-contained HTML file: what was audited, the declared threat configuration, the "
                        "guarantee and its assumptions, the plots, the flagged documents, checksums and versions.")

st.subheader("Redaction worklist")
st.caption(f"{len(work):,} flagged test documents, smallest set first, with the terms that drive each match.")
shown = flagged_table(work).drop(columns=["config_id", "confidence"])
st.dataframe(shown, hide_index=True, width="stretch", height=240, column_config=table_columns(shown))
left, right = st.columns(2)
left.download_button("Worklist (CSV)", worklist_csv(work).encode("utf-8"), file_name=f"{stem}-worklist.csv",
                     mime="text/csv", icon=":material/table:", key="export.worklist_csv", width="stretch",
                     help="Spreadsheet-safe: cells that a spreadsheet would run as formulas are neutralised.")
right.download_button("Worklist (JSON)", worklist_json(work).encode("utf-8"), file_name=f"{stem}-worklist.json",
                      mime="application/json", icon=":material/data_object:", key="export.worklist_json",
                      width="stretch")

st.subheader("For re-derivation and archiving")
left, right = st.columns(2)
left.download_button("Per-document records (JSONL)", records_jsonl, file_name=f"{stem}-records.jsonl",
                     mime="application/x-ndjson", icon=":material/list:", key="export.records", width="stretch",
                     help="One JSON object per calibration and test document: the query (the released text), the top "
                          "candidates with weights and scores, the truth's rank and the set at each level. Contains "
                          "document text: handle it like the release itself.")
right.download_button("Manifest (JSON)", json.dumps(audit_manifest, indent=2, default=str).encode("utf-8"),
                      file_name=f"{stem}-manifest.json", mime="application/json", icon=":material/verified:",
                      key="export.manifest", width="stretch",
                      help="The full declared configuration, input checksums, split sizes, seed and versions.")
with st.expander("Manifest preview"):
    st.json(audit_manifest, expanded=1)
