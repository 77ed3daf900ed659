"""Display tables assembled from the core's results (no Streamlit, no new statistics).

Every number comes from :mod:`cpa_core` (certificates, ``certificate_metrics``, ``summarize``,
``flag_mask``); these functions only select, label and arrange it for the pages and the report.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import Sequence

import numpy as np
import pandas as pd

from cpa_core.audit import AuditResult, Certificate
from cpa_core.conformal import alpha_from_confidence, minimum_calibration_size
from cpa_core.data import Documents, Registry
from cpa_core.errors import CalibrationWarning
from cpa_core.metrics import certificate_metrics
from cpa_core.policy import flag_mask


def certificate(result: AuditResult, confidence: float) -> Certificate:
    """The test split's certificate at ``confidence`` (its too-small-calibration note is shown separately)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        return result.certificate(confidence)


def calibration_notes(result: AuditResult, confidence: float) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        return result.calibration_for(confidence).warnings_for(confidence)


def kpis(cert: Certificate, flag_below: int, leakage_threshold: float | None = None) -> dict:
    """The numbers of the KPI row: certificate metrics plus the count of flagged documents."""
    metrics = certificate_metrics(cert)
    flagged = flag_mask(cert.set_sizes, flag_below, leakage_threshold)
    metrics["n_flagged"] = int(flagged.sum())
    metrics["flagged_share"] = float(flagged.mean()) if flagged.size else 0.0
    return metrics


def group_table(result: AuditResult, cert: Certificate, flag_below: int,
                leakage_threshold: float | None = None) -> pd.DataFrame:
    """Per-group metrics of ``result``'s certificate ``cert`` (empty when the documents have no groups)."""
    split = result.test_split
    if split.groups is None:
        return pd.DataFrame()
    confidence = cert.confidence
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        calibration = result.calibration_for(confidence)
    flagged = flag_mask(cert.set_sizes, flag_below, leakage_threshold)
    groups = split.groups.astype(str)
    rows = []
    for group in sorted(set(split.groups.tolist()), key=str):
        mask = groups == str(group)
        metrics = certificate_metrics(cert, mask)
        q_hat = calibration.q_hat(confidence, group) if result.config.group_column else \
            calibration.q_hat(confidence)
        rows.append({"group": str(group), "n_test": metrics["n_test"],
                     "n_cal": calibration.n_.get(group, 0) if result.config.group_column else None,
                     "q_hat": q_hat if math.isfinite(q_hat) else None, "n_flagged": int(flagged[mask].sum()),
                     **{k: metrics[k] for k in ("coverage", "coverage_conditional", "candidate_miss_rate",
                                                "median_set_size", "mean_leakage", "top1")}})
    return pd.DataFrame(rows, columns=["group", "n_test", "n_cal", "q_hat", "coverage", "coverage_conditional",
                                       "candidate_miss_rate", "median_set_size", "mean_leakage", "n_flagged",
                                       "top1"])


def calibration_table(result: AuditResult, confidences: Sequence[float]) -> pd.DataFrame:
    """q̂, coverage (conditional and unconditional), miss rate and calibration-size check per level."""
    rows = []
    n_cal = sum(result.calibration.n_.values())
    for level in confidences:
        metrics = certificate_metrics(certificate(result, level))
        notes = calibration_notes(result, level)
        rows.append({
            "confidence": float(level), "alpha": round(1 - float(level), 6), "q_hat": metrics["q_hat"],
            "coverage": metrics["coverage"], "coverage_conditional": metrics["coverage_conditional"],
            "candidate_miss_rate": metrics["candidate_miss_rate"], "open_world_bound": metrics["open_world_bound"],
            "median_set_size": metrics["median_set_size"], "n_cal": n_cal,
            "min_n_cal": minimum_calibration_size(alpha_from_confidence(level)), "warning": "; ".join(notes),
        })
    return pd.DataFrame(rows)


def flagged_table(worklist: pd.DataFrame) -> pd.DataFrame:
    """The worklist as a display table (lists joined as text)."""
    frame = worklist.copy()
    for column in ("top_candidates", "top_weights", "driving_terms"):
        frame[column] = [", ".join(str(v) for v in values) for values in frame[column]]
    return frame


def row_of(cert: Certificate, doc_id: str) -> int:
    """Row of a test document in the certificate, by its id."""
    rows = np.flatnonzero(cert.split.table.doc_ids.astype(str) == str(doc_id))
    if rows.size == 0:
        raise KeyError(doc_id)
    return int(rows[0])


def document_facts(cert: Certificate, row: int) -> dict:
    """What the drill-down states about one test document."""
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
        "score": split.sorted_scores[row, :shown],
    })
    for field in fields:
        frame[field] = [profiles[field].get(c) if c in profiles.index else None for c in ids]
    return frame


def text_of(documents: Documents, doc_id: str) -> str:
    match = documents.frame.loc[documents.frame["doc_id"].astype(str) == str(doc_id), "text"]
    return str(match.iloc[0]) if len(match) else ""


def compare_table(labels: Sequence[str], certificates: Sequence[Certificate], config_ids: Sequence[str],
                  flag_below: int, leakage_threshold: float | None = None) -> pd.DataFrame:
    """One row per configuration: its certificate's metrics at a common confidence level."""
    rows = []
    for label, cert, config_id in zip(labels, certificates, config_ids):
        metrics = kpis(cert, flag_below, leakage_threshold)
        rows.append({"label": label, "config_id": config_id, **{k: metrics[k] for k in (
            "n_test", "coverage", "coverage_conditional", "candidate_miss_rate", "q_hat", "median_set_size",
            "mean_set_size", "mean_leakage", "n_flagged", "flagged_share", "top1", "mrr")}})
    return pd.DataFrame(rows)


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


def without_empty(frame: pd.DataFrame, columns: Sequence[str] = ("q_hat",)) -> pd.DataFrame:
    """``frame`` without those of ``columns`` that hold no value (e.g. q̂ when it differs per group)."""
    return frame.drop(columns=[c for c in columns if c in frame.columns and frame[c].isna().all()])
