"""Conformal Privacy Auditing: the curator's dashboard.

Run from the repository root with ``streamlit run app.py``. This file wires the navigation and the
sidebar, loads the bundled sample data on first open, and draws the home page; each workflow step is
a page in ``pages/``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from cpa_core.common.errors import CPAError
from cpa_core.report.formatting import fmt_confidence, fmt_percent
from cpa_core.report.html import decided_sentence
from cpa_ui import nav
from cpa_ui.analysis import kpis
from cpa_ui.attackers import declare_panel
from cpa_ui.cache import panel_verdict_at
from cpa_ui.components import audit_status, ensure_data
from cpa_ui.memory import give_back
from cpa_ui.state import state
from cpa_ui.text import plain

FAVICON = Path(__file__).resolve().parent / "cpa_ui" / "favicon.png"  # served by this machine, never a CDN
INTRODUCTION = (
    "Conformal Privacy Auditing (CPA) measures how far an attacker with background knowledge can narrow a "
    "released, de-identified document down to the people in a registry. "
    "You declare the threat: which registry fields the attacker knows and how it ranks candidates. "
    "CPA runs that attack on documents whose subjects are known and calibrates a threshold on them, so that "
    "every audited document gets a certified set of people that contains its true subject with the confidence "
    "you choose (for example 95 %). "
    "The guarantee needs only one assumption: the calibration documents and the audited documents are "
    "exchangeable, drawn alike from one release under one fixed threat configuration. "
    "A small set is a risk — a set of 3 means the attacker is certifiably down to three people — so "
    "documents with sets smaller than your threshold k are flagged for redaction or withholding."
)


def attackers_text(attackers: tuple[str, ...]) -> str:
    """The declared attacker, or the panel of attackers, in words (names shown as text)."""
    if len(attackers) == 1:
        return f"{plain(attackers[0])} attacker"
    return f"a panel of {len(attackers)} attackers ({plain(', '.join(attackers))})"


def knowledge_text() -> str:
    """The declared knowledge level, named as the declared configuration names it (as every other page, the exports
    and the history do: ``full`` for every registry field, whichever way it was chosen)."""
    try:
        return f"knowledge level {plain(declare_panel(state.data, state.threat, state.scores).config.knowledge.name)}"
    except CPAError:
        return "a knowledge level that is not valid yet"


def home() -> None:
    st.title("Conformal Privacy Auditing")
    st.markdown(INTRODUCTION)
    st.subheader("Your audit")
    data, run = state.data, state.run
    source = "" if data is None else "bundled sample" if data.source == "sample" else "uploaded"
    steps = [
        (data is not None, nav.DATA,
         f"{len(data.documents):,} documents and {len(data.registry):,} profiles loaded ({source})" if data
         else "load documents and a registry"),
        (state.threat is not None, nav.THREAT,
         f"{knowledge_text()}, " + attackers_text(state.threat.attackers)
         if state.threat and data is not None else "declare the attacker and its knowledge"),
        (run is not None, nav.CALIBRATE,
         f"calibrated ({plain(run.label)}, configuration {run.config_id})" if run
         else "run the attack and calibrate"),
    ]
    for done, page, text in steps:
        icon = ":material/check_circle:" if done else ":material/radio_button_unchecked:"
        st.page_link(page, label=text, icon=icon)
    if state.data_error:
        st.error(f"The bundled sample data could not be loaded: {plain(state.data_error)}", icon=":material/error:")
    if run is not None and run.is_panel:
        verdict = panel_verdict_at(run.key, state.confidence, state.policy, run.panel)
        st.info(f"At {fmt_confidence(state.confidence)} confidence, {verdict.n_flagged:,} of {verdict.n_documents:,} "
                f"documents are flagged by at least one of the {len(run.names)} attackers ({state.policy.rule}). "
                f"Panel verdict: {verdict.title}. {plain(decided_sentence(verdict))}", icon=":material/flag:")
        st.page_link(nav.EXPLORE, label="Explore the certificates", icon=":material/query_stats:")
    elif run is not None:
        metrics = kpis(run.result, state.confidence, state.policy)
        release = run.result.config.protocol == "release"
        st.info(f"At {fmt_confidence(state.confidence)} confidence, {metrics.n_flagged:,} of "
                f"{metrics.n_test:,} {'released' if release else 'test'} documents "
                f"({fmt_percent(metrics.flagged_share)}) are flagged ({state.policy.rule}); "
                + ("every released document has a certified set (coverage by construction "
                   f"{fmt_percent(metrics.coverage)})." if release else
                   f"coverage on the held-out test split is {fmt_percent(metrics.coverage)}."),
                icon=":material/flag:")
        st.page_link(nav.EXPLORE, label="Explore the certificate", icon=":material/query_stats:")
    else:
        st.page_link(nav.CALIBRATE, label="Start: calibrate the default audit on the sample data",
                     icon=":material/play_arrow:")


st.set_page_config(page_title="Conformal Privacy Auditing", page_icon=str(FAVICON), layout="wide")
ensure_data()
navigation = st.navigation(
    [st.Page(home, title="Home", icon=":material/home:", default=True)]
    + [st.Page(spec.path, title=spec.title, icon=spec.icon) for spec in nav.WORKFLOW])
try:
    navigation.run()
finally:  # after the page, so that it shows what the page did (also when the page stops early)
    audit_status()
    give_back()  # the memory of an audit let go and still held by the page's objects when it was let go
