"""Reopening a recorded audit: it fits only the documents and registry it certified, and its attacker is rebuilt
only when rebuilding sends nothing anywhere."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.audit.project import declare_audit, load_config
from cpa_core.common.errors import HistoryError
from cpa_core.store.history import HistoryEntry
from cpa_core.store.reopen import Unexplained, data_mismatch, declared_attacker


@pytest.fixture(scope="module")
def sample(sample_paths):
    project = load_config(sample_paths["config"])
    return project, project.load_documents(sample_paths["documents"]), project.load_registry(sample_paths["registry"])


def entry_of(documents_table, registry_table, **changes: dict) -> HistoryEntry:
    """A recorded audit of these files; ``changes`` alters what it recorded of a role (documents, registry)."""
    checksums = {"documents": {"file": "documents.csv", "sha256": documents_table.sha256, "rows": len(documents_table)},
                 "registry": {"file": "registry.csv", "sha256": registry_table.sha256, "rows": len(registry_table)}}
    for role, change in changes.items():
        checksums[role] = {**checksums[role], **change}
    return HistoryEntry(id=7, created_at="2026-11-26T10:00:00+00:00", source="cli", config_id="c0ffee", config={},
                        checksums=checksums, summary={}, flag_confidence="0.9", set_sizes={}, flagged=(),
                        out_dir=None, versions={}, snapshot=None, snapshot_sha256=None)


def test_an_audit_fits_only_the_files_it_certified(sample):
    _, documents, registry = sample
    assert data_mismatch(entry_of(documents, registry), documents, registry) is None
    other = data_mismatch(entry_of(documents, registry, registry={"sha256": "ab" * 32}), documents, registry)
    assert other.startswith("Audit 7 certified the registry file registry.csv (SHA-256 ")
    assert f"{len(registry)} rows), not the loaded one" in other and "load that file on the Data page" in other
    fewer = data_mismatch(entry_of(documents, registry, documents={"rows": len(documents) - 1}), documents, registry)
    assert fewer is not None and "documents file" in fewer and f"{len(documents) - 1} rows" in fewer


def test_a_reopened_attacker_is_rebuilt_only_when_nothing_is_sent(sample):
    """TF-IDF is rebuilt (it explains matches); an LLM attacker or an unknown one is not, and explains nothing."""
    project, _, registry = sample
    config, _ = declare_audit(project, registry, knowledge="K2")
    rebuilt = declared_attacker(config, registry)
    assert isinstance(rebuilt, TfidfAttacker) and rebuilt.explainer(registry, config.knowledge) is not None
    for name in ("forced_choice", "imported", "no-longer-registered"):
        stand_in = declared_attacker(replace(config, attacker=replace(config.attacker, name=name)), registry)
        assert isinstance(stand_in, Unexplained) and stand_in.explainer(registry, config.knowledge) is None
        with pytest.raises(HistoryError, match="not attacked again"):
            stand_in.attack([], [], registry, config.knowledge)
