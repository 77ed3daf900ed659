"""The dashboard's side of the audit history: record a calibration, reopen a recorded audit as the current
run (no attack), and the History page's tables.

Every figure comes from :mod:`cpa_core.store.history`; this module only checks that a recorded audit fits the
loaded data, rebuilds what the pages need around its result, and labels the tables.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from cpa_core.attack.base import Attacker, AttackerBase
from cpa_core.attack.registry import get_spec
from cpa_core.attack.spec import BuildContext
from cpa_core.audit.configuration import AuditConfig
from cpa_core.common.errors import CPAError, HistoryError
from cpa_core.store.history import SHORT_SHA, HistoryEntry, load_result, record_audit
from cpa_ui.cache import run_label
from cpa_ui.state import AuditRun, DataSet
from cpa_ui.text import plain

HISTORY_COLUMNS = ("id", "created_at", "source", "config_id", "knowledge", "attacker", "documents_sha256",
                   "n_flagged", "median_set_size")
"""The History page's list of audits (labelled by :data:`~cpa_core.report.help.COLUMNS`)."""


def history_table(audits: pd.DataFrame) -> pd.DataFrame:
    """The History page's list: the latest audit first, the columns of :data:`HISTORY_COLUMNS`."""
    return audits.iloc[::-1][list(HISTORY_COLUMNS)].reset_index(drop=True)


def entry_label(entry: pd.Series) -> str:
    """How an audit is named in the page's choices (a row of ``list_audits``)."""
    return f"audit {entry['id']} · {entry['created_at']} · {entry['knowledge']} · {entry['attacker']} · {entry['source']}"


def record_calibration(run: AuditRun) -> None:
    """Record a dashboard calibration in the audit history; a failure is a warning, the run is kept."""
    try:
        audit_id = record_audit(run.result, source="dashboard")
    except (CPAError, OSError) as error:
        st.warning(plain(f"This calibration was not recorded in the audit history: {error}"), icon=":material/history:")
        return
    st.toast(f"Recorded in the audit history as audit {audit_id}.", icon=":material/history:")


def data_mismatch(entry: HistoryEntry, data: DataSet | None) -> str | None:
    """Why a recorded audit cannot be reopened on the loaded data (``None`` when it can).

    The pages show the loaded documents' texts and the registry's profiles beside the certificates, so the
    audit must have certified exactly these files (same checksum, same rows kept).
    """
    if data is None:
        return "No data is loaded: load the documents and registry this audit certified on the Data page."
    for role, table in (("documents", data.documents), ("registry", data.registry)):
        recorded = entry.checksums.get(role) or {}
        if recorded.get("sha256") != table.sha256 or recorded.get("rows") != len(table):
            return (f"Audit {entry.id} certified the {role} file {recorded.get('file')} (SHA-256 "
                    f"{str(recorded.get('sha256'))[:SHORT_SHA]}…, {recorded.get('rows')} rows), not the loaded one "
                    f"({table.file}, SHA-256 {table.sha256[:SHORT_SHA]}…, {len(table)} rows): load that file on the "
                    "Data page to reopen it.")
    return None


@dataclass
class Unexplained(AttackerBase):
    """Stands for a reopened audit's attacker when it is not rebuilt: it explains no match and never attacks."""

    name: str

    def params(self) -> dict:
        return {"attacker": self.name}

    def attack(self, doc_ids, texts, registry, level, progress=None):
        raise HistoryError("a reopened audit is not attacked again; calibrate on the Calibrate page instead")


def declared_attacker(config: AuditConfig, data: DataSet) -> Attacker:
    """The audit's attacker rebuilt from its declared parameters, so that the pages can explain its matches.

    An attacker that would send text to an LLM endpoint or needs an imported table of scores is not rebuilt
    (reopening sends nothing anywhere): it explains nothing, as do attackers whose parameters no longer build.
    """
    try:
        spec = get_spec(config.attacker.name)
        if not (spec.sends_text or spec.needs_scores):
            context = BuildContext(data.registry, config.knowledge, config.top_k, specs=get_spec)  # no LLM client: clues fail here
            return spec.build(spec.resolve(dict(config.attacker.params)), context)
    except CPAError:
        pass
    return Unexplained(config.attacker.name)


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
                    declared_attacker(result.config, data))
