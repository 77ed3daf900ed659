"""Step 5: the documents the release policy flags, smallest set first, and a drill-down on each."""

from __future__ import annotations

import numpy as np
import streamlit as st

from cpa_core.evidence import N_CANDIDATES, document_evidence, driving_terms
from cpa_core.policy import worklist
from cpa_ui import nav
from cpa_ui.analysis import candidate_table, document_facts, flagged_table, kpis, row_of, text_of
from cpa_ui.cache import explainer
from cpa_ui.components import policy_controls, require_data, require_run, show_warnings, stale_notice, table_columns
from cpa_ui.figures import fig_candidate_weights
from cpa_ui.help import HELP
from cpa_ui.state import state, widget_key
from cpa_ui.text import fmt_confidence, fmt_number, highlight_spans, plain

data = require_data()
run = require_run()
result = run.result
st.title("Flagged documents")
stale_notice(run)
confidence = state.confidence
st.caption(f"Certified sets at {fmt_confidence(confidence)} confidence (change it on the Explore page), "
           f"configuration {result.config.config_id} ({run.label}).")
policy = policy_controls("flagged")
cert = result.certificate(confidence)
flagged = worklist(cert, policy, result.config.config_id)
show_warnings(kpis(result, confidence, policy)["warnings"])
st.metric("Flagged documents", f"{len(flagged):,} of {len(cert.set_sizes):,}", help=HELP["n_flagged"])
st.caption(f"Flagged when {policy.rule}; smallest set (highest risk) first. The export on the Report page adds the "
           "terms that drive each match.")
shown = flagged_table(flagged).drop(columns=["driving_terms", "evidence", "config_id", "confidence"])
st.dataframe(shown, hide_index=True, width="stretch", height=320, key="flagged.table",
             column_config=table_columns(shown))

st.subheader("Drill-down")
if len(flagged):
    choices = flagged["doc_id"].astype(str).tolist()
    sizes = dict(zip(choices, flagged["set_size"]))
else:
    st.caption("No document is flagged under this policy; inspect any test document, smallest set first.")
    order = np.argsort(cert.set_sizes, kind="stable")
    choices = cert.split.table.doc_ids[order].astype(str).tolist()
    sizes = dict(zip(choices, cert.set_sizes[order]))
key = widget_key("flagged.drilldown", choices[0])
if st.session_state[key] not in sizes:
    st.session_state[key] = choices[0]
doc_id = st.selectbox("Document", choices, key=key, format_func=lambda d: f"{d} · |C| = {sizes[d]}")
row = row_of(cert, doc_id)
facts = document_facts(cert, row)
level = result.config.knowledge
columns = st.columns(5)
columns[0].metric("Set size |C|", f"{facts['set_size']:,}", help=HELP["set_size"])
columns[1].metric("Leakage proxy", fmt_number(facts["leakage"]), help=HELP["leakage"])
columns[2].metric("True identity's rank", "not in pool" if facts["true_rank"] is None else f"{facts['true_rank']:,}",
                  help=HELP["true_rank"])
columns[3].metric("Truth in the set", "yes" if facts["covered"] else "no",
                  help="Whether this document's certified set contains its true identity (labelled data).")
columns[4].metric("Pool size", f"{facts['pool_size']:,}", help=HELP["pool_size"])
candidates = candidate_table(cert, row, data.registry, level.fields)
explain = explainer(run.key, data, run)
spans = document_evidence(cert.split, row, explain)  # what the worklist and the report list for this document
terms = driving_terms(spans)
text_column, set_column = st.columns([1, 1])
with text_column:
    st.markdown(f"**Released text** of {plain(facts['doc_id'])}"
                + (f" ({plain(facts['group'])})" if facts["group"] else ""))
    st.html(f"<div class='cpa-document' style='line-height:1.6; padding:0.8rem; border:1px solid #ddd; "
            f"border-radius:0.4rem; background:#fafafa'>{highlight_spans(text_of(data.documents, doc_id), spans)}"
            "</div>")
    st.caption("Highlighted: the words of this text that weigh most in its match to its top "
               f"{N_CANDIDATES} candidates ({plain(', '.join(terms)) if terms else 'none'}); anonymiser placeholders "
               "are never evidence. The worklist lists the same spans." if explain else
               "This attacker does not say which terms drive its matches.")
with set_column:
    st.markdown(f"**Certified set** ({facts['set_size']:,} people; fields the attacker sees under "
                f"{plain(level.name)})")
    st.dataframe(candidates, hide_index=True, width="stretch", height=320, column_config={
        "rank": st.column_config.NumberColumn(help="Rank in the attacker's list."),
        "in_set": st.column_config.CheckboxColumn("in set", help="In the certified set at this confidence."),
        "is_truth": st.column_config.CheckboxColumn("truth", help="The document's true identity (labelled data)."),
        "weight": st.column_config.NumberColumn(format="%.4f", help=HELP["weight"]),
        "score": st.column_config.NumberColumn(format="%.4f", help=HELP["score"]),
    })
    if len(candidates) and candidates["weight"].notna().any():
        st.plotly_chart(fig_candidate_weights(candidates.head(10)), key="flagged.weights")
st.page_link(nav.REPORT, label="Next: export the worklist and the report", icon=":material/arrow_forward:")
