"""Step 6: several configurations on matched splits, side by side, and the drift stress test."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from cpa_core.common.errors import CPAError
from cpa_core.report.formatting import fmt_confidence, fmt_percent, without_empty
from cpa_core.report.stress import drift
from cpa_ui.analysis import compare_table, documents_of_group, kpis
from cpa_ui.attackers import declare, default_threat, form_defaults, offered_specs, usable_levels
from cpa_ui.cache import audit_run
from cpa_ui.components import require_data, show_error, show_warnings, table_columns
from cpa_ui.figures import fig_compare, fig_drift, fig_set_size_ecdf
from cpa_ui.memory import adopt_comparison
from cpa_ui.state import Comparison, set_widget, state, widget_key, widget_value
from cpa_ui.text import plain

data = require_data()
declared_threat = state.threat or default_threat(data)
threat = declared_threat  # a panel: one of its attackers for the comparisons that run one (chosen below)
st.title("Compare")
st.markdown("Certificates are only comparable on matched splits: every configuration below uses the same "
            "calibration and test documents (same split sizes and seed) and differs only in what you vary. All "
            "other settings are those declared on the threat-model page.")


def run_all(choices: list[tuple[str, object, object]]) -> list:
    """Audit each ``(label, threat, documents)``, with an overall and a per-run progress bar."""
    overall = st.progress(0.0, text="Starting…")
    runs = []
    for i, (label, choice, documents) in enumerate(choices):
        overall.progress(i / len(choices), text=f"Configuration {i + 1} of {len(choices)}: {label}")
        config, attacker = declare(data, choice, state.scores)
        placeholder = st.empty()
        try:
            with placeholder.container():
                runs.append(audit_run(data, config, attacker, documents=documents, label=label))
        finally:
            placeholder.empty()
    overall.empty()
    return runs


current = state.run
if current is not None and current.is_panel:
    st.subheader("The attacker panel's attackers side by side")
    members = compare_table(list(current.names), list(current.results), state.confidence, state.policy)
    st.caption(f"The current audit ({plain(current.label)}) is an attacker panel: its attackers were run and "
               "calibrated on their own on the same documents, so they compare as matched configurations. At "
               f"{fmt_confidence(state.confidence)} confidence, flagging {plain(state.policy.rule)}.")
    shown_members = without_empty(members)
    st.dataframe(shown_members, hide_index=True, width="stretch", key="compare.panel",
                 column_config=table_columns(shown_members))
    st.plotly_chart(fig_set_size_ecdf({name: result.certificate(state.confidence).set_sizes
                                       for name, result in zip(current.names, current.results)}, state.flag_below),
                    key="compare.panel_ecdf")

levels = usable_levels(data)
st.subheader("Configurations side by side")
if len(threat.attackers) > 1:
    attacker_key = widget_key("compare.attacker", threat.attacker)
    if widget_value(attacker_key) not in threat.attackers:
        set_widget(attacker_key, threat.attacker)
    alone = st.selectbox("Attacker of the comparisons below", list(threat.attackers), key=attacker_key,
                         help="The threat model declares an attacker panel; each configuration below runs one of "
                              "its attackers, with its parameters from the threat-model page.")
    threat = threat.alone(alone)
chosen = st.multiselect("Knowledge levels to compare", levels, key=widget_key("compare.levels", levels),
                        help="Each level is attacked and calibrated on the same split.")
if st.button("Run the comparison", type="primary", disabled=len(chosen) < 2, key="compare.run",
             icon=":material/play_arrow:"):
    try:
        runs = run_all([(level, replace(threat, knowledge=level), None) for level in chosen])
    except CPAError as error:
        show_error(error, "The comparison could not run: ")
    else:
        adopt_comparison(Comparison(runs=tuple(runs)))

offered = {spec.name: spec for spec in offered_specs() if not spec.needs_scores or state.scores is not None}
picked = st.multiselect(f"Attackers to compare (knowledge level {threat.knowledge})", list(offered),
                        format_func={name: spec.label for name, spec in offered.items()}.get,
                        key=widget_key("compare.attackers", [name for name in declared_threat.attackers
                                                             if name in offered]),
                        help="Each attacker runs on the same split with its parameters from the threat-model page "
                             "(the one declared there) or from the configuration file (the others), e.g. TF-IDF "
                             "beside an LLM forced choice.")
modes = st.multiselect("Query modes", ["direct", "direct_plus_clues"], format_func={
    "direct": "direct", "direct_plus_clues": "+ LLM clues"}.get,
    key=widget_key("compare.modes", [threat.query_mode]),
    help="Run each attacker with each query mode, e.g. TF-IDF direct beside TF-IDF + LLM clues (the clues need "
         "the LLM endpoint declared on the threat-model page).")
variants = [(name, mode) for name in picked for mode in (modes or [threat.query_mode])]
if st.button("Run the attacker comparison", disabled=len(variants) < 2, key="compare.run_attackers",
             icon=":material/play_arrow:"):
    def params_of(name: str) -> dict:
        if name in declared_threat.attackers:
            return declared_threat.params_of(name)
        return form_defaults(offered[name], data)
    try:
        runs = run_all([(offered[name].label + (" + LLM clues" if mode == "direct_plus_clues" else ""),
                         replace(threat.alone(name, params_of(name)), query_mode=mode), None)
                        for name, mode in variants])
    except CPAError as error:
        show_error(error, "The comparison could not run: ")
    else:
        adopt_comparison(Comparison(runs=tuple(runs)))

comparison = state.comparison
confidence = state.confidence
if comparison.runs:
    table = compare_table([run.label for run in comparison.runs], [run.result for run in comparison.runs],
                          confidence, state.policy)
    st.caption(f"At {fmt_confidence(confidence)} confidence, flagging {state.policy.rule} (set both on Explore).")
    show_warnings(f"{run.label}: {warning}" for run in comparison.runs
                  for warning in kpis(run.result, confidence, state.policy).warnings)
    st.plotly_chart(fig_compare(table, confidence), key="compare.bars")
    shown = without_empty(table)
    st.dataframe(shown, hide_index=True, width="stretch", column_config=table_columns(shown))
    st.plotly_chart(fig_set_size_ecdf({run.label: run.result.certificate(confidence).set_sizes
                                       for run in comparison.runs}, state.flag_below), key="compare.ecdf")
    st.caption("A stronger attacker (more knowledge) concentrates its weight, so at the same confidence its sets "
               "are smaller and more documents fall below k: the curve rises earlier.")

st.subheader("Drift stress test: calibrate on A, test on B")
st.markdown("A certificate is valid for the configuration it was calibrated on. Here A's threshold is applied to "
            "B's test documents, as if the curator had calibrated under the wrong assumptions.")
modes = (["knowledge"] if len(levels) > 1 else []) + (["groups"] if len(data.groups) > 1 else [])
if not modes:
    st.info("The drift test needs two declared knowledge levels the registry supports, or documents in at least "
            "two groups.", icon=":material/info:")
    st.stop()
mode = st.radio("A and B differ in", modes, horizontal=True, key=widget_key("drift.mode", modes[0]),
                format_func={"knowledge": "the attacker's knowledge", "groups": "the release mechanism (group)"}.get)
options = levels if mode == "knowledge" else data.groups
left, right = st.columns(2)
# default: calibrate where the attacker does best, test where it does worst, the drift that hurts coverage
a = left.selectbox("A: calibrated on", options, key=widget_key(f"drift.a.{mode}", options[-1]))
b = right.selectbox("B: tested on", options, key=widget_key(f"drift.b.{mode}", options[0]))
if st.button("Run the drift test", disabled=a == b, key="drift.run", icon=":material/play_arrow:"):
    if mode == "knowledge":
        choices = [(f"{name} (all groups)", replace(threat, knowledge=name), None) for name in (a, b)]
    else:
        # each group alone: default half/half split of its documents, one threshold for it
        pooled = replace(threat, per_group=False, n_cal=None, n_test=None)
        choices = [(f"{threat.knowledge} on {group}", pooled, documents_of_group(data.documents, group))
                   for group in (a, b)]
    try:
        run_a, run_b = run_all(choices)
        table = drift(run_a.result, run_b.result)
    except CPAError as error:
        show_error(error, "The drift test could not run: ")
    else:
        state.comparison = replace(state.comparison, drift=table, drift_labels=(run_a.label, run_b.label))
comparison = state.comparison
if comparison.drift is not None:
    table, (label_a, label_b) = comparison.drift, comparison.drift_labels
    st.plotly_chart(fig_drift(table), key="drift.figure")
    show = without_empty(table.drop(columns=["calibrated_on", "tested_on"]))
    st.dataframe(show, hide_index=True, width="stretch",
                 column_config=table_columns(show, {"coverage": "drift_coverage"}))
    drifted = table[table["calibration"].str.startswith("drift")].set_index("confidence")["coverage"]
    own = table[table["calibration"].str.startswith("own")].set_index("confidence")["coverage"]
    hurt = [c for c in drifted.index if drifted[c] < min(c, own[c])]
    verdict = ("With A's threshold, coverage on B falls below the target: " + "; ".join(
        f"{fmt_percent(drifted[c])} instead of {fmt_percent(c, 0)} (recalibrated on B: {fmt_percent(own[c])})"
        for c in hurt) + "." if hurt else "Here coverage on B stays at the level B's own calibration reaches, but "
                                          "that is luck, not a guarantee: swap A and B to see it fail.")
    st.info(f"A = {plain(label_a)}, B = {plain(label_b)}. {verdict} Why: q̂ is the (1 − α) quantile of the nonconformity scores "
            "of the true identities under A. When the attacker knows more, or the release leaks more or less, the "
            "scores of the true identities under B follow another distribution, so A's quantile no longer cuts off "
            "a share α of them: calibration and test documents are no longer exchangeable, which is the one "
            "assumption of the guarantee. The rows 'own (recalibrated on B)' show that recalibrating on B restores "
            "coverage; that is why every change of configuration needs its own calibration.",
            icon=":material/lightbulb:")
