"""Step 3: run the attack on the documents of the declared protocol, calibrate, and check the calibration."""

from __future__ import annotations

import streamlit as st

from cpa_core.common.errors import CPAError
from cpa_core.report.formatting import fmt_confidence, fmt_percent
from cpa_core.report.help import help_texts
from cpa_core.report.metrics import summarize
from cpa_core.report.verdict import release_verdict
from cpa_core.store.bundle import declared_toml
from cpa_ui import nav
from cpa_ui.analysis import calibration_table, group_table, strata_table, table_height
from cpa_ui.cache import declared_run, panel_verdict_at
from cpa_ui.components import (
    attack_row,
    declared,
    member_choice,
    panel_verdict_row,
    require_data,
    show_error,
    show_warnings,
    stale_message,
    table_columns,
    verdict_box,
)
from cpa_ui.history import record_calibration
from cpa_ui.memory import adopt_run
from cpa_ui.state import state
from cpa_ui.text import plain

INTRODUCTION = {
    "release": "The attacker ranks the registry for every released document, and every document is certified. The "
               "labelled documents, whose identities are known, calibrate the conformal threshold q̂ for each other: "
               "each one's threshold leaves its own score out, and each unlabelled document is certified against "
               "all of them, so that certified sets contain the true identity with the chosen confidence.",
    "split": "The attacker ranks the registry for every calibration and test document. On the calibration "
             "documents, whose identities are known, the conformal threshold q̂ is set so that certified sets "
             "contain the true identity with the chosen confidence; the held-out test documents check it.",
}
COVERAGE_READING = {
    "release": "Under the release protocol coverage is about ⌈n(1 − α)⌉/n by construction (each labelled document's "
               "set leaves its own score out): a property of the method, not a check of it.",
    "split": "Read coverage against the confidence level: with exchangeable data it is at least the target on "
             "average; a test split of n documents fluctuates by about ±1/√n.",
}

data = require_data()
st.title("Calibrate")
declaration = declared(data)
if declaration is None:
    st.page_link(nav.THREAT, label="Fix the threat model", icon=":material/shield_person:")
    st.stop()
config = declaration.config
st.markdown(INTRODUCTION[config.protocol]
            + (f" Each of the {len(declaration.members)} attackers of the panel is run and calibrated on its own, one "
               "after the other, on the same documents." if declaration.is_panel else ""))
key = f"{data.fingerprint}:{declaration.config_id}"
run = state.run
current = run is not None and run.key == key
attackers = (f"attackers {plain(', '.join(declaration.names))} (a panel: each run and calibrated on its own)"
             if declaration.is_panel else f"{plain(config.attacker.name)} attacker")
st.caption(f"Declared configuration {declaration.config_id}: knowledge {plain(config.knowledge.name)} "
           f"({plain(', '.join(config.knowledge.fields))}), {attackers}, score {config.score}, "
           + ("release protocol (every document certified)" if config.protocol == "release" else
              f"split protocol: n_cal {config.n_cal}, n_test {config.n_test}, seed {config.seed}")
           + (", calibrated per group" if config.group_column else "") + ".")
with st.expander("Every declared setting (audit.toml)", icon=":material/settings:"):
    st.caption("What this audit certifies, exactly: the same file with `cpa audit --config audit.toml` on the same "
               "files declares the same configuration (the files are pinned by their SHA-256). The confidence level "
               "and the release policy chosen on later pages are added to it in the exports."
               + (" One file per attacker of the panel: each declares that attacker's audit." if declaration.is_panel
                  else ""))
    places = st.tabs(list(declaration.names)) if declaration.is_panel else [st.container()]
    for place, member in zip(places, declaration.members):
        place.code(declared_toml(member.config), language="toml")

with st.expander("Where the attack runs", icon=":material/hub:"):
    scheduler = st.text_input(
        "Dask scheduler", key="calibrate.scheduler", placeholder="this process",
        help="Empty: the attack runs in this process, on every core. 'local': two worker processes on this machine. "
             "An address such as tcp://10.0.0.5:8786: the workers of that cluster. The results are the same.").strip()
    st.caption("On a cluster, the documents and the registry are sent to its workers: use only a cluster you "
               "are allowed to process these data on.")

label = "Run the attack and calibrate" if not current else "Run again"
if st.button(label, type="primary" if not current else "secondary", icon=":material/play_arrow:",
             key="calibrate.run"):
    placeholder = st.empty()
    try:
        with placeholder.container():
            run = declared_run(data, declaration, scheduler=scheduler or None)
    except CPAError as error:
        show_error(error, "The audit could not run: ")
        st.stop()
    finally:
        placeholder.empty()
    run, current = record_calibration(run), True  # a history failure is a warning: the run is kept
    adopt_run(run)  # the audit it replaces is let go
    state.notice = f"Calibrated in {run.seconds:.1f} s."

if run is None:
    st.info("Not calibrated yet.", icon=":material/hourglass_empty:")
    st.stop()
stale = stale_message(run, data, declaration.config_id)
if stale is not None:
    st.warning(plain(f"{stale} Run the calibration for the documents and the configuration declared now."),
               icon=":material/history:")
if state.notice:
    st.success(state.notice, icon=":material/check_circle:")
    state.notice = None

verdict_label = "Verdict"
if run.is_panel:
    st.subheader(f"The attacker panel at {fmt_confidence(state.confidence)} confidence")
    panel_verdict_row(panel_verdict_at(run.key, state.confidence, state.policy, run.panel))
    st.subheader("Each attacker's calibration")
    run = member_choice("calibrate", run, "Attacker whose calibration is shown below")
    verdict_label = f"Its own verdict ({run.result.config.attacker.name} alone)"
result = run.result
protocol = result.config.protocol
helps = help_texts(protocol)
levels = sorted(set(result.config.confidences) | {state.confidence})
summary = summarize(result, levels, state.policy)  # every figure of this page, computed once
table = calibration_table(summary)
metrics = summary.level(state.confidence)
columns = st.columns(4)
columns[0].metric("Calibration documents", f"{metrics.n_cal:,}", help=helps["n_cal"])
columns[1].metric("Certified documents" if protocol == "release" else "Test documents",
                  f"{metrics.n_test:,}", help=helps["n_test"])
columns[2].metric("Candidate-miss rate ρ", fmt_percent(metrics.candidate_miss_rate), help=helps["miss_rate"])
columns[3].metric("Top-1 accuracy (no guarantee)", fmt_percent(metrics.top1), help=helps["top1"])

st.subheader(f"The attack at {fmt_confidence(state.confidence)} confidence")
verdict_box(release_verdict(summary, state.confidence), metrics, verdict_label,
            "certified documents" if protocol == "release" else "held-out test documents")
attack_row(metrics, state.policy)
show_warnings(w for level in levels for w in summary.level(level).warnings)
for name, value in result.inputs.get("learned", {}).items():
    if name.endswith("temperature"):
        st.info(f"Temperature 'auto': T = {value:.3g}, chosen before the attack as "
                f"{result.inputs['learned'].get('temperature_rule', 'declared')}.", icon=":material/thermostat:")

st.subheader("Threshold and coverage per confidence level")
st.dataframe(table, hide_index=True, width="stretch", height=table_height(table),
             column_config=table_columns(table, protocol=protocol))
st.caption(COVERAGE_READING[protocol] + " An infinite q̂ certifies nothing: every set is the whole pool."
           + (" With per-group calibration each group has its own q̂ (below)." if result.config.group_column else ""))

st.subheader("Certainty strata")
stratification = ("each declared group is one stratum, calibrated on its own labelled documents (none is cut into "
                  "certainty strata)" if not summary.strata and result.config.group_column else
                  summary.stratification.split(";")[0])
st.caption(plain(stratification[0].upper() + stratification[1:]) + ". " + helps["strata"])
if summary.strata:
    strata = strata_table(summary)
    st.dataframe(strata, hide_index=True, width="stretch", height=table_height(strata),
                 column_config=table_columns(strata, protocol=protocol))

if result.config.group_column:
    st.subheader("Per-group thresholds")
    groups = group_table(summary, state.confidence)[
        ["group", "n_cal", "n_test", "threshold", "coverage", "coverage_conditional", "candidate_miss_rate"]]
    st.dataframe(groups, hide_index=True, width="stretch", height=table_height(groups),
                 column_config=table_columns(groups, protocol=protocol))
    st.caption(f"At {fmt_confidence(state.confidence)} confidence. Each group's threshold uses only its own "
               "calibration documents, so small groups need more calibration data.")
st.page_link(nav.EXPLORE, label="Next: explore the certificate", icon=":material/arrow_forward:")
