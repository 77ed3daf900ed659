"""Conformal Privacy Auditing: per-document certified ambiguity sets for released text.

Under exchangeability of calibration and audited documents, the certified set of a document
contains its true identity with probability at least the chosen confidence level.
"""

from .attackers import (AttackerSpec, CandidateScores, ImportedAttacker, TfidfAttacker, TfidfIndex, attacker_specs,
                        get_spec, load_candidate_scores, read_candidate_scores, register)
from .audit import AttackerConfig, AuditConfig, AuditResult, Certificate, ScoredSplit, certify, run_audit
from .candidates import CandidateTable
from .config import ProjectConfig, declare_audit, load_config, parse_config
from .conformal import (Calibration, CalibrationNote, alpha_from_confidence, calibrate, confidence_label,
                        conformal_threshold, p_values, set_sizes, threshold_rank)
from .data import Documents, Registry, ValidationReport, load_documents, load_registry
from .errors import ConfigError, CPAError, DataError, LLMBudgetError, LLMError
from .knowledge import KnowledgeLevel, profile_texts
from .metrics import AuditSummary, certificate_metrics, summarize
from .params import Param
from .policy import ReleasePolicy, worklist, worklist_csv, worklist_json
from .records import manifest, write_audit
from .scores import SCORES, Score, get_score
from .split import split_indices

__version__ = "0.1.0"

__all__ = [
    "AttackerConfig", "AttackerSpec", "AuditConfig", "AuditResult", "AuditSummary", "CPAError", "Calibration",
    "CalibrationNote", "CandidateScores", "CandidateTable", "Certificate", "ConfigError", "DataError", "Documents",
    "ImportedAttacker", "KnowledgeLevel", "LLMBudgetError", "LLMError", "Param", "ProjectConfig", "Registry",
    "ReleasePolicy", "SCORES", "Score", "ScoredSplit", "TfidfAttacker", "TfidfIndex", "ValidationReport",
    "alpha_from_confidence", "attacker_specs", "calibrate", "certificate_metrics", "certify", "confidence_label",
    "conformal_threshold", "declare_audit", "get_spec", "get_score", "load_candidate_scores", "load_config",
    "load_documents", "load_registry", "manifest", "p_values", "parse_config", "profile_texts",
    "read_candidate_scores", "register", "run_audit", "set_sizes", "split_indices", "summarize", "threshold_rank",
    "worklist", "worklist_csv", "worklist_json", "write_audit",
]
