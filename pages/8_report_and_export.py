"""Step 7: the redaction worklist, the per-document records, the manifest, the certificate report and the
files that reproduce the audit, all of one declared configuration; for an attacker panel, the panel's report and
worklist, and each attacker's own exports."""

from __future__ import annotations

import json

import streamlit as st

from cpa_core.report.formatting import fmt_confidence
from cpa_core.report.html import REDACTION_TITLE, redaction_frame
from cpa_core.report.metrics import summarize
from cpa_core.report.verdict import release_verdict
from cpa_core.report.worklist import worklist_csv, worklist_json
from cpa_core.store.bundle import audit_bundle, declared_toml
from cpa_core.store.records import jsonl_lines, manifest, record_splits, records
from cpa_ui.analysis import flagged_table, panel_flagged_table
from cpa_ui.cache import curve, explained_worklist, panel_verdict_at
from cpa_ui.components import (
    member_choice,
    panel_flagged_columns,
    panel_verdict_row,
    redaction_columns,
    results_page,
    table_columns,
    verdict_box,
)
from cpa_ui.figures import certificate_report, fig_set_size_histogram
from cpa_ui.panel_exports import declared_panel, panel_report_html, panel_report_zip
from cpa_ui.pdf import pdf_unavailable, report_pdf
from cpa_ui.redaction import before_after, change_counts
from cpa_ui.state import AuditRun, state
from cpa_ui.text import plain

data, panel_run = results_page("Report & export")
confidence, policy = state.confidence, state.policy


def panel_exports(run: AuditRun) -> None:
    """The panel's verdict, its redaction verified outside its search (when the audit has one), its certificate
    report (HTML, with each attacker's own report in a ZIP, and PDF) and the documents any attacker flags."""
    panel = declared_panel(run, confidence, policy)
    stem = f"cpa-{panel.config_id}-panel"
    st.markdown(f"Every export of the panel declares configuration **{panel.config_id}**: the attacker panel "
                f"calibrated as {plain(run.label)} ({len(run.names)} attackers, each run and calibrated on its own), "
                f"flagging at **{fmt_confidence(confidence)}** confidence the documents any attacker flags with "
                f"{policy.rule} (both set on the Explore and Flagged pages). Files are generated on this machine and "
                "downloaded by your browser; nothing is uploaded anywhere.")
    panel_verdict_row(panel_verdict_at(run.key, confidence, policy, run.panel))
    if run.redaction:
        st.subheader(REDACTION_TITLE)
        table = redaction_frame(run.redaction)
        st.caption(f"The redacted release was audited again by every attacker of the panel and by "
                   f"{plain(run.redaction.get('held_out'))}, an attacker the redaction search never consulted (held "
                   f"out). Before: the audit of the release before redaction (configuration "
                   f"{plain(run.redaction.get('source_config_id'))}).")
        st.dataframe(table, hide_index=True, width="stretch", key="export.redaction",
                     column_config=redaction_columns())

    st.subheader("For the privacy officer")
    no_pdf = pdf_unavailable()
    left, middle, right = st.columns(3)
    left.download_button("Panel certificate report (HTML)", lambda: panel_report_html(run, confidence, policy)
                         .encode("utf-8"), file_name=f"{stem}-report.html", mime="text/html", type="primary",
                         icon=":material/description:", key="export.panel_report", width="stretch",
                         help="One self-contained HTML file: the panel's verdict and the attacker that decided it, the "
                              "attackers side by side, the correction for testing several attackers, a sign-off "
                              "block, the documents any attacker flags, checksums and versions. Its links open each "
                              "attacker's own report beside it (the ZIP).")
    middle.download_button("Panel report with each attacker's report (ZIP)",
                           lambda: panel_report_zip(run, data, confidence, policy), file_name=f"{stem}-reports.zip",
                           mime="application/zip", icon=":material/folder_zip:", key="export.panel_reports",
                           width="stretch",
                           help="report.html and members/<attacker>/report.html, as cpa audit writes them: the panel's "
                                "report links each attacker's own.")
    right.download_button("Panel certificate report (PDF)",
                          lambda: report_pdf(panel_report_html(run, confidence, policy)), file_name=f"{stem}-report.pdf",
                          mime="application/pdf", icon=":material/picture_as_pdf:", key="export.panel_report_pdf",
                          width="stretch", disabled=no_pdf is not None,
                          help="The same report on A4 pages, to print and sign.")
    if no_pdf:
        right.caption(plain(no_pdf[0].upper() + no_pdf[1:] + "."))

    st.subheader("Flagged by any attacker (worklist)")
    work = panel_flagged_table(run.panel, confidence, policy, panel.config_id)
    st.caption(f"{len(work):,} documents flagged by at least one attacker, riskiest first (the largest linkage "
               "probability over the attackers, then the smallest set), each with the attackers that flag it and the "
               "ones that gave its largest linkage probability and its smallest set. Each attacker's own worklist, "
               "with the terms that drive its matches, is among its exports below.")
    shown = work.drop(columns=["config_id", "confidence"])
    st.dataframe(shown, hide_index=True, width="stretch", height=240, key="export.panel_worklist",
                 column_config=panel_flagged_columns(shown))
    left, right = st.columns(2)
    left.download_button("Panel worklist (CSV)", worklist_csv(work).encode("utf-8"), file_name=f"{stem}-worklist.csv",
                         mime="text/csv", icon=":material/table:", key="export.panel_worklist_csv", width="stretch",
                         help="Spreadsheet-safe: cells that a spreadsheet would run as formulas are neutralised.")
    right.download_button("Panel worklist (JSON)", worklist_json(work).encode("utf-8"),
                          file_name=f"{stem}-worklist.json", mime="application/json", icon=":material/data_object:",
                          key="export.panel_worklist_json", width="stretch")


def audit_exports(run: AuditRun, in_panel: bool) -> None:
    """The exports of one audit: a single attacker's, or one attacker of a panel (``in_panel``: its own verdict,
    report and files, each declaring its own configuration)."""
    result = run.result.with_policy(confidence, policy)  # the declared configuration of every export below
    config_id = result.config.config_id
    st.markdown(f"Every export declares configuration **{config_id}**: the audit calibrated as {plain(run.label)}, "
                f"flagging at **{fmt_confidence(confidence)}** confidence the documents with {policy.rule} (both set on "
                "the Explore and Flagged pages, so they are part of the declared configuration). Files are generated on "
                "this machine and downloaded by your browser; nothing is uploaded anywhere.")
    review = None if in_panel else state.review
    redaction = review if review is not None and review.after is not None and review.after.key == run.key else None
    stem = f"cpa-{config_id}"

    work = explained_worklist(run.key, config_id, result, data, run)
    audit_manifest = manifest(result)

    def records_jsonl() -> bytes:
        return "".join(line for name in record_splits(result)
                       for line in jsonl_lines(records(result, name, work=work))).encode("utf-8")

    def report_html() -> bytes:
        return certificate_report(result, curve=curve(run.key, result), worklist=work, manifest=audit_manifest,
                                  texts=data.documents.texts()).encode("utf-8")

    def report_pdf_bytes() -> bytes:
        return report_pdf(certificate_report(result, curve=curve(run.key, result), worklist=work,
                                             manifest=audit_manifest, for_print=True, texts=data.documents.texts()))

    summary = summarize(result, [confidence])
    verdict = release_verdict(summary, confidence)
    verdict_box(verdict, summary.level(confidence),
                f"Its own verdict ({result.config.attacker.name} alone)" if in_panel else "Verdict",
                "certified documents" if result.config.protocol == "release" else "held-out test documents")
    for check in verdict.failed:
        st.caption(plain(f"Failed check, {check.name}: {check.reason}. {check.remedy}"))

    if redaction is not None:
        st.subheader("Before and after redaction")
        before_cert = redaction.before.result.certificate(confidence)
        after_cert = run.result.certificate(confidence)
        sides = before_after(before_cert, after_cert, policy, redaction.table, redaction.utility)
        counts = change_counts(sides)
        origin = f"audit {redaction.before.audit_id}" if redaction.before.audit_id else plain(redaction.before.label)
        st.caption(f"This audit certifies the release redacted from {origin}: the same threat model and release "
                   f"policy, calibrated anew. Flagged {counts['flagged_before']:,} → {counts['flagged_after']:,} "
                   f"({counts['withheld']:,} withheld, {counts['cleared']:,} no longer flagged, "
                   f"{counts['newly_flagged']:,} newly flagged); first guess right "
                   f"{redaction.before.result.first_guess_right.mean():.1%} → {run.result.first_guess_right.mean():.1%}.")
        st.plotly_chart(fig_set_size_histogram({"before": before_cert.set_sizes, "after redaction": after_cert.set_sizes},
                                               policy.flag_below, f"Certified set sizes at {fmt_confidence(confidence)}: "
                                                                  "input and output",
                                               flagged={"before": before_cert.flags(policy),
                                                        "after redaction": after_cert.flags(policy)},
                                               rule=policy.rule), key="export.before_after")
        st.dataframe(sides, hide_index=True, width="stretch", height=240, key="export.sides",
                     column_config=table_columns(sides))

    st.subheader("For the privacy officer")
    no_pdf = pdf_unavailable()
    left, right = st.columns(2)
    left.download_button("Certificate report (HTML)", report_html, file_name=f"{stem}-report.html", mime="text/html",
                         type="primary", icon=":material/description:", key="export.report", width="stretch",
                         help="One self-contained HTML file: the release verdict and its validity checks, a sign-off "
                              "block, what was audited, the declared threat configuration, the guarantee and its "
                              "assumptions, the plots, the flagged documents, checksums and versions.")
    right.download_button("Certificate report (PDF)", report_pdf_bytes, file_name=f"{stem}-report.pdf",
                          mime="application/pdf", icon=":material/picture_as_pdf:", key="export.report_pdf",
                          width="stretch", disabled=no_pdf is not None,
                          help="The same report on A4 pages, to print and sign: the verdict first, then the sign-off "
                               "block; the charts are drawn as static images.")
    if no_pdf:
        right.caption(plain(no_pdf[0].upper() + no_pdf[1:] + "."))

    st.subheader("Redaction worklist")
    st.caption(f"{len(work):,} flagged documents, riskiest first (highest linkage probability, then smallest set), each "
               "with the rule that flagged it and the terms that drive its match.")
    shown = flagged_table(work).drop(columns=["evidence", "config_id", "confidence"])
    st.dataframe(shown, hide_index=True, width="stretch", height=240, column_config=table_columns(shown))
    left, right = st.columns(2)
    left.download_button("Worklist (CSV)", worklist_csv(work).encode("utf-8"), file_name=f"{stem}-worklist.csv",
                         mime="text/csv", icon=":material/table:", key="export.worklist_csv", width="stretch",
                         help="Spreadsheet-safe: cells that a spreadsheet would run as formulas are neutralised.")
    right.download_button("Worklist (JSON)", worklist_json(work).encode("utf-8"), file_name=f"{stem}-worklist.json",
                          mime="application/json", icon=":material/data_object:", key="export.worklist_json",
                          width="stretch")

    st.subheader("For re-derivation and archiving")
    left, right = st.columns(2)
    left.download_button("Per-document records (JSONL)", records_jsonl, file_name=f"{stem}-records.jsonl",
                         mime="application/x-ndjson", icon=":material/list:", key="export.records", width="stretch",
                         help=("One JSON object per document" if result.config.protocol == "release" else
                               "One JSON object per calibration and test document") + ": the query (the released text), the top "
                              "candidates with weights and scores, the truth's rank and the set at each level. Contains "
                              "document text: handle it like the release itself.")
    right.download_button("Manifest (JSON)", json.dumps(audit_manifest, indent=2, default=str).encode("utf-8"),
                          file_name=f"{stem}-manifest.json", mime="application/json", icon=":material/verified:",
                          key="export.manifest", width="stretch",
                          help="The full declared configuration, input checksums, split sizes, seed and versions.")
    st.download_button("Reproduce this audit (audit.toml and command, ZIP)",
                       lambda: audit_bundle(result, redaction.before.result.with_policy(confidence, policy),
                                            redaction.table) if redaction is not None else audit_bundle(result),
                       file_name=f"{stem}-reproduce.zip", mime="application/zip", icon=":material/replay:",
                       key="export.bundle", width="stretch",
                       help="The declared configuration as audit.toml (its input files pinned by SHA-256), the cpa audit "
                            "command that runs it again on the same files, SHA256SUMS, and the figures the run must "
                            "give. No document text" + (", except the redacted release's decisions.csv: the original "
                            "audit, the redaction and the audit of the redacted release, run again." if redaction is not
                            None else "."))
    st.caption("The command, run in a folder holding the input files and the ZIP's audit.toml (paths as this audit "
               "read them):")
    st.code(audit_manifest["reproduce"]["command"], language="bash")
    with st.expander("Declared configuration (audit.toml)"):
        st.code(declared_toml(result.config), language="toml")
    with st.expander("Manifest preview"):
        st.json(audit_manifest, expanded=1)


if panel_run.is_panel:
    panel_exports(panel_run)
    st.header("Each attacker's own audit")
    audit_exports(member_choice("export", panel_run, "Attacker whose own audit the exports below are"), True)
else:
    audit_exports(panel_run, False)
