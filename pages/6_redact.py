"""Step 6: suggested redactions for every flagged document, the redacted release to download, and its re-audit
under the same declared threat model, recalibrated, side by side with the audit before."""

from __future__ import annotations

import json

import numpy as np
import streamlit as st

from cpa_core.audit.policy import BY_LINKAGE
from cpa_core.common.errors import CPAError
from cpa_core.redaction.suggestions import redacted_file, redaction_log, suggested_worklist
from cpa_core.report.formatting import fmt_confidence
from cpa_core.report.worklist import worklist, worklist_csv
from cpa_ui import nav
from cpa_ui.cache import audit_run, explained_worklist, explainer
from cpa_ui.components import policy_controls, results_page, show_error, table_columns
from cpa_ui.figures import fig_set_size_ecdf
from cpa_ui.redaction import (
    STRATEGIES,
    STRATEGY_LABELS,
    before_after,
    reaudit_attacker,
    redacted_documents,
    release_suggestions,
    suggestions_table,
)
from cpa_ui.state import RedactionRun, state, widget_key

data, run = results_page("Redact and re-audit")
result = run.result
confidence = state.confidence
policy = policy_controls("redact")
cert = result.certificate(confidence)
n_flagged = int(policy.flags_by_set(cert.set_sizes).sum())
n_by_linkage = int((cert.flag_reasons(policy) == BY_LINKAGE).sum())
st.markdown(f"At {fmt_confidence(confidence)} confidence, **{n_flagged:,}** of {len(cert.set_sizes):,} documents are "
            f"flagged by their set size (|C| < {policy.flag_below}). For each, the fewest words of its evidence whose "
            "redaction lifts its set to k under the stored calibration are suggested; applying them gives a new "
            "release, which is audited again with the same declared threat model and calibrated anew."
            + (f" {n_by_linkage:,} more are flagged by their linkage probability alone: no set is to be lifted, "
               "so no edit is suggested; withhold them or redact them by hand (the Flagged documents page shows "
               "their evidence)." if n_by_linkage else "")
            + (" Under the split protocol the calibration documents the stored thresholds flag are redacted too: "
               "the redacted release must be one release mechanism for its new calibration to certify it."
               if result.config.protocol == "split" else ""))
explain = explainer(run.key, data, run)
if explain is None:
    st.info("This attacker does not say which words drive its matches, so no redaction can be suggested. Edit the "
            "release yourself, load it on the Data page and calibrate it again.", icon=":material/info:")
    st.stop()
if n_flagged == 0:
    st.success("No document is flagged under this policy: nothing to redact.", icon=":material/check_circle:")
    st.stop()

strategy = st.selectbox("Replace redacted words by", STRATEGIES, key=widget_key("redact.strategy", STRATEGIES[0]),
                        format_func=lambda s: STRATEGY_LABELS.get(s, s))
ask = (run.key, strategy, float(confidence), policy.flag_below)
redaction = state.redaction if state.redaction is not None and state.redaction.ask == ask else None
if redaction is None:
    if st.button("Suggest redactions for the flagged documents", type="primary",
                 icon=":material/ink_eraser:", key="redact.suggest"):
        with st.spinner("Redacting the flagged documents, re-scoring each edit…"):
            try:
                found = release_suggestions(run.key, strategy, float(confidence), policy.flag_below, run, data)
            except CPAError as error:
                show_error(error, "No redaction could be suggested: ")
                st.stop()
        state.redaction = redaction = RedactionRun(ask, found)
    else:
        st.stop()

suggestions = redaction.suggestions
table = suggestions_table(suggestions)
reached = int(table["reaches_k"].sum())
columns = st.columns(4)
columns[0].metric("Documents with a suggestion", f"{len(suggestions):,}")
columns[1].metric("Reach k (indicative)", f"{reached:,}")
columns[2].metric("Characters per document (median)", f"{int(table['characters'].median()) if len(table) else 0:,}")
columns[3].metric("Edits", f"{int(table['edits'].sum()):,}")
st.dataframe(table, hide_index=True, width="stretch", height=260, key="redact.table",
             column_config=table_columns(table))
st.caption("Set sizes after are indicative: each edited document attacked again and counted under its stored "
           "threshold. Open a document on the Flagged documents page to accept suggestions one by one.")

released = redacted_documents(data.documents, suggestions)
source = data.documents_source
declared = result.with_policy(confidence, policy)  # what the worklist declares, as on the Report page
work = suggested_worklist(explained_worklist(run.key, declared.config.config_id, declared, data, run), suggestions)
left, middle, right = st.columns(3)
if source is not None:
    name, payload = redacted_file(source, data.documents, suggestions)
    left.download_button("Download the redacted release", payload, file_name=name, icon=":material/download:",
                         key="redact.download", help="The input file with every suggested edit applied: same "
                                                    "format, encoding and columns.")
middle.download_button("Download the worklist with suggested edits (CSV)", worklist_csv(work),
                       file_name="worklist-suggested-edits.csv", mime="text/csv", icon=":material/download:",
                       key="redact.worklist", help="The redaction worklist, each flagged document with its suggested "
                                                   "edits (offset+length=replacement) and its |C| after them.")
right.download_button("Download the edit log (JSON)", json.dumps(redaction_log(result.config, strategy, suggestions,
                                                                                policy, confidence), indent=2,
                                                                  ensure_ascii=False),
                      file_name="redactions.json", mime="application/json", icon=":material/download:",
                      key="redact.log")

st.subheader("Re-audit the redacted release")
if redaction.after is None:
    if st.button("Audit the redacted release (same threat model, calibrated again)", icon=":material/play_arrow:",
                 key="redact.reaudit"):
        placeholder = st.empty()
        try:
            with placeholder.container():
                after = audit_run(data, result.config, reaudit_attacker(run, data, state.threat, state.scores),
                                  documents=released, label=f"{run.label} · redacted ({strategy})")
        except CPAError as error:
            show_error(error, "The redacted release could not be audited: ")
            st.stop()
        finally:
            placeholder.empty()
        state.redaction = redaction = RedactionRun(ask, suggestions, after)
    else:
        st.caption("The redacted release is a new release mechanism: its certificate comes from a new calibration, "
                   "on its own documents, with the threat model declared for this audit.")
        st.stop()

after_cert = redaction.after.result.certificate(confidence)
flagged_after = int(policy.flags_by_set(after_cert.set_sizes).sum())
columns = st.columns(3)
columns[0].metric("Flagged before", f"{n_flagged:,}")
columns[1].metric("Flagged after (recalibrated)", f"{flagged_after:,}", delta=flagged_after - n_flagged,
                  delta_color="inverse")
columns[2].metric("Configuration", redaction.after.result.config.config_id,
                  help="The same declared threat model, bound to the redacted release.")
st.plotly_chart(fig_set_size_ecdf({"before": cert.set_sizes, "after redaction": after_cert.set_sizes},
                                  policy.flag_below, "Certified set sizes before and after redaction"),
                key="redact.ecdf")
sides = before_after(cert, after_cert, policy, suggestions)
still = worklist(after_cert, policy, redaction.after.result.config.config_id,
                 explain=explainer(redaction.after.key, data, redaction.after))
why = dict(zip(still["doc_id"].astype(str), [", ".join(t) for t in still["driving_terms"]]))
sides["still_flagged_because"] = [why.get(d, "") for d in sides["doc_id"]]
st.dataframe(sides, hide_index=True, width="stretch", height=360, key="redact.sides",
             column_config=table_columns(sides))
st.caption(f"{int(np.sum(sides['flagged_before'] & ~sides['flagged_after'])):,} documents flagged before are no "
           f"longer flagged; {int(np.sum(sides['flagged_after'])):,} are flagged after, with the words that still "
           "drive their match. Sizes after are certified by the new calibration; indicative sizes are those the "
           "suggestion predicted under the old one.")
st.page_link(nav.REPORT, label="Next: export the worklist and the report", icon=":material/arrow_forward:")
