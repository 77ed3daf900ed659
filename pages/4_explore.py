"""Step 4: the certificate at any confidence level, recomputed from the stored attack (no re-attack)."""

from __future__ import annotations

import streamlit as st

from cpa_core.audit.results import AuditResult
from cpa_core.report.formatting import fmt_confidence, without_empty
from cpa_core.report.help import HELP
from cpa_core.report.metrics import summarize
from cpa_ui import nav
from cpa_ui.analysis import group_table
from cpa_ui.cache import curve
from cpa_ui.components import (
    attack_row,
    confidence_control,
    kpi_row,
    policy_controls,
    require_run,
    show_warnings,
    stale_notice,
    table_columns,
)
from cpa_ui.figures import fig_confidence_curve, fig_group_breakdown, fig_set_size_histogram
from cpa_ui.text import plain


@st.fragment
def certificate_at_level(result: AuditResult) -> None:
    """What a slider changes: the certificate, its KPIs and figures. A fragment: moving a slider reruns this
    part only (the confidence curve below does not depend on the sliders and is not sent again)."""
    confidence = confidence_control("explore")
    policy = policy_controls("explore")
    cert = result.certificate(confidence)
    summary = summarize(result, [confidence], policy)  # the KPIs and the group table, computed once
    metrics = summary.level(confidence)
    attack_row(metrics, policy)
    kpi_row(metrics, confidence, result.config.protocol)
    show_warnings(metrics.warnings)

    groups = group_table(summary, confidence)
    left, right = st.columns(2) if not groups.empty else (st.container(), None)
    with left:
        st.plotly_chart(fig_set_size_histogram(cert.set_sizes, policy.flag_below,
                                               title=f"Certified set sizes at {fmt_confidence(confidence)}"),
                        key="explore.histogram")
        st.caption(f"{HELP['set_size']} Red bars are flagged ({policy.rule}); the grey line is the "
                   "cumulative share of documents.")
    if right is not None:
        with right:
            st.plotly_chart(fig_group_breakdown(groups, confidence), key="explore.groups")
        shown = without_empty(groups, ("n_cal",))
        st.dataframe(shown, hide_index=True, width="stretch", column_config=table_columns(shown))
        if not result.config.group_column:
            st.caption("Calibrated on all groups together: the guarantee holds on average over groups, not within "
                       "each one. Declare per-group calibration on the threat-model page for per-group guarantees.")
    st.page_link(nav.FLAGGED, label=f"Next: the {metrics.n_flagged:,} flagged documents",
                 icon=":material/arrow_forward:")


run = require_run()
st.title("Explore")
st.caption(f"Configuration {run.result.config.config_id} ({plain(run.label)}); {len(run.result.test_split):,} test "
           "documents. Moving a slider recomputes the sets from the stored attack: nothing is attacked again.")
stale_notice(run)
certificate_at_level(run.result)

st.subheader("Across confidence levels")
st.plotly_chart(fig_confidence_curve(curve(run.key, run.result)), key="explore.curve")
st.caption("Coverage should track the dotted diagonal (the target) from above; the orange line shows the "
           "price: higher confidence, larger sets. Coverage levels off below the diagonal at the share of "
           "documents whose identity is in the pool (1 − ρ).")
