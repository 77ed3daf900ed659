"""The declared configuration written as a file declares the same configuration again; the id covers the
release and the release policy (a bundle's command reproducing the audit's figures:
tests/integration/test_bundle_reproduce.py)."""

from __future__ import annotations

import tomllib
from dataclasses import replace

import pytest
from sample_release import sample_project_fixture  # noqa: F401 (the fixture sample_project)

from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.project import ProjectConfig, declare_audit, parse_config
from cpa_core.common.errors import ConfigError
from cpa_core.io.tables import load_documents
from cpa_core.store.bundle import declared_toml, reproduce_command

DECLARATIONS = [
    {},
    {"knowledge": "K1", "overrides": {"top_k": 50, "miss_policy": "exclude", "flag_below": 4}},
    {"fields": ["city", "occupation"], "overrides": {"protocol": "split", "n_cal": 300, "n_test": 200, "seed": 3,
                                                     "score": "rank", "leakage_threshold": 0.2}},
    {"overrides": {"confidence": [0.8, 0.935], "flag_confidence": 0.935, "group_column": None},
     "attacker_params": {"temperature": 0.07, "ngram_max": 2}},
]


@pytest.mark.parametrize("declaration", DECLARATIONS, ids=["defaults", "k1-topk-exclude", "custom-split-rank",
                                                           "levels-temperature"])
def test_declared_file_declares_the_same_configuration(sample_project, declaration):
    project, documents, registry = sample_project
    config, _ = declare_audit(project, registry, documents=documents, **declaration)
    text = declared_toml(config)
    again, _ = declare_audit(parse_config(text, "audit.toml"), registry, documents=documents)
    assert again.config_id == config.config_id
    assert again.to_dict() == config.to_dict()
    assert tomllib.loads(text)["inputs"]["documents"]["sha256"] == documents.sha256


def test_the_id_covers_the_release_and_the_policy(sample_project):
    project, documents, registry = sample_project
    config, _ = declare_audit(project, registry, documents=documents)
    subset = replace(documents, frame=documents.frame.iloc[:500])
    assert declare_audit(project, registry, documents=subset)[0].config_id != config.config_id
    other = replace(documents, sha256="0" * 64)
    assert declare_audit(project, registry, documents=other)[0].config_id != config.config_id
    for changed in ({"flag_below": 3}, {"leakage_threshold": 0.3}, {"confidence": [0.9]}, {"seed": 8}):
        assert declare_audit(project, registry, documents=documents, overrides=changed)[0].config_id != config.config_id


def test_a_policy_chosen_after_calibration_declares_what_the_command_line_would(sample_project):
    project, documents, registry = sample_project
    config, _ = declare_audit(project, registry, documents=documents)
    viewed = config.with_policy(0.935, ReleasePolicy(3, 0.4))
    cli, _ = declare_audit(project, registry, documents=documents, overrides={
        "confidence": sorted({*map(float, config.confidences), 0.935}), "flag_confidence": 0.935, "flag_below": 3,
        "leakage_threshold": 0.4})
    assert viewed.config_id == cli.config_id
    assert config.with_policy(0.95, config.policy).confidences == config.confidences  # an audited level: not added


def test_files_other_than_the_declared_ones_are_refused(sample_project, tmp_path):
    project, documents, registry = sample_project
    config, _ = declare_audit(project, registry, documents=documents)
    pinned = parse_config(declared_toml(config), "audit.toml")
    frame = documents.frame.copy()
    frame.loc[0, "text"] = frame.loc[0, "text"] + " changed"
    path = tmp_path / "documents.csv"
    frame.to_csv(path, index=False)
    changed = load_documents(path, group_column="group")
    with pytest.raises(ConfigError, match="not the files it certifies"):
        declare_audit(pinned, registry, documents=changed)


def test_run_audit_binds_the_result_to_its_release(sample_project):
    project, documents, registry = sample_project
    small = replace(documents, frame=documents.frame.iloc[:120].reset_index(drop=True))
    config, attacker = declare_audit(project, registry, documents=small, overrides={"confidence": [0.9]})
    result = run_audit(small, registry, attacker, config)
    assert result.config.config_id == config.config_id
    assert result.config.data["documents"] == {"sha256": documents.sha256, "rows": 120}
    with pytest.raises(ConfigError, match="not the files it certifies"):
        run_audit(replace(small, sha256="f" * 64), registry, attacker, config)


def test_reproduce_command_quotes_its_files():
    from tables import LEVEL, toy_attacker

    from cpa_core.audit.configuration import AuditConfig
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), data={"documents": {"sha256": "a", "dropped_rows": 2}})
    command = reproduce_command(config, {"documents": "my docs.csv", "registry": "reg.csv"})
    assert command == "cpa audit --documents 'my docs.csv' --registry reg.csv --config audit.toml --drop-invalid " \
                      "--out out/reproduced"


def test_the_dashboard_at_its_defaults_declares_what_the_command_line_does(sample_project):
    """Uploaded files with no configuration file: the dashboard's default threat model is the command line's, the
    default attacker panel for the release's size, each attacker declared alike."""
    from types import SimpleNamespace

    from cpa_core.audit.panel import default_panel, panel_config_id
    from cpa_core.audit.project import ProjectConfig
    from cpa_ui.attackers import declare_panel, default_threat
    from cpa_ui.state import DataSet

    _, documents, registry = sample_project
    plain = replace(documents, frame=documents.frame.drop(columns=["group"]))
    data = DataSet(plain, registry, ProjectConfig(), "upload", "fingerprint")
    dashboard = declare_panel(data, default_threat(data))
    names = default_panel(len(plain), len(registry))
    command_line = [declare_audit(ProjectConfig(), registry, attacker=name, documents=plain)[0] for name in names]
    assert dashboard.names == names and len(names) > 1
    assert [member.config.config_id for member in dashboard.members] == [config.config_id for config in command_line]
    assert dashboard.config_id == panel_config_id([SimpleNamespace(config=config) for config in command_line])


def test_a_mapped_latin1_release_is_declared_with_its_reading(sample_project, tmp_path):
    """The column mapping and the encoding of an upload are part of the declared configuration, and the file
    reads the same files the same way."""
    project, documents, registry = sample_project
    frame = documents.frame.drop(columns=["group"]).rename(columns={"doc_id": "doc", "text": "note",
                                                                    "identity_id": "subject"})
    frame = frame[[text.isascii() for text in frame["note"]]].reset_index(drop=True)
    frame.loc[0, "note"] = "Zoë Müller a visité Besançon"
    path = tmp_path / "release.csv"
    path.write_bytes(frame.to_csv(index=False).encode("latin-1"))
    mapping = {"doc_id": "doc", "text": "note", "identity_id": "subject"}
    upload = load_documents(path.read_bytes(), name="release.csv", columns=mapping, encoding="latin-1")
    config, _ = declare_audit(ProjectConfig(), registry, documents=upload)
    assert config.data["documents"]["columns"] == mapping and config.data["documents"]["encoding"] == "latin-1"
    declared = parse_config(declared_toml(config), "audit.toml")
    again = declared.load_documents(path)
    assert again.frame.equals(upload.frame)
    assert declare_audit(declared, registry, documents=again)[0].config_id == config.config_id
    utf8 = load_documents(path.read_bytes().decode("latin-1").encode("utf-8"), name="release.csv", columns=mapping)
    assert declare_audit(ProjectConfig(), registry, documents=utf8)[0].config_id != config.config_id
