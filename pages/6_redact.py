"""Step 6: the redactions of every flagged document in one review table (each edit and each document to withhold,
accepted or rejected), the release the accepted rows make, and its audit, certified in place: recorded in the
history, side by side with the audit before, and selectable as the current audit."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import streamlit as st

from cpa_core.attack.function_words import MIN_DOCUMENTS, function_words
from cpa_core.audit.project import make_llm_client
from cpa_core.common.errors import CPAError
from cpa_core.llm.client import redact_url
from cpa_core.redaction.decisions import (
    accepted,
    decisions_csv,
    decisions_table,
    proposed_decisions,
    redaction_log,
)
from cpa_core.redaction.suggestions import WITHHOLD, redacted_file, redacted_name, source_name, suggested_worklist
from cpa_core.redaction.rewrite import Rewriter
from cpa_core.redaction.whatif import release_what_if
from cpa_core.report.formatting import counted, fmt_confidence, kept_text
from cpa_core.report.help import HELP
from cpa_core.report.worklist import worklist_csv
from cpa_ui import nav
from cpa_ui.cache import explained_worklist, explainer
from cpa_ui.components import policy_controls, results_page, show_error, table_columns, what_if_section
from cpa_ui.figures import fig_set_size_histogram
from cpa_ui.history import record_calibration
from cpa_ui.memory import adopt_run
from cpa_ui.redaction import (
    PAGE_ROWS,
    STRATEGIES,
    VIEWS,
    before_after,
    change_counts,
    current_review,
    decide_rows,
    evidence_terms,
    kept_now,
    reaudit,
    redaction_settings,
    reset_decisions,
    review_counts,
    review_positions,
    review_rows,
    rewrite_endpoint,
    strategy_label,
    tick_row,
    with_lists,
    with_search,
)
from cpa_ui.state import state, widget_key, widget_showing
from cpa_ui.text import plain


def words(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(w.strip() for w in text.split(",") if w.strip()))


data, run = results_page("Redact and re-audit")
if run.is_panel:  # a search against one attacker may raise another's risk: not done here for a panel
    st.info(f"The current audit is an attacker panel ({plain(', '.join(run.names))}): the redaction of a panel runs "
            "from the command line, where the search reads every attacker's risk and an attacker it never consulted "
            "grades the redacted release. Run `cpa audit` with the same attackers, then `cpa redact <panel audit "
            "folder>`. To redact against one attacker here, declare it alone on the Threat model page and calibrate.",
            icon=":material/terminal:")
    st.stop()
review = state.review
if review is not None and review.after is not None and review.after.key == run.key:
    # the current audit is a redacted release's: this page shows the redaction it came from
    st.info(f"The current audit is the redacted release's ({plain(run.label)}); below is the review it came from. "
            "To redact it further, reopen it from the History page as a release of its own.",
            icon=":material/info:")
    data, run = review.data, review.before
result = run.result
confidence = state.confidence
policy = policy_controls("redact")
cert = result.certificate(confidence)
n_flagged = int(cert.flags(policy).sum())
st.markdown(f"At {fmt_confidence(confidence)} confidence, **{n_flagged:,}** of {len(cert.set_sizes):,} documents are "
            f"flagged ({plain(policy.rule)}). For each, the search suggests the fewest words of its evidence whose "
            "redaction makes it acceptable under the stored calibration: every word it suggests lowers the "
            "document's risk (its set grows, its linkage probability falls or the attacker is less certain, and "
            "none of them gets worse), never raises it; a document no such redaction makes acceptable is to be "
            "withheld, with the reason. Review the table, build the release from the rows you accept, and audit it "
            "again: an edited release is calibrated anew, and only that audit certifies it."
            + (" Under the split protocol the calibration documents are redacted alike: the redacted release must be "
               "one release mechanism for its new calibration to certify it." if result.config.protocol == "split"
               else ""))
explain = explainer(run.key, data, run)
if explain is None:
    st.info("This attacker does not say which words drive its matches, so no redaction can be suggested. Edit the "
            "release yourself, load it on the Data page and calibrate it again.", icon=":material/info:")
    st.stop()

settings = redaction_settings(run)  # the last search's, and the lists as applied: the widgets start from them
left, middle, right = st.columns([1.2, 1, 1])
strategy = left.selectbox("Replace redacted words by", STRATEGIES,
                          key=widget_key("redact.strategy", settings["strategy"]), format_func=strategy_label)
deny = words(middle.text_input("Never redact (deny list)", key=widget_key("redact.deny", ", ".join(settings["deny"])),
                               placeholder="e.g. urlLink, the, yang",
                               help="Comma-separated words that identify no one (a link token, the release's "
                                    "function words): never suggested."))
allow = words(right.text_input("Always redact (allow list)",
                               key=widget_key("redact.allow", ", ".join(settings["allow"])),
                               placeholder="e.g. a ward's name",
                               help="Comma-separated words or phrases redacted wherever they occur, in every "
                                    "document, unless that raises the document's risk."))
common = st.number_input("Never redact words found in more than this share of the documents", min_value=0.0,
                         max_value=0.99, step=0.05, format="%.2f", key=widget_key("redact.common", settings["common"]),
                         help="Such words identify no one in this release (a link token, its function words): a "
                              "word in more than this share of the documents, or of the documents of its language "
                              f"where they number at least {MIN_DOCUMENTS} (each document's language is detected), is "
                              "never suggested in a document of that language; 0 proposes every word of the evidence.")
endpoint = rewrite_endpoint(data)
left, right = st.columns([2, 1], vertical_alignment="bottom")
rewrite = left.checkbox("Offer the documents the search would withhold to an LLM rewrite",
                        key=widget_key("redact.rewrite", False), disabled=endpoint is None,
                        help="The model of the LLM endpoint rewrites each such document without the clues the search "
                             "weighed; every attacker attacks the rewrite, and it is kept only when it is within the "
                             "policy and no riskier than the released text (else the document stays withheld, with the "
                             "reason). Sends those documents' text to the endpoint."
                             + ("" if endpoint is not None else " No LLM endpoint is declared: declare one on the "
                                                                "Threat model page or in the configuration file's "
                                                                "[llm] table."))
most = right.number_input("At most this many documents", min_value=1, step=10, disabled=not rewrite,
                          key=widget_key("redact.rewrite_max", 20),
                          help="The riskiest documents to withhold offered to the rewrite (each is one or two calls "
                               "to the endpoint).")
if rewrite:
    st.warning(f"The rewrite sends the text of up to {int(most):,} documents to "
               f"{redact_url(endpoint['base_url'])}.", icon=":material/cloud_upload:")
ask = (run.key, strategy, float(confidence), policy, deny, allow, float(common), int(most) if rewrite else None)
texts = data.documents.texts()  # the search's, the counts' and the edit log's
review = current_review(run)
if review is not None and review.table is not None:  # the lists decide the table's rows at once: no new search
    state.review = review = with_lists(review, deny, allow)
searched = review is not None and review.ask == ask
if not searched or not review.complete:
    if searched:
        st.warning(f"The search was stopped after {len(review.suggestions):,} of {review.total:,} flagged documents: "
                   "the table holds those. Suggest again to search them all.", icon=":material/pause_circle:")
    elif review is not None and len(review.table):
        st.info("The deny and allow lists are applied to the table's rows as you type them. Suggest redactions to "
                "search again with the settings above: the table then holds the new search's rows, your own edits, and "
                "every decision you took (unless you reset them).", icon=":material/info:")
    if n_flagged == 0 and not allow and review is None:
        st.success("No document is flagged under this policy: nothing to redact.", icon=":material/check_circle:")
        st.stop()
    if st.button("Suggest redactions for the flagged documents", type="primary", icon=":material/ink_eraser:",
                 key="redact.suggest"):
        stop = st.empty()
        stop.button("Stop", key="redact.stop", icon=":material/stop_circle:",
                    help="Stop the search: the documents done so far stay in the table.")
        bar = st.progress(0.0, text=f"Searching 0 of {n_flagged:,} flagged documents…")
        previous = review

        def progress(done, total):
            state.review = with_search(ask, run, data, done, total, decisions_table(done), previous)
            bar.progress(len(done) / max(total, 1), text=f"{len(done):,} of {total:,} flagged documents done")
        rewriter = None
        try:
            if rewrite:
                rewriter = Rewriter(make_llm_client(endpoint, purpose="The LLM rewrite"), seed=result.config.seed,
                                    max_documents=int(most))
            table, found = proposed_decisions(result, run.attacker, data.registry, texts,
                                              policy=policy, confidence=confidence, strategy=strategy, deny=deny,
                                              allow=allow, common_share=float(common) or None, progress=progress,
                                              rewriter=rewriter)
        except CPAError as error:
            show_error(error, "No redaction could be suggested: ")
            st.stop()
        finally:
            if rewriter is not None:
                rewriter.client.close()
            stop.empty()
        state.review = review = with_search(ask, run, data, found, len(found), table, previous,
                                            None if rewriter is None else rewriter.params())
        bar.empty()
    elif review is None:
        st.stop()

st.subheader("Review")
st.caption("A row per suggested edit (its document, «the words» → what they become, the evidence term, and the "
           "document's |C| and linkage probability before → once that term is redacted, indicative), per allow-list "
           "edit and per edit you wrote in the drill-down, and a row per document to withhold, whose edits are folded "
           "under it (not in the release). Tick a row to accept it; the release is built from the ticked rows only. "
           "Your decisions, and the rows the deny and allow lists decide, are kept when you search again.")
declared = result.with_policy(confidence, policy)  # what the worklist declares, as on the Report page
work = suggested_worklist(explained_worklist(run.key, declared.config.config_id, declared, data, run),
                          review.suggestions)
terms = evidence_terms(review, work)  # a tick changes no row's term: found once per run of the page
left, middle, right = st.columns([1.2, 1, 1])  # the filters: a choice reruns the page, a tick only the table
view = left.selectbox("Show", VIEWS, key=widget_key("redact.view", VIEWS[0]))
term = middle.selectbox("Evidence term", terms, key="redact.term", index=None, placeholder="every term",
                        disabled=not terms, help="Show the edits of one evidence term only (and reject them all "
                                                 "below).")
doc_id = right.text_input("Document", key="redact.doc", placeholder="every document",
                          help="A doc_id: its rows only.")


@st.fragment
def review_table(view: str, term: str | None, doc_id: str) -> None:
    """The review table of the rows the filters above choose (``view``, ``term``, ``doc_id``), its bulk actions, its
    counts and the downloads of what it decides: a fragment, so that a tick or a bulk action reruns this part only,
    whatever the size of the table (the whole page when it drops the audit drawn below, of the release the decisions
    made before)."""
    review = state.review
    if state.audit_drawn and review.after is None:
        st.rerun()
    table = review.table
    positions = review_positions(review, view, term, doc_id)
    pages = max(1, -(-len(positions) // PAGE_ROWS))
    page = 1 if pages == 1 else int(st.number_input(f"Page (of {pages:,}, {PAGE_ROWS} rows each)", min_value=1,
                                                    max_value=pages, step=1, key="redact.page"))
    shown = positions[(min(page, pages) - 1) * PAGE_ROWS:][:PAGE_ROWS]
    if term is not None and not len(positions):
        st.caption(f"No row of the table redacts {plain(term)}: it is evidence, but the search found that redacting "
                   "it would not lower the risk of the documents where it is, or it is a function word of the release, "
                   "or on the deny list.")
    with st.container(height=min(60 + 40 * len(shown), 460), border=True):
        for position, key, accept, label in review_rows(review, shown):
            st.checkbox(label, key=widget_showing(key, accept), on_change=tick_row, args=(position, key))
    where = (review.rows.is_edit & (table["term"] == term).to_numpy()) if term is not None else None
    bulk = st.columns(4, vertical_alignment="bottom")
    bulk[0].button("Accept all", key="redact.accept_all", icon=":material/done_all:", on_click=decide_rows,
                   args=(np.ones(len(table), dtype=bool), True))
    bulk[1].button("Reject all", key="redact.reject_all", icon=":material/remove_done:", on_click=decide_rows,
                   args=(np.ones(len(table), dtype=bool), False))
    bulk[2].button("Reject the edits of the term", key="redact.reject_term", disabled=where is None or not where.any(),
                   on_click=decide_rows, args=(where, False))
    bulk[3].button("Reset my decisions", key="redact.reset", icon=":material/restart_alt:", on_click=reset_decisions,
                   disabled=not review.decided, help="Every row as the search proposed it, then the deny and allow "
                                                     "lists applied.")
    counts = review_counts(review)
    columns = st.columns(5)
    columns[0].metric("Flagged documents searched", f"{len(review.suggestions):,}")
    columns[1].metric("Made acceptable (indicative)", f"{sum(s.action != WITHHOLD for s in review.suggestions):,}")
    columns[2].metric("To withhold", f"{counts['withheld']:,}", help="Documents left out of the release while "
                                                                     "accepted; their edits are folded, not counted.")
    columns[3].metric(f"Edits accepted (of {counts['edits']:,})", f"{counts['edits_accepted']:,}",
                      help=f"In the release: {counted(counts['folded'], 'edit')} of documents withheld, not counted.")
    columns[4].metric("Documents edited", f"{counts['edited']:,}")
    st.caption(f"Kept as accepted now: {kept_text(kept_now(review, texts))}. The meaning each edited text keeps is "
               "scored when the redacted release is audited below.")
    downloads(review)


def downloads(review) -> None:
    """The files the review's decisions make, each built when its button is pressed."""
    table = review.table
    left, middle, right, last = st.columns(4)
    source = data.documents_source
    if source is not None:
        def release() -> bytes:
            edits_of, withheld = accepted(table)
            return redacted_file(source, data.documents, edits_of, withheld)[1]
        left.download_button("Download the redacted release", release,
                             file_name=redacted_name(source_name(source, data.documents)),
                             icon=":material/download:", key="redact.download",
                             help="The input file with the accepted edits made and the documents to withhold left "
                                  "out: same format, encoding and columns, named after the input.")
    middle.download_button("Download the decisions (CSV)", lambda: decisions_csv(table, result.config.config_id),
                           file_name="decisions.csv", mime="text/csv", icon=":material/download:",
                           key="redact.decisions",
                           help="The review table, accepted and rejected rows: `cpa redact --decisions decisions.csv` "
                                "applies it in a pipeline.")
    right.download_button("Download the worklist with suggested edits (CSV)", lambda: worklist_csv(work),
                          file_name="worklist-suggested-edits.csv", mime="text/csv", icon=":material/download:",
                          key="redact.worklist")
    last.download_button("Download the edit log (JSON)",
                         lambda: json.dumps(redaction_log(result.config, strategy, review.suggestions, policy,
                                                          confidence, decisions=table, deny=deny, allow=allow,
                                                          common_share=float(common) or None,
                                                          function_words=function_words(
                                                              texts.values(), float(common) or None),
                                                          rewrite=review.rewrite), indent=2, ensure_ascii=False),
                         file_name="redactions.json", mime="application/json", icon=":material/download:",
                         key="redact.log")


if state.review.after is None:
    state.audit_drawn = False  # none is drawn below (unless audited now)
review_table(view, term, doc_id.strip())
review = state.review
table = review.table
what_if_section(release_what_if(result, review.suggestions, policy, confidence), "redact", True)

st.subheader("Audit the redacted release")
if review.after is None:
    st.caption("The redacted release is a new release mechanism: its certificate comes from a new calibration on "
               "its own documents, with the threat model and release policy declared for this audit. It is recorded "
               "in the history as redacted from this audit.")
    if st.button("Audit the redacted release", icon=":material/play_arrow:", key="redact.reaudit", type="primary"):
        placeholder = st.empty()
        try:
            with placeholder.container():
                audited = reaudit(review, state.threat, state.scores)
        except CPAError as error:
            show_error(error, "The redacted release could not be audited: ")
            st.stop()
        finally:
            placeholder.empty()
        state.review = review = replace(audited, after=record_calibration(audited.after))
    else:
        st.stop()

after = review.after
state.audit_drawn = True
after_cert = after.result.certificate(confidence)
sides = before_after(cert, after_cert, policy, table, review.utility)
counts = change_counts(sides)
columns = st.columns(4)
columns[0].metric("Flagged before", f"{counts['flagged_before']:,}")
columns[1].metric("Flagged after (recalibrated)", f"{counts['flagged_after']:,}",
                  delta=counts["flagged_after"] - counts["flagged_before"], delta_color="inverse")
columns[2].metric("Withheld", f"{counts['withheld']:,}")
columns[3].metric("First guess right", f"{after.result.first_guess_right.mean():.1%}",
                  delta=f"{(after.result.first_guess_right.mean() - result.first_guess_right.mean()) * 100:+.1f} points",
                  delta_color="inverse", help="The declared attacker's first-guess rate on the redacted release.")
if review.utility is not None:
    st.markdown(f"**Kept:** {kept_text(review.utility.summary())}.", help=HELP["meaning"])  # figures only
st.plotly_chart(fig_set_size_histogram({"before": cert.set_sizes, "after redaction": after_cert.set_sizes},
                                       policy.flag_below, f"Certified set sizes at {fmt_confidence(confidence)}, "
                                                          "before and after redaction",
                                       flagged={"before": cert.flags(policy),
                                                "after redaction": after_cert.flags(policy)}, rule=policy.rule),
                key="redact.histogram")
st.dataframe(sides, hide_index=True, width="stretch", height=360, key="redact.sides",
             column_config=table_columns(sides))
st.caption(f"No longer flagged: {counted(counts['cleared'], 'document')} flagged before. Newly flagged: "
           f"{counted(counts['newly_flagged'], 'document')}. A smaller certified set under the new calibration: "
           f"{counted(counts['smaller_set'], 'released document')} ({counts['smaller_set_unchanged']:,} of them "
           "unchanged: the new calibration's threshold moved, not their text). Sizes after are certified by the new "
           "calibration, recorded in the history"
           + (f" as audit {after.audit_id}" if after.audit_id else "") + ".")
if st.button("Make it the current audit", key="redact.adopt", icon=":material/swap_horiz:",
             help="Every page then shows the redacted release's audit: its flagged documents, its report and PDF."):
    state.data = review.after_data
    adopt_run(after)  # the review stays, with the audit before beside it
    state.adopt_policy(after.result.config)
    st.success("The redacted release's audit is the current audit; the Report page certifies it and shows it beside "
               "the audit before.", icon=":material/check_circle:")
st.page_link(nav.REPORT, label="Next: the report and its exports", icon=":material/arrow_forward:")
