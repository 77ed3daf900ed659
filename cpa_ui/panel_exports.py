"""The exports of an attacker panel's audit from the dashboard: the panel's certificate report (the core's
:func:`~cpa_core.report.html.panel_report`, declared at the confidence level and release policy chosen on the pages),
and a ZIP of it with each attacker's own report where its links point (``members/<attacker>/report.html``, the folder
layout of ``cpa audit``)."""

from __future__ import annotations

import io
import zipfile

from cpa_core.audit.panel import PanelResult
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.report.html import panel_report
from cpa_core.report.worklist import panel_worklist
from cpa_core.store.records import PANEL_FOLDER, REPORT_FILE, manifest, panel_manifest
from cpa_ui.analysis import panel_with_policy
from cpa_ui.cache import curve, explained_worklist
from cpa_ui.figures import certificate_report
from cpa_ui.state import AuditRun, DataSet


def declared_panel(run: AuditRun, confidence: float, policy: ReleasePolicy) -> PanelResult:
    """The run's panel declared to flag at ``confidence`` under ``policy``: what every export of it states."""
    return panel_with_policy(run.panel, confidence, policy)


def member_links(panel: PanelResult) -> dict[str, str]:
    """Where each attacker's own report is, from the panel's report: ``members/<attacker>/report.html``."""
    return {name: f"{PANEL_FOLDER}/{name}/{REPORT_FILE}" for name in panel.names}


def panel_report_html(run: AuditRun, confidence: float, policy: ReleasePolicy) -> str:
    """The panel's certificate report, with the redaction verified outside its search the run holds, if any."""
    panel = declared_panel(run, confidence, policy)
    work = panel_worklist(panel.certificate(confidence), panel.config.policy, panel.config_id)
    return panel_report(panel, worklist=work, manifest=panel_manifest(panel), member_links=member_links(panel),
                        redaction=run.redaction)


def panel_report_zip(run: AuditRun, data: DataSet, confidence: float, policy: ReleasePolicy) -> bytes:
    """The panel's report (``report.html``) and each attacker's own (``members/<attacker>/report.html``) in one ZIP,
    so that the panel report's links open them."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(REPORT_FILE, panel_report_html(run, confidence, policy))
        for name, link in member_links(run.panel).items():
            member = run.member(name)
            result = member.result.with_policy(confidence, policy)
            work = explained_worklist(member.key, result.config.config_id, result, data, member)
            archive.writestr(link, certificate_report(result, curve=curve(member.key, result), worklist=work,
                                                      manifest=manifest(result), for_print=True,
                                                      texts=data.documents.texts()))
    return buffer.getvalue()
