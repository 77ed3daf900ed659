"""Step 7: the redaction worklist, the per-document records, the manifest and the HTML certificate report."""

from __future__ import annotations

import json

import streamlit as st

from cpa_core.policy import worklist_csv, worklist_json
from cpa_core.records import iter_records, manifest
from cpa_ui.analysis import certificate, flagged_table
from cpa_ui.cache import curve, explained_worklist
from cpa_ui.components import require_data, require_run, stale_notice
from cpa_ui.help import HELP
from cpa_ui.report import certificate_report
from cpa_ui.state import state
from cpa_ui.text import fmt_confidence

data = require_data()
run = require_run()
result = run.result
confidence, flag_below, leakage_threshold = state.confidence, state.flag_below, state.leakage_threshold
st.title("Report & export")
stale_notice(run)
rule = f"|C| < {flag_below}" + ("" if leakage_threshold is None else f" or leakage > {leakage_threshold:g}")
st.markdown(f"Exports of configuration **{result.config.config_id}** ({run.label}) at **{fmt_confidence(confidence)}** "
            f"confidence, flagging documents with {rule} (set both on the Explore page). Files are generated on "
            "this machine and downloaded by your browser; nothing is uploaded anywhere.")
stem = f"cpa-{result.config.config_id}-{round(confidence * 1000):04d}"

work = explained_worklist(run.key, confidence, flag_below, leakage_threshold, data, run)
audit_manifest = {**manifest(result), "dashboard_view": {"confidence": confidence, "flag_below": flag_below,
                                                          "leakage_threshold": leakage_threshold}}


def records_jsonl() -> bytes:
    levels = sorted(set(result.config.confidences) | {confidence})
    lines = []
    for split, name, certify in ((result.calibration_split, "calibration", result.calibration_certificate),
                                 (result.test_split, "test", lambda level: certificate(result, level))):
        certificates = [certify(level) for level in levels]
        lines += [json.dumps(record, ensure_ascii=False, default=str)
                  for record in iter_records(split, certificates, name)]
    return ("\n".join(lines) + "\n").encode("utf-8")


def report_html() -> bytes:
    return certificate_report(result, confidence=confidence, flag_below=flag_below,
                              leakage_threshold=leakage_threshold, curve=curve(run.key, result), worklist=work,
                              manifest=audit_manifest).encode("utf-8")


st.subheader("For the privacy officer")
st.download_button("Certificate report (HTML)", report_html, file_name=f"{stem}-report.html", mime="text/html",
                   type="primary", icon=":material/description:", key="export.report",
                   help="One self-contained HTML file: what was audited, the declared threat configuration, the "
                        "guarantee and its assumptions, the plots, the flagged documents, checksums and versions.")

st.subheader("Redaction worklist")
st.caption(f"{len(work):,} flagged test documents, smallest set first, with the terms that drive each match.")
st.dataframe(flagged_table(work).drop(columns=["config_id", "confidence"]), hide_index=True, width="stretch",
             height=240, column_config={
                 "set_size": st.column_config.NumberColumn("|C|", help=HELP["set_size"]),
                 "leakage": st.column_config.NumberColumn("leakage L", format="%.3f", help=HELP["leakage"]),
                 "driving_terms": st.column_config.TextColumn(
                     "driving terms", help="Terms shared by the document and its top candidates' profiles that "
                                           "weigh most in the match: where to start redacting.")})
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
