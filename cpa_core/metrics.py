"""Metrics of an audit, per confidence level and per group.

Ranking metrics (no guarantee) use the tie-pessimistic rank of the truth; a truth outside the pool
has reciprocal rank 0 and is left out of the mean rank. Conformal metrics are computed on the test
split only.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .audit import AuditResult, Certificate
from .conformal import confidence_label

TOP_KS = (1, 5, 10)


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def ranking_metrics(truth_ranks: np.ndarray) -> dict:
    """Top-k accuracy, MRR and mean rank of the truth (ranks: 1 = top, 0 = outside the pool)."""
    n = truth_ranks.shape[0]
    hit = truth_ranks > 0
    out = {f"top{k}": float(np.mean(hit & (truth_ranks <= k))) if n else None for k in TOP_KS}
    out["mrr"] = float(np.mean(np.where(hit, 1.0 / np.maximum(truth_ranks, 1), 0.0))) if n else None
    out["mean_rank"] = float(np.mean(truth_ranks[hit])) if hit.any() else None
    return out


def certificate_metrics(cert: Certificate, mask: np.ndarray | None = None) -> dict:
    """Coverage, set sizes, leakage and miss rate of the documents selected by ``mask``."""
    split = cert.split
    mask = np.ones(len(split), dtype=bool) if mask is None else mask
    sizes, covered, in_pool = cert.set_sizes[mask], cert.covered[mask], split.in_pool[mask]
    n = int(mask.sum())
    alpha = 1 - float(cert.confidence)
    miss = float(np.mean(~in_pool)) if n else None
    q = np.unique(cert.q_hat[mask])
    out = {
        "confidence": float(cert.confidence),
        "n_test": n,
        "coverage": float(np.mean(covered)) if n else None,
        "coverage_conditional": float(np.mean(covered[in_pool])) if in_pool.any() else None,
        "candidate_miss_rate": miss,
        "open_world_bound": (1 - miss) * (1 - alpha) if n else None,
        "median_set_size": float(np.median(sizes)) if n else None,
        "mean_set_size": float(np.mean(sizes)) if n else None,
        "min_set_size": int(sizes.min()) if n else None,
        "max_set_size": int(sizes.max()) if n else None,
        "p10_set_size": float(np.percentile(sizes, 10)) if n else None,
        "p90_set_size": float(np.percentile(sizes, 90)) if n else None,
        "mean_leakage": float(np.mean(1.0 / np.maximum(1, sizes))) if n else None,
        "empty_rate": float(np.mean(sizes == 0)) if n else None,
        "q_hat": _finite(q[0]) if q.shape[0] == 1 else None,
    }
    out.update(ranking_metrics(split.truth_ranks[mask]))
    return out


def summarize(result: AuditResult, confidences=None) -> dict:
    """``summary.json``: per confidence level, overall and per group."""
    levels = confidences if confidences is not None else result.config.confidences
    per_level = {}
    for level in levels:
        cert = result.certificate(level)
        entry = certificate_metrics(cert)
        entry["n_cal"] = sum(result.calibration.n_.values())
        entry["warnings"] = result.calibration_for(level).warnings_for(level)
        if result.test_split.groups is not None:
            entry["groups"] = {}
            for group in sorted(set(result.test_split.groups.tolist()), key=str):
                metrics = certificate_metrics(cert, result.test_split.groups == group)
                calibration = result.calibration_for(level)
                metrics["n_cal"] = calibration.n_.get(group, 0)
                metrics["q_hat"] = _finite(calibration.q_hat(level, group)) if group in calibration.n_ else None
                entry["groups"][str(group)] = metrics
        per_level[confidence_label(level)] = entry
    return {"config_id": result.config.config_id, "score": result.config.score,
            "knowledge": result.config.knowledge.name, "attacker": result.config.attacker.get("attacker"),
            "miss_policy": result.config.miss_policy, "confidence": per_level}


def summary_frame(summary: dict) -> pd.DataFrame:
    """One row per (confidence, group) of a summary, group ``all`` for the whole test split."""
    rows = []
    for label, entry in summary["confidence"].items():
        rows.append({"confidence": label, "group": "all", **{k: v for k, v in entry.items() if k not in ("groups", "warnings")}})
        for group, metrics in entry.get("groups", {}).items():
            rows.append({"confidence": label, "group": group, **metrics})
    return pd.DataFrame(rows)


CURVE_CONFIDENCES = tuple(round(0.50 + 0.01 * i, 2) for i in range(50)) + (0.995,)


def confidence_curve(result: AuditResult, confidences=CURVE_CONFIDENCES) -> pd.DataFrame:
    """Coverage and set sizes of the test split as the confidence level varies (no re-attack).

    One row per confidence level with ``confidence``, ``alpha``, ``coverage``,
    ``coverage_conditional``, ``median_set_size``, ``mean_set_size``, ``mean_leakage``, ``empty_rate``
    and ``q_hat`` (``None`` when infinite or when it differs between groups).
    """
    columns = ["coverage", "coverage_conditional", "median_set_size", "mean_set_size", "mean_leakage",
               "empty_rate", "q_hat"]
    rows = []
    for level in confidences:
        metrics = certificate_metrics(result.certificate(level))
        rows.append({"confidence": float(level), "alpha": round(1 - float(level), 10),
                     **{k: metrics[k] for k in columns}})
    return pd.DataFrame(rows, columns=["confidence", "alpha", *columns])
