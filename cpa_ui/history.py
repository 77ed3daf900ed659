"""The dashboard's side of the audit history: record a calibration (an attacker panel: each of its attackers), reopen
a recorded audit or a recorded panel as the current run (no attack), and the History page's tables.

Every figure comes from :mod:`cpa_core.store.history` and the rules for reopening from :mod:`cpa_core.store.reopen`;
this module only rebuilds what the pages need around a reopened result and labels the tables.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import pandas as pd
import streamlit as st

from cpa_core.audit.panel import PanelResult
from cpa_core.common.errors import CPAError, HistoryError
from cpa_core.store import reopen as reopen_rules
from cpa_core.store.history import (
    AuditComparison,
    HistoryEntry,
    load_result,
    panel_entries,
    record_audit,
    recorded_panel_summary,
)
from cpa_core.store.reopen import declared_attacker
from cpa_ui.cache import run_label
from cpa_ui.state import AuditRun, DataSet
from cpa_ui.text import plain

HISTORY_COLUMNS = ("id", "created_at", "source", "redacted_from", "config_id", "knowledge", "attacker", "members",
                   "documents_sha256", "verdict", "first_guess_rate", "flag_confidence", "k", "n_flagged",
                   "median_set_size", "documents_kept", "characters_kept_share", "meaning")
"""The History page's list of audits (labelled by :data:`~cpa_core.report.help.COLUMNS`)."""
MEMBER_COLUMNS = ("id", "attacker", "config_id", "verdict", "first_guess_rate", "n_flagged", "median_set_size")
"""An attacker panel's members, each recorded as an audit of its own."""
NOT_REDACTED = "—"
"""The History list's ``redacted_from`` of an audit that was not redacted from another (a number column would show
its missing value as the word None)."""
CHANGES = ("newly flagged", "no longer flagged", "withheld", "not audited in B", "flagged in both")
"""How a document of either worklist changed from audit A to audit B (:class:`WorklistChanges`)."""


@dataclass(frozen=True)
class Entry:
    """One entry of the History page: an audit, or the audits of one run of an attacker panel (``ids``, in the
    panel's order)."""

    ids: tuple[int, ...]
    panel: str | None = None  # the panel's configuration id
    attackers: tuple[str, ...] = ()  # the panel's attackers

    @property
    def id(self) -> int:
        """How the entry is chosen: its first audit's id."""
        return self.ids[0]

    @property
    def is_panel(self) -> bool:
        return self.panel is not None


def history_entries(audits: pd.DataFrame) -> list[Entry]:
    """The entries of the audits :func:`~cpa_core.store.history.list_audits` lists, oldest first: an attacker panel's
    members (:func:`~cpa_core.store.history.panel_entries`) as one entry."""
    rows = audits.set_index("id", drop=False)
    entries = []
    for ids in panel_entries(audits):
        first = rows.loc[ids[0]]
        panel = first["panel"] if isinstance(first["panel"], str) else None
        attackers = tuple(first["panel_attackers"]) if panel and isinstance(first["panel_attackers"], tuple) else ()
        entries.append(Entry(ids, panel, attackers))
    return entries


def history_table(audits: pd.DataFrame) -> pd.DataFrame:
    """The History page's list: one row per entry, the latest first (an attacker panel: its first audit's figures of
    the documents and the configuration, its attackers and their audits in ``members``; its verdict is the panel's,
    shown when it is reopened), the columns of :data:`HISTORY_COLUMNS`."""
    rows = audits.set_index("id", drop=False)
    out = []
    for entry in history_entries(audits)[::-1]:
        row = rows.loc[entry.id].to_dict()
        if entry.is_panel:
            members = [rows.loc[i] for i in entry.ids]
            row.update(config_id=entry.panel, attacker=f"panel: {', '.join(entry.attackers)}",
                       members=", ".join(f"{m['attacker']} (audit {m['id']})" for m in members),
                       verdict=None, first_guess_rate=None, n_flagged=None, median_set_size=None)
        else:
            row["members"] = None
        redacted_from = row.get("redacted_from")
        row["redacted_from"] = NOT_REDACTED if redacted_from is None or pd.isna(redacted_from) else \
            str(int(redacted_from))
        out.append(row)
    return pd.DataFrame(out, columns=list(HISTORY_COLUMNS))


@dataclass(frozen=True)
class WorklistChanges:
    """How audit B's worklist differs from audit A's, each document of either counted once: ``newly_flagged`` (on B's
    only), ``flagged_in_both``, and those on A's only split by what became of them in B: ``withheld`` from B's release
    (the decisions B's redaction recorded), ``no_longer_flagged`` (audited in B, not flagged), ``not_audited`` (neither
    withheld nor among B's audited documents, e.g. another test split)."""

    newly_flagged: tuple[str, ...]
    no_longer_flagged: tuple[str, ...]
    withheld: tuple[str, ...]
    not_audited: tuple[str, ...]
    flagged_in_both: tuple[str, ...]

    def to_frame(self) -> pd.DataFrame:
        """``doc_id`` and ``change`` (one of :data:`CHANGES`) of every document on either worklist."""
        groups = (self.newly_flagged, self.no_longer_flagged, self.withheld, self.not_audited, self.flagged_in_both)
        return pd.DataFrame([(doc, change) for change, docs in zip(CHANGES, groups) for doc in docs],
                            columns=["doc_id", "change"])


def worklist_changes(comparison: AuditComparison, b: HistoryEntry) -> WorklistChanges:
    """The worklist changes of ``comparison`` (A against B), with A's flagged documents missing from B's worklist
    told apart: withheld from B's release, audited in B and no longer flagged, or not audited in B."""
    withheld_ids = set(((b.summary.get("redaction") or {}).get("decisions") or {}).get("withheld") or ())
    audited = set().union(*b.set_sizes.values())
    gone = comparison.flagged_removed
    withheld = tuple(doc for doc in gone if doc in withheld_ids)
    return WorklistChanges(comparison.flagged_added,
                           tuple(doc for doc in gone if doc not in withheld_ids and doc in audited), withheld,
                           tuple(doc for doc in gone if doc not in withheld_ids and doc not in audited),
                           comparison.flagged_kept)


def panel_members_table(audits: pd.DataFrame, entry: Entry) -> pd.DataFrame:
    """The audits of an attacker panel's entry, one row per attacker: each one's own figures."""
    return audits.set_index("id", drop=False).loc[list(entry.ids), list(MEMBER_COLUMNS)].reset_index(drop=True)


def unreadable_notes(audits: pd.DataFrame) -> list[str]:
    """One sentence per listed audit whose row cannot be read (``list_audits``' ``unreadable``)."""
    return [f"Audit {row.id} cannot be read ({row.unreadable}): it is listed, but cannot be reopened or compared; "
            f"'cpa history prune {row.id}' removes it." for row in audits[audits["unreadable"].notna()].itertuples()]


def entry_label(entry: pd.Series) -> str:
    """How an audit is named in the page's choices (a row of ``list_audits``)."""
    member = f" (of panel {entry['panel']})" if isinstance(entry.get("panel"), str) else ""
    return (f"audit {entry['id']} · {entry['created_at']} · {entry['knowledge']} · {entry['attacker']}{member} · "
            f"{entry['source']}")


def panel_label(audits: pd.DataFrame, entry: Entry) -> str:
    """How an entry is named among the audits to reopen: a panel by its audits and attackers."""
    first = audits.set_index("id", drop=False).loc[entry.id]
    if not entry.is_panel:
        return entry_label(first)
    ids = ", ".join(map(str, entry.ids))
    return (f"audits {ids} · {first['created_at']} · {first['knowledge']} · panel of {len(entry.ids)}: "
            f"{' + '.join(audits.set_index('id').loc[list(entry.ids), 'attacker'])} · {first['source']}")


def record_calibration(run: AuditRun) -> AuditRun:
    """Record a dashboard calibration in the audit history (an attacker panel: each attacker, as an audit of its own
    marked as of its panel): the run with its audit ids (a failure is a warning, and the run is kept without one)."""
    try:
        ids = tuple(record_audit(result, source="dashboard") for result in run.results)
    except (CPAError, OSError) as error:
        st.warning(plain(f"This calibration was not recorded in the audit history: {error}"), icon=":material/history:")
        return run
    if run.is_panel:
        st.toast(f"Recorded in the audit history as audits {', '.join(map(str, ids))}, one per attacker.",
                 icon=":material/history:")
        return replace(run, audit_id=ids[0], member_ids=ids)
    st.toast(f"Recorded in the audit history as audit {ids[0]}.", icon=":material/history:")
    return replace(run, audit_id=ids[0])


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


def reopen_panel(entries: list[HistoryEntry], data: DataSet | None) -> AuditRun:
    """The recorded audits of an attacker panel's members (in the panel's order) as the dashboard's current run, the
    panel rebuilt from their snapshots without attacking; with the panel's redaction verified outside its search when
    its folder still holds it. One member alone reopens as its own audit.

    Raises :class:`~cpa_core.common.errors.HistoryError` as :func:`reopen` does, and when the members do not make one
    panel (other documents, other settings than their attackers).
    """
    if len(entries) == 1:
        return reopen(entries[0], data)
    for entry in entries:
        mismatch = data_mismatch(entry, data)
        if mismatch is not None:
            raise HistoryError(mismatch)
    start = time.perf_counter()
    try:
        panel = PanelResult(tuple(load_result(entry.id) for entry in entries))
    except CPAError as error:
        raise HistoryError(f"audits {', '.join(str(e.id) for e in entries)} do not make one attacker panel: {error}") \
            from None
    folder = recorded_panel_summary(entries[0])
    ids = tuple(entry.id for entry in entries)
    return AuditRun(panel.members[0], f"{data.fingerprint}:{panel.config_id}",
                    f"{run_label(panel.config, panel.names)} · audits {', '.join(map(str, ids))}", data.fingerprint,
                    time.perf_counter() - start, declared_attacker(panel.config, data.registry), ids[0], panel=panel,
                    attackers=tuple(declared_attacker(member.config, data.registry) for member in panel.members),
                    member_ids=ids, redaction=None if folder is None else folder.get("redaction"))
