"""Cached wrappers around the core: data and audit results with ``st.cache_data``, the TF-IDF index
that explains matches with ``st.cache_resource``.

Arguments whose names start with ``_`` are not hashed: each such function takes an explicit key (file
checksums, configuration id) that identifies them.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from pathlib import Path

import pandas as pd
import streamlit as st

from cpa_core.attackers.base import Attacker
from cpa_core.attackers.imported import ImportedAttacker, load_candidate_scores
from cpa_core.attackers.tfidf import TfidfIndex
from cpa_core.audit import AuditConfig, AuditResult, estimate_llm_calls, run_audit
from cpa_core.config import ProjectConfig, load_config, parse_config
from cpa_core.data import Documents, Registry, load_documents, load_registry, read_table
from cpa_core.errors import CalibrationWarning, ConfigError
from cpa_core.knowledge import KnowledgeLevel, profile_texts
from cpa_core.metrics import confidence_curve
from cpa_core.policy import TermExplainer, worklist

from .analysis import certificate
from .state import AuditRun, DataSet

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_DIR = REPO_ROOT / "sample_data"
SAMPLE_FILES = {"documents": SAMPLE_DIR / "documents.csv", "registry": SAMPLE_DIR / "registry.csv",
                "config": SAMPLE_DIR / "audit.toml"}


def fingerprint(*parts) -> str:
    """A short stable hash of checksums and options (what identifies loaded content)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@st.cache_data(show_spinner="Loading the sample data…", max_entries=2)
def load_sample() -> DataSet:
    """The bundled sample documents, registry and configuration."""
    project = load_config(SAMPLE_FILES["config"])
    group_column = project.audit.get("group_column")
    documents = load_documents(SAMPLE_FILES["documents"], name="sample_data/documents.csv",
                               columns=project.columns.get("documents"),
                               group_column=group_column if group_column and group_column != "group" else None)
    registry = load_registry(SAMPLE_FILES["registry"], name="sample_data/registry.csv",
                             columns=project.columns.get("registry"))
    return DataSet(documents, registry, project, "sample",
                   fingerprint(documents.sha256, registry.sha256, "sample"), group_column or None)


@st.cache_data(show_spinner=False, max_entries=8)
def table_columns(data: bytes, name: str) -> tuple[list[str], int]:
    """Column names and row count of an uploaded table (raises ``DataError`` if it is not one)."""
    frame, _ = read_table(data, name)
    return list(frame.columns), len(frame)


@st.cache_data(show_spinner="Validating the documents…", max_entries=8)
def documents_from_upload(data: bytes, name: str, columns: tuple[tuple[str, str], ...], group_column: str | None,
                          on_invalid: str) -> Documents:
    return load_documents(data, name=name, columns=dict(columns), group_column=group_column, on_invalid=on_invalid)


@st.cache_data(show_spinner="Validating the registry…", max_entries=8)
def registry_from_upload(data: bytes, name: str, columns: tuple[tuple[str, str], ...], on_invalid: str) -> Registry:
    return load_registry(data, name=name, columns=dict(columns), on_invalid=on_invalid)


@st.cache_data(show_spinner=False, max_entries=8)
def config_from_upload(data: bytes, name: str) -> ProjectConfig:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: configuration file is not UTF-8 text") from None
    return parse_config(text, name)


@st.cache_data(show_spinner="Reading the candidate scores…", max_entries=4)
def scores_from_upload(data: bytes, name: str, kind: str, temperature: float) -> ImportedAttacker:
    return load_candidate_scores(data, name=name, kind=kind, temperature=temperature)


@st.cache_data(show_spinner=False, max_entries=16)
def audit(key: str, _documents: Documents, _registry: Registry, _attacker: Attacker,
          _config: AuditConfig) -> AuditResult:
    """Split, attack, calibrate (``key``: data fingerprint + configuration id), with a progress bar.

    The bar is drawn inside the cached function, so a cache hit replays it in its final state; callers
    draw it in a placeholder they clear afterwards.
    """
    bar = st.progress(0.0, text="Splitting the documents into calibration and test sets…")

    def progress(done: int, total: int, step: str) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=f"{step.capitalize()}: {done:,} of {total:,} documents")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)  # shown on the page from the calibration itself
        result = run_audit(_documents, _registry, _attacker, _config, progress=progress)
    bar.progress(1.0, text=f"Calibrated on {sum(result.calibration.n_.values()):,} documents; "
                           f"{len(result.test_split):,} test documents certified")
    return result


def run_label(config: AuditConfig) -> str:
    return f"{config.knowledge.name} · {config.attacker.get('attacker')} · {config.score}"


def audit_run(data: DataSet, config: AuditConfig, attacker: Attacker, documents: Documents | None = None,
              label: str | None = None) -> AuditRun:
    """Run (or fetch) the audit of ``config`` on the data; ``documents`` overrides the data's documents."""
    documents = documents if documents is not None else data.documents
    data_key = data.fingerprint if documents is data.documents else fingerprint(data.fingerprint, documents.file,
                                                                               len(documents))
    key = f"{data_key}:{config.config_id}"
    start = time.perf_counter()
    result = audit(key, documents, data.registry, attacker, config)
    return AuditRun(result, key, label or run_label(config), data_key, time.perf_counter() - start)


@st.cache_data(show_spinner="Computing the coverage curve…", max_entries=16)
def curve(key: str, _result: AuditResult) -> pd.DataFrame:
    """Coverage and median set size versus confidence (``key``: the run's key)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationWarning)
        return confidence_curve(_result)


@st.cache_resource(show_spinner="Indexing the profiles to explain matches…", max_entries=8)
def explanation_index(key: str, _registry: Registry, _level: KnowledgeLevel, max_features: int = 50_000,
                      ngram_max: int = 1, min_df: int | float = 1) -> TfidfIndex:
    """The TF-IDF index over the level's profile texts, to find the terms that drive a match."""
    return TfidfIndex(max_features, ngram_max, min_df).fit(profile_texts(_registry, _level))


def explainer(data: DataSet, run: AuditRun) -> TermExplainer:
    """``(query, registry rows) -> terms`` shared by a document and candidate profiles, for a run's level."""
    config = run.result.config
    params = config.attacker if config.attacker.get("attacker") == "tfidf" else {}
    settings = {name: params[name] for name in ("max_features", "ngram_max", "min_df") if params.get(name)}
    index = explanation_index(fingerprint(data.fingerprint, config.knowledge.to_dict(), settings), data.registry,
                              config.knowledge, **settings)
    n_profiles = index.profiles_.shape[0]
    return lambda query, rows: index.shared_terms(query, [r for r in rows if 0 <= r < n_profiles])


@st.cache_data(show_spinner="Finding the terms that drive each match…", max_entries=16)
def explained_worklist(key: str, confidence: float, flag_below: int, leakage_threshold: float | None,
                       _data: DataSet, _run: AuditRun) -> pd.DataFrame:
    """The redaction worklist with driving terms (``key``: the run's key)."""
    cert = certificate(_run.result, confidence)
    return worklist(cert, flag_below, _run.result.config.config_id, leakage_threshold=leakage_threshold,
                    explain=explainer(_data, _run))


def llm_calls(data: DataSet, config: AuditConfig, attacker: Attacker) -> int:
    """The dry run of the declared audit: LLM calls not yet answered by the cache."""
    return estimate_llm_calls(data.documents, data.registry, attacker, config)
