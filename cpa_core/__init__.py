"""Conformal Privacy Auditing: per-document certified ambiguity sets for released text.

Under exchangeability of calibration and audited documents, the certified set of a document
contains its true identity with probability at least the chosen confidence level.
"""

from .attackers import ImportedAttacker, TfidfAttacker, TfidfIndex, load_candidate_scores
from .audit import AuditConfig, AuditResult, Certificate, ScoredSplit, certify, run_audit
from .candidates import CandidateTable
from .config import ProjectConfig, declare_audit, load_config, parse_config
from .conformal import (Calibration, alpha_from_confidence, calibrate, confidence_label, conformal_threshold,
                        p_values, set_sizes, threshold_rank)
from .data import Documents, Registry, ValidationReport, load_documents, load_registry
from .errors import CalibrationWarning, ConfigError, CPAError, DataError
from .knowledge import KnowledgeLevel, profile_texts
from .metrics import certificate_metrics, summarize, summary_frame
from .policy import flag_mask, worklist, worklist_csv, worklist_json
from .records import manifest, write_audit
from .scores import SCORES, Score, get_score
from .split import split_indices

__version__ = "0.1.0"

__all__ = [
    "AuditConfig", "AuditResult", "CPAError", "Calibration", "CalibrationWarning", "CandidateTable", "Certificate",
    "ConfigError", "DataError", "Documents", "ImportedAttacker", "KnowledgeLevel", "ProjectConfig", "Registry",
    "SCORES", "Score", "ScoredSplit", "TfidfAttacker", "TfidfIndex", "ValidationReport", "alpha_from_confidence",
    "calibrate", "certificate_metrics", "certify", "confidence_label", "conformal_threshold", "declare_audit",
    "flag_mask", "get_score", "load_candidate_scores", "load_config", "load_documents", "load_registry", "manifest",
    "p_values", "parse_config", "profile_texts", "run_audit", "set_sizes", "split_indices", "summarize",
    "summary_frame", "threshold_rank", "worklist", "worklist_csv", "worklist_json", "write_audit",
]
