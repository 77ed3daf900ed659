"""Display tables assembled from the core's results (no Streamlit, no new statistics).

Every number comes from :mod:`cpa_core` (certificates, ``certificate_metrics``, ``summarize``,
``flag_mask``); these functions only select, label and arrange it for the pages and the report.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import pandas as pd

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.results import AuditResult, Certificate
from cpa_core.io.tables import Documents, Registry
from cpa_core.report.formatting import GROUP_COLUMNS, fmt_interval, without_empty
from cpa_core.report.metrics import AuditSummary, LevelSummary, summarize

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
        "linkage_probability": None if cert.linkage is None else float(cert.linkage[row]),
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
