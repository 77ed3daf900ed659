"""Display tables assembled from the core's results (no Streamlit, no new statistics).

Every number comes from :mod:`cpa_core` (certificates, ``certificate_metrics``, ``summarize``,
``flag_mask``); these functions only select, label and arrange it for the pages and the report.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import pandas as pd

from cpa_core.audit.panel import PanelCertificate, PanelResult
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.results import AuditResult, Certificate
from cpa_core.io.tables import Documents, Registry
from cpa_core.report.formatting import GROUP_COLUMNS, fmt_interval, without_empty
from cpa_core.report.html import member_frame
from cpa_core.report.metrics import AuditSummary, LevelSummary, summarize
from cpa_core.report.verdict import PanelVerdict
from cpa_core.report.worklist import linkage_figures, panel_worklist

CALIBRATION_COLUMNS = ["confidence", "threshold", "coverage", "coverage_conditional", "candidate_miss_rate",
                       "open_world_bound", "median_set_size", "whole_pool_rate", "n_cal", "n_cal_needed"]
"""The table per confidence level, narrow enough to show whole beside the sidebar (1,500 px): the confidence level
without α (its complement), the open-world bound only under the 'exclude' miss policy it describes, and the
coverage interval as one column under the split protocol."""
COMPARE_COLUMNS = ["n_test", "coverage", "coverage_conditional", "candidate_miss_rate", "threshold", "median_set_size",
                   "mean_set_size", "mean_leakage", "n_flagged", "flagged_share", "top1", "mrr"]


DRILLDOWN_CHOICES = 1000
"""Documents the drill-down's list offers (smallest sets first); any other opens from a click in the table."""


def kpis(result: AuditResult, confidence: float, policy: ReleasePolicy) -> LevelSummary:
    """The figures of the KPI row: the summary's entry at ``confidence`` under ``policy``."""
    return summarize(result, [confidence], policy).level(confidence)


def group_table(summary: AuditSummary, confidence: float) -> pd.DataFrame:
    """Per-group figures of a summary at ``confidence`` (empty when the documents have no groups)."""
    frame = summary.groups_frame(confidence)
    return frame[GROUP_COLUMNS] if len(frame) else pd.DataFrame(columns=GROUP_COLUMNS)


def strata_table(summary: AuditSummary) -> pd.DataFrame:
    """The strata the audit calibrated in: label, group, margin range, documents and calibration documents."""
    columns = ["label", "group", "margin_low", "margin_high", "documents", "calibrating"]
    frame = pd.DataFrame([dict(s) for s in summary.strata], columns=columns).rename(columns={"label": "stratum"})
    return without_empty(frame, ("group",))


def calibration_table(summary: AuditSummary) -> pd.DataFrame:
    """q̂, coverage (conditional and unconditional), miss rate and calibration-size check per level of a summary;
    under the split protocol, where coverage is an empirical check, with its 95 % interval (``coverage_ci``)."""
    frame = summary.overall_frame()
    columns = [c for c in CALIBRATION_COLUMNS if c != "open_world_bound" or summary.miss_policy == "exclude"]
    if summary.protocol == "split":
        frame["coverage_ci"] = [fmt_interval(*(None if pd.isna(v) else v for v in pair))
                                for pair in zip(frame["coverage_low"], frame["coverage_high"])]
        columns.insert(columns.index("coverage") + 1, "coverage_ci")
    return frame[columns]


def table_height(frame: pd.DataFrame) -> int:
    """The pixel height that shows every row of a table (Streamlit draws 35 px a row, the header included)."""
    return 35 * (len(frame) + 1) + 3


def compare_table(labels: Sequence[str], results: Sequence[AuditResult], confidence: float,
                  policy: ReleasePolicy) -> pd.DataFrame:
    """One row per configuration: its figures at a common confidence level."""
    rows = []
    for label, result in zip(labels, results):
        entry = kpis(result, confidence, policy)
        rows.append({"label": label, "config_id": result.config.config_id, **{k: getattr(entry, k) for k in COMPARE_COLUMNS}})
    return pd.DataFrame(rows)


def flagged_table(worklist: pd.DataFrame) -> pd.DataFrame:
    """The worklist as a display table (lists joined as text)."""
    frame = worklist.copy()
    for column in ("top_candidates", "top_weights", "driving_terms", "inferred_clues"):
        frame[column] = [", ".join(str(v) for v in values) for values in frame[column]]
    return without_empty(frame, ("inferred_clues", "group"))  # LLM clues only exist in a clue query mode, groups
    # only where the documents have them


def row_of(cert: Certificate, doc_id: str) -> int:
    """Row of an audited document in the certificate, by its id."""
    rows = np.flatnonzero(cert.split.table.doc_ids.astype(str) == str(doc_id))
    if rows.size == 0:
        raise KeyError(doc_id)
    return int(rows[0])


def document_facts(cert: Certificate, row: int) -> dict:
    """What the drill-down states about one audited document."""
    split = cert.split
    in_pool = bool(split.in_pool[row])
    return {
        "doc_id": str(split.table.doc_ids[row]),
        "identity_id": str(split.truth_ids[row]),
        "group": None if split.groups is None else str(split.groups[row]),
        "set_size": int(cert.set_sizes[row]),
        "leakage": float(cert.leakage[row]),
        "covered": bool(cert.covered[row]),
        "in_pool": in_pool,
        "true_rank": int(split.truth_ranks[row]) if in_pool else None,
        "pool_size": int(split.table.pool_sizes[row]),
        "q_hat": float(cert.q_hat[row]),
        **linkage_figures(cert, row),
        "stratum": None if split.strata is None else str(split.strata[row]),
        "uninformative": bool(split.uninformative[row]),
    }


def candidate_table(cert: Certificate, row: int, registry: Registry, fields: Sequence[str],
                    limit: int = 50) -> pd.DataFrame:
    """The document's ranked candidates (its certified set first), with weights, scores and profile fields.

    Shows the whole set up to ``limit`` rows, plus the next candidates when the set is smaller than 10.
    """
    split, table = cert.split, cert.split.table
    size = int(cert.set_sizes[row])
    shown = min(int(table.pool_sizes[row]), max(min(size, limit), min(size + 5, 10)))
    index = table.candidates[row, :shown]
    ids = table.candidate_ids[index]
    profiles = registry.frame.set_index("identity_id")
    frame = pd.DataFrame({
        "rank": np.arange(1, shown + 1),
        "candidate": [str(c) for c in ids],
        "in_set": np.arange(shown) < size,
        "is_truth": [str(c) == str(split.truth_ids[row]) for c in ids],
        "weight": table.weights[row, :shown] if table.weight_kind == "probability" else np.full(shown, np.nan),
        "score": split.score.to_method(split.sorted_scores[row, :shown]),
    })
    for field in fields:
        frame[field] = [profiles[field].get(c) if c in profiles.index else None for c in ids]
    return frame


def text_of(documents: Documents, doc_id: str) -> str:
    match = documents.frame.loc[documents.frame["doc_id"].astype(str) == str(doc_id), "text"]
    return str(match.iloc[0]) if len(match) else ""


def preview(documents: Documents, n: int = 50) -> pd.DataFrame:
    """The first documents without their text (text is only shown in a document's drill-down)."""
    frame = documents.frame.head(n)
    out = frame.drop(columns=["text"]).copy()
    out.insert(1, "text_characters", frame["text"].str.len())
    out.insert(2, "text_words", frame["text"].str.split().str.len())
    return out


def documents_of_group(documents: Documents, group: str) -> Documents:
    """The documents of one group (e.g. one release mechanism), as a data set of their own."""
    frame = documents.frame[documents.frame["group"].astype(str) == str(group)].reset_index(drop=True)
    report = replace(documents.report, n_kept=len(frame), notes=(*documents.report.notes, f"only group '{group}'"))
    return replace(documents, frame=frame, file=f"{documents.file} [group {group}]", report=report)


# --- an attacker panel ----------------------------------------------------------------------------------------

def panel_with_policy(panel: PanelResult, confidence: float, policy: ReleasePolicy) -> PanelResult:
    """The panel with every member declared to flag at ``confidence`` under ``policy``
    (:meth:`~cpa_core.audit.results.AuditResult.with_policy`: no set changes)."""
    return PanelResult(tuple(member.with_policy(confidence, policy) for member in panel.members))


def members_table(verdict: PanelVerdict) -> pd.DataFrame:
    """The attackers of a panel side by side (:func:`~cpa_core.report.html.member_frame`), the first-guess interval
    as one column, the one that decided marked."""
    frame = member_frame(verdict)
    frame.insert(2, "first_guess_ci", [fmt_interval(*(None if pd.isna(v) else v for v in pair))
                                       for pair in zip(frame["first_guess_low"], frame["first_guess_high"])])
    return frame[["attacker", "decided", "first_guess_rate", "first_guess_ci", "n_flagged", "corrected_bound",
                  "remainder_first_guess", "own_verdict"]]


def panel_flagged_table(panel: PanelResult, confidence: float, policy: ReleasePolicy,
                        config_id: str) -> pd.DataFrame:
    """Every document any attacker of the panel flags, riskiest first, with the attackers that flag it and the ones
    that gave its largest linkage probability and its smallest set (:func:`~cpa_core.report.worklist.panel_worklist`)."""
    return without_empty(panel_worklist(panel.certificate(confidence), policy, config_id), ("group",))


def document_members(cert: PanelCertificate, row: int, policy: ReleasePolicy) -> pd.DataFrame:
    """One document under each attacker of a panel: its set size, linkage probability, the rules that flag it and
    its subject's rank; which attacker gave its smallest set and its largest linkage probability (the worst over
    the attackers, :class:`~cpa_core.audit.panel.PanelCertificate`)."""
    reasons = [member.flag_reasons(policy)[row] for member in cert.members]
    smallest = cert.names[int(cert.smallest_by[row])]
    largest = None if cert.linkage_by is None else cert.names[int(cert.linkage_by[row])]
    return pd.DataFrame({
        "attacker": list(cert.names),
        "set_size": [int(member.set_sizes[row]) for member in cert.members],
        "linkage_probability": [None if member.linkage is None else float(member.linkage[row])
                                for member in cert.members],
        "flagged_by": [str(reason) for reason in reasons],
        "true_rank": [int(member.split.truth_ranks[row]) if member.split.in_pool[row] else None
                      for member in cert.members],
        "smallest_set": [name == smallest for name in cert.names],
        "largest_linkage": [name == largest for name in cert.names],
    })


def rescored_members(names: Sequence[str], certified: Sequence[int], edited: Sequence[int],
                     flag_below: int) -> pd.DataFrame:
    """An edited text under each attacker of a panel: the set certified for the released text, the edited text's
    set counted under the stored calibration (indicative), and whether it reaches ``k``."""
    return pd.DataFrame({"attacker": list(names), "set_size_before": list(certified),
                         "indicative_after": list(edited),
                         "reaches_k": ["yes" if size >= flag_below else "no" for size in edited]})
