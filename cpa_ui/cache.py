"""Cached wrappers around the core: data and audit results with ``st.cache_data``, the TF-IDF index
that explains matches with ``st.cache_resource``.

Arguments whose names start with ``_`` are not hashed: each such function takes an explicit key (file
checksums, configuration id) that identifies them.

The caches of one audit's objects (its result, its explainer, its figures and worklist) are keyed by the run's key and
hold few entries: a session needs those of its current audit only, and :func:`cpa_ui.memory.adopt_run` drops the
entries of the audit a new one replaces (an audit's result holds every document's ranked candidates).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from cpa_core.attack.base import Attacker
from cpa_core.attack.explainers import Explainer
from cpa_core.attack.registry import get_spec
from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.panel import PanelResult, audit_panel
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.pipeline import estimate_llm_calls, run_audit
from cpa_core.audit.project import ProjectConfig, load_config, parse_config
from cpa_core.audit.results import AuditResult
from cpa_core.common.errors import ConfigError
from cpa_core.io.candidate_scores import CandidateScores, read_candidate_scores
from cpa_core.io.columns import free_text_lengths
from cpa_core.io.reading import encoding_notes, read_table
from cpa_core.io.tables import Documents, Registry, load_documents, load_registry
from cpa_core.report.formatting import counted
from cpa_core.report.metrics import CURVE_CONFIDENCES, confidence_curve
from cpa_core.report.verdict import PanelVerdict, panel_verdict
from cpa_core.report.worklist import worklist
from cpa_ui.analysis import panel_with_policy
from cpa_ui.attackers import Declared
from cpa_ui.state import AuditRun, DataSet

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
    documents = project.load_documents(SAMPLE_FILES["documents"], name="sample_data/documents.csv")
    registry = project.load_registry(SAMPLE_FILES["registry"], name="sample_data/registry.csv")
    return DataSet(documents, registry, project, "sample",
                   fingerprint(documents.sha256, registry.sha256, "sample"), project.group_column,
                   SAMPLE_FILES["documents"].read_bytes())


@st.cache_data(show_spinner=False, max_entries=8)
def table_columns(data: bytes, name: str, encoding: str = "utf-8"
                  ) -> tuple[list[str], int, tuple[str, ...], dict[str, float]]:
    """Column names, row count, encoding notes and the free-text columns' mean lengths
    (:func:`~cpa_core.io.columns.free_text_lengths`) of an uploaded table (raises ``DataError`` if it is not one)."""
    frame, _ = read_table(data, name, encoding=encoding)
    return list(frame.columns), len(frame), encoding_notes(data, encoding, name), free_text_lengths(frame)


@st.cache_data(show_spinner="Validating the documents…", max_entries=8)
def documents_from_upload(data: bytes, name: str, columns: tuple[tuple[str, str], ...], group_column: str | None,
                          on_invalid: str, encoding: str = "utf-8") -> Documents:
    return load_documents(data, name=name, columns=dict(columns), group_column=group_column, on_invalid=on_invalid,
                          encoding=encoding)


@st.cache_data(show_spinner="Validating the registry…", max_entries=8)
def registry_from_upload(data: bytes, name: str, columns: tuple[tuple[str, str], ...], on_invalid: str,
                         encoding: str = "utf-8") -> Registry:
    return load_registry(data, name=name, columns=dict(columns), on_invalid=on_invalid, encoding=encoding)


@st.cache_data(show_spinner=False, max_entries=8)
def config_from_upload(data: bytes, name: str) -> ProjectConfig:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: configuration file is not UTF-8 text") from None
    return parse_config(text, name)


@st.cache_data(show_spinner="Reading the candidate scores…", max_entries=4)
def scores_from_upload(data: bytes, name: str) -> CandidateScores:
    return read_candidate_scores(data, name=name)


@st.cache_resource(show_spinner="Connecting to the Dask scheduler…", max_entries=2)
def engine(address: str):
    """The Dask engine of a scheduler address (``local``: two worker processes on this machine), kept while the
    dashboard runs."""
    from cpa_core.attack.engine import DaskEngine

    return DaskEngine(address)


@st.cache_resource(show_spinner=False, max_entries=1)
def audit(key: str, _documents: Documents, _registry: Registry, _attacker: Attacker,
          _config: AuditConfig, _engine=None) -> AuditResult:
    """Split, attack, calibrate (``key``: data fingerprint + configuration id), with a progress bar; ``_engine``:
    where the attack runs (the results, hence the cache, do not depend on it). The result is immutable: sessions
    share the one object (no pickled copy of its tables). One entry, the latest audit: "Run again" and another
    session of the same configuration reuse it, and no audit outlives the sessions that show it by more than one.

    The bar is drawn inside the cached function, so a cache hit replays it in its final state; callers
    draw it in a placeholder they clear afterwards.
    """
    bar = st.progress(0.0, text="Preparing the attack…")

    def progress(done: int, total: int, step: str) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=f"{step.capitalize()}: {done:,} of {total:,} documents")

    result = run_audit(_documents, _registry, _attacker, _config, progress=progress, engine=_engine)
    certified = "documents certified" if _config.protocol == "release" else "test documents certified"
    bar.progress(1.0, text=f"Calibrated on {counted(sum(result.calibration.n_.values()), 'document')}; "
                           f"{len(result.test_split):,} {certified}")
    return result


@st.cache_resource(show_spinner=False, max_entries=1)
def panel_audit(key: str, _documents: Documents, _registry: Registry,
                _declared: tuple[tuple[AuditConfig, Attacker], ...], _engine=None) -> PanelResult:
    """Audit the release with every attacker of a panel (``key``: data fingerprint + the panel's configuration id),
    one after the other, each run and calibrated on its own (:func:`~cpa_core.audit.panel.audit_panel`), with one
    progress line per attacker; ``_engine``: where the attackers that can run on a cluster attack (the others run in
    this process, and their line says so). One entry, as :func:`audit`: the bars are drawn inside, a cache hit
    replays them in their final state."""
    count = len(_declared)
    bars = []

    def progress(i: int, name: str):
        if _engine is not None and not get_spec(name).runs_on_cluster:
            name = f"{name} (in this process: it cannot run on a cluster)"
        bar = st.progress(0.0, text=f"Attacker {i + 1} of {count}, {name}: preparing the attack…")
        bars.append(bar)

        def step(done: int, total: int, what: str) -> None:
            bar.progress(min(done / max(total, 1), 1.0),
                         text=f"Attacker {i + 1} of {count}, {name}: {what}: {done:,} of {total:,} documents")
        return step

    def finish(result: AuditResult, attacker: Attacker) -> AuditResult:
        bars[-1].progress(1.0, text=f"Attacker {len(bars)} of {count}, {result.config.attacker.name}: calibrated on "
                                    f"{counted(sum(result.calibration.n_.values()), 'document')}; "
                                    f"{len(result.test_split):,} documents certified")
        return result

    return audit_panel(_documents, _registry, _declared, progress, finish=finish, engine=_engine)


def run_label(config: AuditConfig, attackers: tuple[str, ...] = ()) -> str:
    """How an audit is named: its knowledge level, its attacker (or a panel's attackers) and its score."""
    return f"{config.knowledge.name} · {' + '.join(attackers) or config.attacker.name} · {config.score}"


def declared_run(data: DataSet, declared: Declared, scheduler: str | None = None) -> AuditRun:
    """Run (or fetch) the declared audit on the data, on a Dask scheduler when given: a single attacker's
    (:func:`audit_run`) or an attacker panel's (:func:`panel_audit`: the attackers that cannot run on a cluster run in
    this process)."""
    if not declared.is_panel:
        return audit_run(data, declared.config, declared.attacker, scheduler=scheduler)
    key = f"{data.fingerprint}:{declared.config_id}"
    start = time.perf_counter()
    panel = panel_audit(key, data.documents, data.registry, tuple(declared.pairs()),
                        engine(scheduler) if scheduler else None)
    return AuditRun(panel.members[0], key, run_label(declared.config, panel.names), data.fingerprint,
                    time.perf_counter() - start, declared.attacker, panel=panel,
                    attackers=tuple(member.attacker for member in declared.members))


@st.cache_data(show_spinner=False, max_entries=16)
def panel_verdict_at(key: str, confidence: float, policy: ReleasePolicy, _panel: PanelResult) -> PanelVerdict:
    """The verdict of a panel at ``confidence`` under ``policy`` (``key``: the run's key)."""
    return panel_verdict(panel_with_policy(_panel, confidence, policy), confidence)


def audit_run(data: DataSet, config: AuditConfig, attacker: Attacker, documents: Documents | None = None,
              label: str | None = None, scheduler: str | None = None) -> AuditRun:
    """Run (or fetch) the audit of ``config`` on the data; ``documents`` overrides the data's documents;
    ``scheduler``: a Dask scheduler address (or ``local``) to run the attack on."""
    documents = documents if documents is not None else data.documents
    data_key = data.fingerprint if documents is data.documents else fingerprint(data.fingerprint, documents.file,
                                                                               len(documents), documents.sha256)
    if documents is not data.documents:  # another release (e.g. one group): bound to it when it runs
        config = replace(config, data={})
    key = f"{data_key}:{config.config_id}"
    start = time.perf_counter()
    if scheduler:
        from cpa_core.attack.engine import shipped_attacker
        shipped_attacker(attacker, {})  # an attacker that runs in this process only is said before connecting
    result = audit(key, documents, data.registry, attacker, config, engine(scheduler) if scheduler else None)
    return AuditRun(result, key, label or run_label(config), data_key, time.perf_counter() - start, attacker)


@st.cache_data(show_spinner="Computing the coverage curve…", max_entries=4)
def curve(key: str, _result: AuditResult) -> pd.DataFrame:
    """Coverage and median set size versus confidence (``key``: the run's key)."""
    return confidence_curve(_result)


@st.cache_data(show_spinner="Computing the set sizes across confidence levels…", max_entries=4)
def sizes_by_level(key: str, _result: AuditResult) -> pd.DataFrame:
    """Documents per set size at each level of the curve (``key``: the run's key): a few kilobytes, whatever the
    number of documents."""
    from cpa_ui.figures import set_size_counts

    return set_size_counts(dict(zip(CURVE_CONFIDENCES, (cert.set_sizes for cert in
                                                          _result.certificates(CURVE_CONFIDENCES)))))


@st.cache_resource(show_spinner="Indexing the profiles to explain matches…", max_entries=2)
def explainer(key: str, _data: DataSet, _run: AuditRun) -> Explainer | None:
    """The run's attacker's explainer of matches (``key``: the run's key), ``None`` when it has none."""
    from cpa_core.report.evidence import audit_explainer

    return audit_explainer(_run.attacker, _data.registry, _run.result.config)


@st.cache_data(show_spinner="Finding the terms that drive each match…", max_entries=4)
def explained_worklist(key: str, config_id: str, _result: AuditResult, _data: DataSet, _run: AuditRun) -> pd.DataFrame:
    """The redaction worklist with driving terms of ``_result``, the run declared with a flagging level and a
    release policy (``key``: the run's key; ``config_id``: the declared configuration's)."""
    config = _result.config
    return worklist(_result.certificate(config.policy_confidence), config.policy, config_id,
                    explain=explainer(key, _data, _run))


def llm_calls(data: DataSet, config: AuditConfig, attacker: Attacker) -> int:
    """The dry run of the declared audit: LLM calls not yet answered by the cache."""
    return estimate_llm_calls(data.documents, data.registry, attacker, config)
