"""Step 5: the documents the release policy flags, riskiest first, and a drill-down on each."""

from __future__ import annotations

import numpy as np
import streamlit as st

from cpa_core.redaction.suggestions import WITHHOLD, apply_edits
from cpa_core.redaction.whatif import release_what_if
from cpa_core.report.evidence import N_CANDIDATES, document_evidence, driving_terms, release_function_words
from cpa_core.report.formatting import counted, fmt_confidence, fmt_number
from cpa_core.report.help import HELP
from cpa_core.report.metrics import summarize
from cpa_core.report.verdict import release_verdict
from cpa_core.report.worklist import worklist
from cpa_ui import nav
from cpa_ui.analysis import (
    DRILLDOWN_CHOICES,
    candidate_table,
    document_facts,
    document_members,
    flagged_table,
    kpis,
    panel_flagged_table,
    rescored_members,
    row_of,
    text_of,
)
from cpa_ui.cache import explainer, panel_verdict_at
from cpa_ui.components import (
    attack_row,
    document_members_columns,
    member_choice,
    panel_flagged_columns,
    panel_verdict_row,
    policy_controls,
    results_page,
    show_warnings,
    table_columns,
    verdict_box,
    what_if_section,
)
from cpa_ui.figures import fig_candidate_weights
from cpa_ui.redaction import (
    current_review,
    document_text,
    drill_down_suggestion,
    edits_table,
    has_rows,
    new_review,
    redaction_settings,
    rescore,
    strategy_label,
    with_curator_text,
)
from cpa_ui.state import reseeded_widget, set_widget, state, value_changed, widget_key, widget_value
from cpa_ui.text import highlight_spans, plain

data, panel_run = results_page("Flagged documents")
confidence = state.confidence
st.caption(f"Certified sets at {fmt_confidence(confidence)} confidence (change it on the Explore page), "
           f"configuration {panel_run.config_id} ({plain(panel_run.label)}).")
policy = policy_controls("flagged")
if panel_run.is_panel:
    show_warnings(f"under {name}, {warning}" for name, member in zip(panel_run.names, panel_run.results)
                  for warning in kpis(member, confidence, policy).warnings)
    panel_verdict_row(panel_verdict_at(panel_run.key, confidence, policy, panel_run.panel))
    flagged = panel_flagged_table(panel_run.panel, confidence, policy, panel_run.config_id)
    st.caption(f"Flagged when any attacker flags it ({plain(policy.rule)} under that attacker); the column 'flagged "
               "by' says which attackers and by which rule. Riskiest first: the largest linkage probability over the "
               "attackers, then the smallest set, each with the attacker that gave it. Each attacker's own worklist, "
               "with the terms that drive its matches, is on the Report page.")
    shown = flagged.drop(columns=["config_id", "confidence"])
    columns = panel_flagged_columns(shown)
else:
    flagged = worklist(panel_run.result.certificate(confidence), policy, panel_run.config_id)
    summary = summarize(panel_run.result, [confidence], policy)
    metrics = summary.level(confidence)
    verdict_box(release_verdict(summary, confidence), metrics, documents="certified documents"
                if panel_run.result.config.protocol == "release" else "held-out test documents")
    show_warnings(metrics.warnings)
    attack_row(metrics, policy)
    st.caption(f"Flagged when {policy.rule}; the column 'flagged by' says which rule. Riskiest first: highest linkage "
               "probability, then smallest set. The export on the Report page adds the terms that drive each match.")
    shown = flagged_table(flagged).drop(columns=["driving_terms", "evidence", "config_id", "confidence"])
    columns = table_columns(shown)
picked = st.dataframe(shown, hide_index=True, width="stretch", height=320, key="flagged.table",
                      column_config=columns, on_select="rerun", selection_mode="single-row")
st.caption("Click a row to open it below.")
searched_review = None if panel_run.is_panel else current_review(panel_run)
searched = () if searched_review is None else searched_review.suggestions
what_if_section(release_what_if(panel_run.panel if panel_run.is_panel else panel_run.result, searched, policy,
                                confidence), "flagged", bool(searched))
run = member_choice("flagged", panel_run, "Attacker whose evidence and certified set the drill-down shows")
result = run.result
cert = result.certificate(confidence)

st.subheader("Drill-down")
if len(flagged):
    choices = flagged["doc_id"].astype(str).tolist()
    sizes = dict(zip(choices, flagged["set_size"]))
else:
    st.caption("No document is flagged under this policy; inspect any "
               + ("document" if result.config.protocol == "release" else "test document") + ", smallest set first.")
    order = np.argsort(cert.set_sizes, kind="stable")
    choices = cert.split.table.doc_ids[order].astype(str).tolist()
    sizes = dict(zip(choices, cert.set_sizes[order]))
key = widget_key("flagged.drilldown", choices[0])
clicked = [shown["doc_id"].astype(str).iloc[i] for i in picked.selection.rows if i < len(shown)]
new_click = value_changed("flagged.clicked", clicked[0] if clicked else None)
if clicked and new_click:  # a new click opens that row
    set_widget(key, clicked[0])
if widget_value(key) not in sizes:
    set_widget(key, choices[0])
listed = choices[:DRILLDOWN_CHOICES]  # a long release: the riskiest ones, and the one picked in the table
if widget_value(key) not in set(listed):
    listed.append(widget_value(key))
labels = {d: f"{d} · |C| = {sizes[d]}" for d in listed}  # a widget keeps its format_func: no page function
doc_id = st.selectbox("Document", listed, key=key, format_func=labels.get,
                      help=None if len(listed) == len(choices) else
                      f"The {DRILLDOWN_CHOICES:,} smallest sets; click any row of the table above to open another.")
row = row_of(cert, doc_id)
facts = document_facts(cert, row)
if panel_run.is_panel:
    st.markdown(f"**{plain(doc_id)} under each attacker** (the worst over them is the panel's)")
    members = document_members(panel_run.panel.certificate(confidence), row, policy)
    st.dataframe(members, hide_index=True, width="stretch", key="flagged.members",
                 column_config=document_members_columns(members))
    st.markdown(f"Below: **{plain(result.config.attacker.name)}**'s evidence and certified set.")
level = result.config.knowledge
columns = st.columns(6)
columns[0].metric("Set size |C|", f"{facts['set_size']:,}", help=HELP["set_size"],
                  delta="no information: every candidate ties" if facts["uninformative"] else
                  None if facts["stratum"] is None else plain(f"stratum {facts['stratum']}"), delta_color="off")
columns[1].metric("Linkage probability", "–" if facts["linkage_probability"] is None else
                  fmt_number(facts["linkage_probability"]),
                  delta=None if facts["linkage_low"] is None else
                  f"interval {fmt_number(facts['linkage_low'])}–{fmt_number(facts['linkage_high'])}", delta_color="off",
                  help=HELP["linkage_probability"] + " " + HELP["linkage_interval"])
columns[2].metric("True identity's rank", "not in pool" if facts["true_rank"] is None else f"{facts['true_rank']:,}",
                  help=HELP["true_rank"])
columns[3].metric("Truth in the set", "yes" if facts["covered"] else "no",
                  help="Whether this document's certified set contains its true identity (labelled data).")
columns[4].metric("Pool size", f"{facts['pool_size']:,}", help=HELP["pool_size"])
columns[5].metric("Leakage proxy", fmt_number(facts["leakage"]), help=HELP["leakage"])
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
    st.caption("Highlighted: the passages of this text (words, sentences or LLM clues, as the attacker explains "
               "its matches) that weigh most in its match to its top "
               f"{N_CANDIDATES} candidates ({plain(', '.join(terms)) if terms else 'none'}); anonymiser placeholders "
               "and the release's function words are never evidence ("
               + plain(release_function_words(cert.split).describe()["rule"]) + "). The worklist lists the same "
               "spans." if explain else
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


@st.fragment
def edit_and_rescore(doc_id: str, certified: int, released: str, flagged: bool) -> None:
    """Suggested edits to accept, the text to edit, its set size re-scored against the stored calibration, and the
    text as the curator's decision for the release: a fragment, so a committed edit reruns only this part."""
    settings = redaction_settings(run)
    strategy = settings["strategy"]
    suggestion = drill_down_suggestion(run, data, doc_id, float(confidence), policy) if flagged else None
    if flagged:
        common = f"those in more than {settings['common']:.0%} of the documents" if settings["common"] else "none"
        st.caption(plain(f"Suggested by the Redact page's search, with its settings: replace redacted words by "
                         f"{strategy_label(strategy)}; never redact: {', '.join(settings['deny']) or 'nothing listed'}"
                         f"; function words never redacted: {common}. Change them on the Redact page: both pages then "
                         "suggest the same edits."))
    accepted = []
    if suggestion is not None and suggestion.edits:
        st.markdown(f"**Suggested:** {counted(len(suggestion.edits), 'edit')}, "
                    f"{counted(suggestion.characters, 'character')}; |C| "
                    f"{suggestion.set_size_before:,} → {suggestion.set_size_after:,} (indicative); each lowers the "
                    "document's risk" + ("" if suggestion.action != WITHHOLD else
                                         f". Not enough: withhold it ({plain(suggestion.reason)})"))
        edits = edits_table(suggestion)
        chosen = st.data_editor(edits, hide_index=True, width="stretch", key=f"flagged.edits.{doc_id}.{strategy}",
                                disabled=[c for c in edits.columns if c != "accept"], column_config={
                                    "accept": st.column_config.CheckboxColumn(help="Apply this edit."),
                                    "offset": st.column_config.NumberColumn(help="Character offset in the released "
                                                                                 "text."),
                                    "set_size_after": st.column_config.NumberColumn(
                                        "|C| once redacted", help="The set once this term and the ones above it are "
                                                                  "redacted (indicative).")})
        accepted = [edit for edit, keep in zip(suggestion.edits, chosen["accept"]) if keep]
    elif suggestion is not None:
        st.caption("No suggestion: no redaction of this document's evidence lowers its risk"
                   + (f" ({plain(suggestion.reason)})." if suggestion.reason else "."))
    else:
        st.caption(f"Not flagged under this policy ({plain(policy.rule)} does not hold): nothing to suggest; you may "
                   "still edit the text below.")
    review = current_review(run)
    start = document_text(review, doc_id, released) if review is not None and has_rows(review, doc_id) else \
        apply_edits(released, accepted)
    text_key = reseeded_widget(f"flagged.edited.{doc_id}", (strategy, tuple(e.offset for e in accepted),
                                                            review.version if review is not None else None),
                               lambda: start)  # a changed choice of edits starts again
    edited = st.text_area("Edited text (Ctrl+Enter re-scores it)", key=text_key, height=200)
    rescored = rescore(run, data, confidence, doc_id, edited, explain)
    left, right = st.columns(2)
    left.metric("Certified |C| of the released text", f"{certified:,}", help=HELP["set_size"])
    right.metric("|C| of the edited text (indicative)", f"{rescored.set_size:,}",
                 delta=rescored.set_size - certified or None,
                 help="The edited text attacked again and counted under the stored calibration.")
    verdict = "reaches" if rescored.set_size >= policy.flag_below else "does not reach"
    st.warning(f"Indicative: the edited text {verdict} k = {policy.flag_below} under the stored calibration. An "
               "edited release is a new release mechanism: only a new calibration certifies it (Redact & re-audit "
               "page).", icon=":material/science:")
    st.html(f"<div class='cpa-document' style='line-height:1.6; padding:0.8rem; border:1px dashed #bbb; "
            f"border-radius:0.4rem'>{highlight_spans(edited, rescored.evidence)}</div>")
    st.caption("Highlighted: what still drives the edited text's match.")
    if st.button("Use this text in the release", key=f"flagged.use.{doc_id}", icon=":material/playlist_add_check:",
                 disabled=edited == released and (review is None or not has_rows(review, doc_id)),
                 help="Its changes become rows of the review table on the Redact page, as your decisions for this "
                      "document; the redacted release is built from that table."):
        state.review = with_curator_text(review or new_review(run, data), doc_id, released, edited)
        st.success("This document's text is in the review table (Redact page).", icon=":material/check_circle:")


@st.fragment
def edit_and_rescore_panel(doc_id: str, released: str) -> None:
    """The text to edit, re-scored under every attacker of the panel against their stored calibrations: a fragment,
    so a committed edit reruns only this part. No edit is suggested: a suggestion searched against one attacker may
    raise another's risk."""
    st.info("Edits are not suggested for an attacker panel here: the redaction of a panel runs from the command line "
            "(`cpa redact <panel audit folder>`), where every attacker's risk is read. Edit the text below to see "
            "what each attacker makes of it.", icon=":material/terminal:")
    text_key = reseeded_widget(f"flagged.edited.{doc_id}", released, lambda: released)
    edited = st.text_area("Edited text (Ctrl+Enter re-scores it under every attacker)", key=text_key, height=200)
    names = panel_run.names
    sizes = [rescore(panel_run.member(name), data, confidence, doc_id, edited,
                     explain if name == result.config.attacker.name else None) for name in names]
    certified = panel_run.panel.certificate(confidence)
    at_row = row_of(certified.members[0], doc_id)
    table = rescored_members(names, [int(member.set_sizes[at_row]) for member in certified.members],
                             [found.set_size for found in sizes], policy.flag_below)
    st.dataframe(table, hide_index=True, width="stretch", key="flagged.rescored", column_config=table_columns(table))
    st.warning("Indicative: each attacker's set of the edited text under its stored calibration. An edited release "
               "is a new release mechanism: only a new calibration of every attacker certifies it.",
               icon=":material/science:")
    evidence = sizes[names.index(result.config.attacker.name)].evidence
    st.html(f"<div class='cpa-document' style='line-height:1.6; padding:0.8rem; border:1px dashed #bbb; "
            f"border-radius:0.4rem'>{highlight_spans(edited, evidence)}</div>")
    st.caption(f"Highlighted: what still drives {result.config.attacker.name}'s match of the edited text.")


st.subheader("Edit and re-score")
if panel_run.is_panel:
    edit_and_rescore_panel(doc_id, text_of(data.documents, doc_id))
elif explain is None:
    st.caption("This attacker does not say what drives its matches, so no redaction can be suggested; edit the "
               "release and calibrate it again.")
else:
    edit_and_rescore(doc_id, facts["set_size"], text_of(data.documents, doc_id),
                     bool(cert.flags(policy)[row]))

st.page_link(nav.REDACT, label="Next: redact the release and audit it again", icon=":material/arrow_forward:")
