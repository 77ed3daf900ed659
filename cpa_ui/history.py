"""The dashboard's side of the audit history: record a calibration, reopen a recorded audit as the current
run (no attack), and the History page's tables.

Every figure comes from :mod:`cpa_core.store.history` and the rules for reopening from :mod:`cpa_core.store.reopen`;
this module only rebuilds what the pages need around a reopened result and labels the tables.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pandas as pd
import streamlit as st

from cpa_core.common.errors import CPAError, HistoryError
from cpa_core.store import reopen as reopen_rules
from cpa_core.store.history import HistoryEntry, load_result, record_audit
from cpa_core.store.reopen import declared_attacker
from cpa_ui.cache import run_label
from cpa_ui.state import AuditRun, DataSet
from cpa_ui.text import plain

HISTORY_COLUMNS = ("id", "created_at", "source", "redacted_from", "config_id", "knowledge", "attacker",
                   "documents_sha256", "verdict", "first_guess_rate", "flag_confidence", "k", "n_flagged",
                   "median_set_size")
"""The History page's list of audits (labelled by :data:`~cpa_core.report.help.COLUMNS`)."""


def history_table(audits: pd.DataFrame) -> pd.DataFrame:
    """The History page's list: the latest audit first, the columns of :data:`HISTORY_COLUMNS`."""
    return audits.iloc[::-1][list(HISTORY_COLUMNS)].reset_index(drop=True)


def unreadable_notes(audits: pd.DataFrame) -> list[str]:
    """One sentence per listed audit whose row cannot be read (``list_audits``' ``unreadable``)."""
    return [f"Audit {row.id} cannot be read ({row.unreadable}): it is listed, but cannot be reopened or compared; "
            f"'cpa history prune {row.id}' removes it." for row in audits[audits["unreadable"].notna()].itertuples()]


def entry_label(entry: pd.Series) -> str:
    """How an audit is named in the page's choices (a row of ``list_audits``)."""
    return f"audit {entry['id']} · {entry['created_at']} · {entry['knowledge']} · {entry['attacker']} · {entry['source']}"


def record_calibration(run: AuditRun) -> AuditRun:
    """Record a dashboard calibration in the audit history: the run with its audit id (a failure is a warning, and
    the run is kept without one)."""
    try:
        audit_id = record_audit(run.result, source="dashboard")
    except (CPAError, OSError) as error:
        st.warning(plain(f"This calibration was not recorded in the audit history: {error}"), icon=":material/history:")
        return run
    st.toast(f"Recorded in the audit history as audit {audit_id}.", icon=":material/history:")
    return replace(run, audit_id=audit_id)


def data_mismatch(entry: HistoryEntry, data: DataSet | None) -> str | None:
    """Why a recorded audit cannot be reopened on the loaded data (``None`` when it can;
    :func:`cpa_core.store.reopen.data_mismatch`)."""
    if data is None:
        return "No data is loaded: load the documents and registry this audit certified on the Data page."
    return reopen_rules.data_mismatch(entry, data.documents, data.registry)


def reopen(entry: HistoryEntry, data: DataSet | None) -> AuditRun:
    """The recorded audit as the dashboard's current run, rebuilt from its snapshot without attacking.

    Raises :class:`~cpa_core.common.errors.HistoryError` when the loaded data is not the audit's or its snapshot is
    missing or changed.
    """
    mismatch = data_mismatch(entry, data)
    if mismatch is not None:
        raise HistoryError(mismatch)
    start = time.perf_counter()
    result = load_result(entry.id)
    return AuditRun(result, f"{data.fingerprint}:{result.config.config_id}",
                    f"{run_label(result.config)} · audit {entry.id}", data.fingerprint, time.perf_counter() - start,
                    declared_attacker(result.config, data.registry), entry.id)
