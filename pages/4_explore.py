"""Step 4: the certificate at any confidence level, recomputed from the stored attack (no re-attack)."""

from __future__ import annotations

import streamlit as st

from cpa_ui import nav
from cpa_ui.analysis import calibration_notes, certificate, group_table, kpis, without_empty
from cpa_ui.cache import curve
from cpa_ui.components import confidence_control, kpi_row, policy_controls, require_run, stale_notice
from cpa_ui.figures import fig_confidence_curve, fig_group_breakdown, fig_set_size_histogram
from cpa_ui.help import HELP
from cpa_ui.text import fmt_confidence

run = require_run()
result = run.result
st.title("Explore")
st.caption(f"Configuration {result.config.config_id} ({run.label}); {len(result.test_split):,} test documents. "
           "Moving a slider recomputes the sets from the stored attack: nothing is attacked again.")
stale_notice(run)

confidence = confidence_control("explore")
flag_below, leakage_threshold = policy_controls("explore")
cert = certificate(result, confidence)
metrics = kpis(cert, flag_below, leakage_threshold)
kpi_row(metrics, confidence)
for note in calibration_notes(result, confidence):
    st.warning(f"Calibration set too small: {note}.", icon=":material/warning:")

left, right = st.columns(2)
with left:
    st.plotly_chart(fig_set_size_histogram(cert.set_sizes, flag_below,
                                           title=f"Certified set sizes at {fmt_confidence(confidence)}"),
                    key="explore.histogram")
    st.caption(f"{HELP['set_size']} Red bars are flagged (|C| < k = {flag_below}); the grey line is the "
               "cumulative share of documents.")
with right:
    st.plotly_chart(fig_confidence_curve(curve(run.key, result), confidence), key="explore.curve")
    st.caption("Coverage should track the dotted diagonal (the target) from above; the orange line shows the "
               "price: higher confidence, larger sets. Coverage levels off below the diagonal at the share of "
               "documents whose identity is in the pool (1 − ρ).")

groups = group_table(result, cert, flag_below, leakage_threshold)
if not groups.empty:
    st.subheader("Per group")
    st.plotly_chart(fig_group_breakdown(groups, confidence), key="explore.groups")
    st.dataframe(without_empty(groups, ("q_hat", "n_cal")), hide_index=True, width="stretch", column_config={
        "group": st.column_config.TextColumn(help=HELP["group"]),
        "n_test": st.column_config.NumberColumn(help=HELP["n_test"]),
        "n_cal": st.column_config.NumberColumn(help=HELP["n_cal"]),
        "q_hat": st.column_config.NumberColumn("q̂", format="%.4f", help=HELP["q_hat"]),
        "coverage": st.column_config.NumberColumn(format="percent", help=HELP["coverage"]),
        "coverage_conditional": st.column_config.NumberColumn("coverage (in pool)", format="percent",
                                                              help=HELP["coverage_conditional"]),
        "candidate_miss_rate": st.column_config.NumberColumn("miss rate ρ", format="percent", help=HELP["miss_rate"]),
        "median_set_size": st.column_config.NumberColumn("median |C|", help=HELP["median_set"]),
        "mean_leakage": st.column_config.NumberColumn("mean leakage", format="%.4f", help=HELP["mean_leakage"]),
        "n_flagged": st.column_config.NumberColumn("flagged", help=HELP["n_flagged"]),
        "top1": st.column_config.NumberColumn("top-1", format="percent", help=HELP["top1"]),
    })
    if not result.config.group_column:
        st.caption("Calibrated on all groups together: the guarantee holds on average over groups, not within "
                   "each one. Declare per-group calibration on the threat-model page for per-group guarantees.")
st.page_link(nav.FLAGGED, label=f"Next: the {metrics['n_flagged']:,} flagged documents",
             icon=":material/arrow_forward:")
