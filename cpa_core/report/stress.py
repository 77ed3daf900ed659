"""Stress tests of a configuration; each returns a table (one row per variant and confidence level).

The attack runs once over all documents; variants re-split, re-truncate or re-score that one table,
so every variant sees matched attacker output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Sequence

import numpy as np
import pandas as pd

from cpa_core.attack.attackers.forced_choice import ForcedChoiceAttacker
from cpa_core.attack.attackers.profile import ProfileAttacker
from cpa_core.attack.base import Attacker
from cpa_core.attack.candidates import CandidateTable
from cpa_core.attack.clues import check_call_budget
from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import attack_documents, document_groups, estimate_llm_calls, run_audit
from cpa_core.audit.results import AuditResult, certify, score_table
from cpa_core.common.errors import ConfigError
from cpa_core.common.progress import Progress
from cpa_core.conformal.calibration import calibrate
from cpa_core.io.tables import Documents, Registry
from cpa_core.report.metrics import certificate_metrics, summarize

COLUMNS = ["confidence", "coverage", "coverage_conditional", "candidate_miss_rate", "median_set_size",
           "mean_set_size", "mean_leakage", "empty_rate", "q_hat", "threshold", "top1", "n_test"]


def _rows(result: AuditResult, **variant) -> list[dict]:
    """The variant's figures per confidence level, from the audit's summary."""
    return [{**variant, **{k: row[k] for k in COLUMNS + ["n_cal"]}}
            for row in summarize(result).overall_frame().to_dict("records")]


def full_attack(documents: Documents, registry: Registry, attacker: Attacker, config: AuditConfig,
                progress: Progress | None = None) -> CandidateTable:
    """The attacker's table over every document (shared by the variants)."""
    return attack_documents(documents, registry, attacker, config.knowledge, None, progress)[0]


def drift(calibrated: AuditResult, shifted: AuditResult) -> pd.DataFrame:
    """Calibrate under configuration A, certify the test split of configuration B.

    Coverage can fall below the target: A's threshold is only valid for A's score distribution.
    The row ``own`` recalibrates on B for comparison. Both calibrate one pooled stratum (B's strata need not match
    A's), so the rows differ only by where the threshold was learnt.
    """
    rows = []

    def pooled(result: AuditResult):
        scores, _ = result.calibration_split.calibration_scores(result.config.miss_policy)
        return calibrate(scores, calibrated.config.confidences)

    calibration, own = pooled(calibrated), pooled(shifted)
    test = replace(shifted.test_split, strata=None, groups=None)
    for level in calibrated.config.confidences:
        for label, cert in (("drift (calibrated on A)", certify(test, calibration, level)),
                            ("own (recalibrated on B)", certify(test, own, level))):
            metrics = certificate_metrics(cert).to_dict()
            rows.append({"calibration": label, "calibrated_on": calibrated.config.config_id,
                         "tested_on": shifted.config.config_id, **{k: metrics[k] for k in COLUMNS}})
    return pd.DataFrame(rows)


SWEEPS = {"top_k": "top_k", "score": "score", "seed": "seed"}
"""The fields a sweep may vary, and the column naming the variant in its table."""


def sweep(documents: Documents, registry: Registry, config: AuditConfig, table: CandidateTable, field: str,
          values: Sequence) -> pd.DataFrame:
    """Coverage, miss rate and set size per value of one declared field (top-K, score or seed),
    on the one attack ``table`` (matched attacker output; a variant re-truncates, re-scores or re-splits).
    Variants use the split protocol: their coverage is measured on held-out documents."""
    if field not in SWEEPS:
        raise ConfigError(f"cannot sweep '{field}'; expected one of {', '.join(SWEEPS)}")
    values = list(values)
    if not values:
        raise ConfigError(f"a sweep of '{field}' needs at least one value")
    rows = []
    for value in values:
        result = run_audit(documents, registry, None, replace(config, protocol="split", **{field: value}), table=table)
        rows += _rows(result, **{SWEEPS[field]: value})
    return pd.DataFrame(rows)


def sampling_budget_ablation(documents: Documents, registry: Registry, config: AuditConfig, attacker: Attacker,
                             ms: Sequence[int] = (1, 3, 5, 10), progress: Progress | None = None) -> pd.DataFrame:
    """Coverage and set size per sampling budget ``m`` of a sampling-only LLM attacker, on matched splits.

    ``attacker`` is a forced-choice attacker in ``sampling`` mode or a Profile-CPA attacker; each budget is
    a copy of it with another ``m`` (same seeds, prompts and shortlist), audited on the same split. Sample
    ``j`` of a document is the same request whatever ``m``, so through the LLM cache the whole ablation costs
    the largest budget's samples; that total is checked against the call budget before any call. A larger
    ``m`` gives smaller sets, not more validity: every row carries the guarantee.
    """
    if not isinstance(attacker, (ForcedChoiceAttacker, ProfileAttacker)):
        raise ConfigError(f"the sampling-budget ablation needs a sampling attacker (forced_choice or profile), "
                          f"found '{attacker.name}'")
    if isinstance(attacker, ForcedChoiceAttacker) and attacker.mode != "sampling":
        raise ConfigError("the sampling-budget ablation needs the forced-choice mode 'sampling' (logprobs mode "
                          "makes one request per document whatever m)")
    budgets = sorted({int(m) for m in ms})
    if not budgets or budgets[0] < 1:
        raise ConfigError(f"sampling budgets must be at least 1, found {list(ms)}")
    variants = {m: dataclasses.replace(attacker, m=m) for m in budgets}
    largest = variants[budgets[-1]]
    # the whole ablation, before any call: the largest m's requests hold every other's
    check_call_budget([(largest.client, estimate_llm_calls(documents, registry, largest, config))],
                      f"the sampling-budget ablation (m up to {budgets[-1]})")
    rows = []
    for m in budgets:
        variant = variants[m]
        declared = replace(config.attacker, params={**config.attacker.params, "m": m}, details=variant.params())
        result = run_audit(documents, registry, variant, replace(config, attacker=declared, protocol="split"), progress)
        rows += _rows(result, m=m, llm_calls=variant.counters()["attacker"]["calls"])
    return pd.DataFrame(rows)


def ncal_ablation(documents: Documents, registry: Registry, config: AuditConfig, table: CandidateTable,
                  n_cals: Sequence[int], seeds: Sequence[int] = (0, 1, 2, 3, 4)) -> pd.DataFrame:
    """Coverage and set size per calibration size on *fixed* test documents, averaged over seeds.

    For each seed, the test documents (``n_test`` labelled documents, default: all but the largest ``n_cal``)
    are drawn once; the calibration sets are nested prefixes of one permutation of the others, so a row
    differs from the next only by how many documents calibrate. Means and standard deviations over seeds.
    """
    n_cals = sorted({int(n) for n in n_cals})
    seeds = [int(s) for s in seeds]
    if not n_cals or n_cals[0] < 1 or not seeds:
        raise ConfigError(f"the calibration-size ablation needs n_cal values of at least 1 and a seed, found "
                          f"{list(n_cals)} and {list(seeds)}")
    groups = document_groups(documents, config)
    labelled = np.flatnonzero(documents.frame["identity_id"].notna().to_numpy())
    n_test = config.n_test if config.n_test is not None else len(labelled) - n_cals[-1]
    if n_test < 1 or n_test + n_cals[-1] > len(labelled):
        raise ConfigError(f"n_cal up to {n_cals[-1]} plus n_test = {n_test} needs more than the {len(labelled)} "
                          "labelled documents")
    truth = documents.frame["identity_id"].to_numpy(dtype=object)
    scored = score_table(table.rows(labelled), truth[labelled], None if groups is None else groups[labelled], config)
    rows = []
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(len(labelled))
        test, pool = scored.rows(order[:n_test]), order[n_test:]
        for n_cal in n_cals:
            scores, strata = scored.rows(pool[:n_cal]).calibration_scores(config.miss_policy)
            calibration = calibrate(scores, config.confidences, strata if config.group_column else None)
            for level in config.confidences:
                metrics = certificate_metrics(certify(test, calibration, level)).to_dict()
                rows.append({"n_cal_declared": n_cal, "seed": seed, "n_cal": sum(calibration.n_.values()),
                             **{k: metrics[k] for k in COLUMNS}})
    frame = pd.DataFrame(rows)
    figures = ["coverage", "coverage_conditional", "candidate_miss_rate", "median_set_size", "mean_set_size",
               "empty_rate"]
    out = frame.groupby(["n_cal_declared", "confidence"], sort=True).agg(
        n_cal=("n_cal", "first"), n_test=("n_test", "first"), **{f: (f, "mean") for f in figures},
        **{f"{f}_std": (f, "std") for f in ("coverage", "median_set_size")}).reset_index()
    out["n_seeds"] = len(seeds)
    return out


def split_stability(documents: Documents, registry: Registry, config: AuditConfig, table: CandidateTable,
                    seeds: Sequence[int] = (0, 1, 2, 3, 4)) -> pd.DataFrame:
    """Mean and standard deviation over seeds of coverage and set size, per confidence level."""
    frame = sweep(documents, registry, config, table, "seed", [int(s) for s in seeds])
    stats = frame.groupby("confidence")[["coverage", "coverage_conditional", "median_set_size", "mean_set_size"]]
    out = stats.agg(["mean", "std"])
    out.columns = [f"{a}_{b}" for a, b in out.columns]
    out["n_seeds"] = len(seeds)
    return out.reset_index()
