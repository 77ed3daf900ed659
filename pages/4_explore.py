"""Step 4: the certificate at any confidence level, recomputed from the stored attack (no re-attack)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from cpa_core.report.formatting import fmt_confidence, without_empty
from cpa_core.report.help import COLUMNS, HELP, column_label, help_texts
from cpa_core.report.metrics import summarize
from cpa_core.report.verdict import release_verdict
from cpa_ui import nav
from cpa_ui.analysis import group_table
from cpa_ui.cache import curve, panel_verdict_at, sizes_by_level
from cpa_ui.components import (
    attack_row,
    confidence_control,
    kpi_row,
    member_choice,
    panel_verdict_row,
    policy_controls,
    require_run,
    show_warnings,
    stale_notice,
    table_columns,
    verdict_box,
)
from cpa_ui.figures import fig_confidence_curve, fig_set_size_histogram, fig_set_sizes_by_level
from cpa_ui.state import AuditRun, state
from cpa_ui.text import plain


def most_flagged(groups: pd.DataFrame) -> str:
    """The group with the largest share of flagged documents, in words (its name as text, never as markdown)."""
    share = groups["n_flagged"] / groups["n_test"].clip(lower=1)
    if not (groups["n_flagged"] > 0).any():
        return "no document flagged in any group"
    top = groups.loc[share.idxmax()]
    return (f"the most flagged is {plain(top['group'])}, {int(top['n_flagged']):,} of {int(top['n_test']):,} "
            f"documents ({100 * share.max():.1f} %)")


@st.fragment
def certificate_at_level(run: AuditRun, shown: AuditRun, documents: str, curve_flag_below: int | None) -> None:
    """What a slider changes: the certificate of ``shown`` (the run, or the attacker of a panel the page shows), its
    KPIs and figures, and a panel's attackers side by side. A fragment: moving a slider reruns this part only (the
    chart across levels below does not depend on the confidence slider and is not sent again).

    The histogram needs only the certificate: it is drawn first, into its place below the KPIs, and the browser
    draws it while the summary behind the KPIs and the group table is computed. ``curve_flag_below``: the ``k`` the
    chart across levels counts with (``None``: that chart does not depend on ``k``); a new ``k`` reruns the page."""
    confidence = confidence_control("explore")
    policy = policy_controls("explore")
    if curve_flag_below is not None and policy.flag_below != curve_flag_below:
        st.rerun()
    verdict = panel_verdict_at(run.key, confidence, policy, run.panel) if run.is_panel else None
    if verdict is not None:
        panel_verdict_row(verdict)
        st.markdown(f"**{plain(shown.result.config.attacker.name)}**: its own certificate at "
                    f"{fmt_confidence(confidence)}")
    result = shown.result
    cert = result.certificate(confidence)
    headline = st.container()
    st.plotly_chart(fig_set_size_histogram(cert.set_sizes, policy.flag_below, documents=documents,
                                           flagged=cert.flags(policy), rule=policy.rule,
                                           title=f"Certified set sizes at {fmt_confidence(confidence)}"),
                    key="explore.histogram")
    st.caption(f"{HELP['set_size']} Red: the flagged documents ({policy.rule}), at the foot of each bar; right of "
               "the k line they are flagged by their linkage probability. Counts are on a log scale, so a single "
               "document still shows; the grey line is the cumulative share of documents.")

    summary = summarize(result, [confidence], policy)  # the KPIs and the group table, computed once
    metrics = summary.level(confidence)
    with headline:
        if verdict is None:
            verdict_box(release_verdict(summary, confidence), metrics, documents=documents)
        attack_row(metrics, policy)
        kpi_row(metrics, confidence, result.config.protocol)
        show_warnings(metrics.warnings)
    if result.test_split.groups is not None:
        # the per-group breakdown as a table with the coverage drawn in its cells: a second chart cost the browser
        # as much to redraw at each step as the histogram
        protocol = result.config.protocol
        shown = without_empty(group_table(summary, confidence), ("n_cal",))
        columns = table_columns(shown, protocol=protocol)
        columns["coverage"] = st.column_config.ProgressColumn(column_label("coverage", protocol), format="percent",
                                                              help=help_texts(protocol)[COLUMNS["coverage"][2]],
                                                              min_value=0.0, max_value=1.0)
        st.markdown(f"**Per group** at {fmt_confidence(confidence)}: {most_flagged(shown)}")
        st.dataframe(shown, hide_index=True, width="stretch", column_config=columns)
        if not result.config.group_column:
            st.caption("Calibrated on all groups together: the guarantee holds on average over groups, not within "
                       "each one. Declare per-group calibration on the threat-model page for per-group guarantees.")
    n_flagged = metrics.n_flagged if verdict is None else verdict.n_flagged  # a panel's: flagged by any attacker
    st.page_link(nav.FLAGGED, label=f"Next: the {n_flagged:,} flagged documents",
                 icon=":material/arrow_forward:")


run = require_run()
release = run.result.config.protocol == "release"
documents = "audited documents" if release else "test documents"
st.title("Explore")
st.caption(f"Configuration {run.config_id} ({plain(run.label)}); {len(run.result.test_split):,} "
           + ("audited documents, each calibrated by the others (release protocol)" if release else
              "test documents, held out from calibration (split protocol)")
           + ". Moving a slider recomputes the sets from the stored attack: nothing is attacked again.")
stale_notice(run)
shown = member_choice("explore", run, "Attacker whose certificate, figures and charts are shown")
flag_below = state.flag_below  # the k the chart across levels counts with (the k slider's value)
certificate_at_level(run, shown, documents, flag_below if release else None)

st.subheader("Across confidence levels" + (f": {shown.result.config.attacker.name}" if run.is_panel else ""))
if release:
    st.plotly_chart(fig_set_sizes_by_level(sizes_by_level(shown.key, shown.result), flag_below, documents),
                    key="explore.levels")
    st.caption("Under the release protocol each labelled document's set is calibrated by the other labelled "
               "documents (leave-one-out), so coverage equals the confidence level by construction: a coverage "
               "curve would be the diagonal and is no evidence, and is not shown. Shown instead: what a level costs "
               "and buys, the documents whose set is smaller than k (red) and how set sizes grow (orange).")
else:
    st.plotly_chart(fig_confidence_curve(curve(shown.key, shown.result)), key="explore.curve")
    st.caption("Coverage should track the dotted diagonal (the target) from above; the orange line shows the "
               "price: higher confidence, larger sets. Coverage levels off below the diagonal at the share of "
               "documents whose identity is in the pool (1 − ρ).")
