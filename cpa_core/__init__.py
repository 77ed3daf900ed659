"""Conformal Privacy Auditing: per-document certified ambiguity sets for released text.

Under exchangeability of calibration and audited documents, the certified set of a document
contains its true identity with probability at least the chosen confidence level.

The public names below are imported on first use, so that ``import cpa_core.conformal`` loads the
conformal core alone.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_PUBLIC = {
    "cpa_core.attack.attackers.imported": ("ImportedAttacker", "load_candidate_scores"),
    "cpa_core.attack.attackers.tfidf": ("TfidfAttacker", "TfidfIndex"),
    "cpa_core.attack.candidates": ("CandidateTable",),
    "cpa_core.attack.registry": ("attacker_specs", "get_spec", "register"),
    "cpa_core.attack.spec": ("AttackerSpec",),
    "cpa_core.audit.configuration": ("AttackerConfig", "AuditConfig"),
    "cpa_core.audit.pipeline": ("run_audit",),
    "cpa_core.audit.policy": ("ReleasePolicy",),
    "cpa_core.audit.project": ("ProjectConfig", "declare_audit", "load_config", "parse_config"),
    "cpa_core.audit.results": ("AuditResult", "Certificate", "ScoredSplit", "certify"),
    "cpa_core.common.errors": ("ConfigError", "CPAError", "DataError", "LLMBudgetError", "LLMError"),
    "cpa_core.common.params": ("Param",),
    "cpa_core.conformal.calibration": ("Calibration", "CalibrationNote", "alpha_from_confidence", "calibrate",
                                       "confidence_label", "conformal_threshold", "p_values", "set_sizes",
                                       "threshold_rank"),
    "cpa_core.conformal.scores": ("SCORES", "Score", "get_score"),
    "cpa_core.io.candidate_scores": ("CandidateScores", "read_candidate_scores"),
    "cpa_core.io.knowledge": ("KnowledgeLevel", "profile_texts"),
    "cpa_core.io.split": ("split_indices",),
    "cpa_core.io.tables": ("Documents", "Registry", "ValidationReport", "load_documents", "load_registry"),
    "cpa_core.report.metrics": ("AuditSummary", "certificate_metrics", "summarize"),
    "cpa_core.report.worklist": ("worklist", "worklist_csv", "worklist_json"),
    "cpa_core.store.records": ("manifest", "write_audit"),
}
_MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'cpa_core' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
