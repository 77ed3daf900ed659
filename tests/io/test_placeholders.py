"""The declared placeholder list: ``[evidence] placeholders`` parsed and validated like the other tables, carried in
the audit configuration (a non-default list is another configuration id, the default list keeps the ids already
recorded) and written back by :func:`~cpa_core.store.bundle.declared_toml` (given to every explainer by
:func:`~cpa_core.report.evidence.audit_explainer`: tests/report/test_evidence.py; kept by a snapshot:
tests/store/test_snapshot.py).
"""

from __future__ import annotations

import tomllib
from dataclasses import replace

import pytest
from conftest import SAMPLE_DIR
from placeholder_release import CUSTOM, REGISTRY_CSV, toml_list

from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.project import declare_audit, load_config, parse_config
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS
from cpa_core.io.tables import load_registry
from cpa_core.store.bundle import declared_toml


@pytest.fixture(scope="module")
def sample():
    project = load_config(SAMPLE_DIR / "audit.toml")
    documents = project.load_documents(SAMPLE_DIR / "documents.csv", name="sample_data/documents.csv")
    registry = project.load_registry(SAMPLE_DIR / "registry.csv", name="sample_data/registry.csv")
    return project, documents, registry


def test_the_table_is_parsed_and_declared():
    project = parse_config(f"[evidence]\nplaceholders = {toml_list(CUSTOM)}\n", "audit.toml")
    assert project.placeholders == CUSTOM
    assert parse_config("", "audit.toml").placeholders == DEFAULT_PLACEHOLDERS
    assert parse_config("[evidence]\n", "audit.toml").placeholders == DEFAULT_PLACEHOLDERS
    assert parse_config("[evidence]\nplaceholders = []\n", "audit.toml").placeholders == ()  # nothing is a placeholder
    registry = load_registry(REGISTRY_CSV.encode(), name="registry.csv")
    config, _ = declare_audit(project, registry)
    assert config.placeholders == CUSTOM and config.to_dict()["placeholders"] == list(CUSTOM)


@pytest.mark.parametrize("text,parts", [
    ('[evidence]\nplaceholders = ["PERSON_[0-9", "ok"]\n', ["[evidence] placeholders", "'PERSON_[0-9'",
                                                             "not a valid regular expression"]),
    ('[evidence]\nplaceholders = ["(?P<x"]\n', ["[evidence] placeholders", "'(?P<x'"]),
    ('[evidence]\nplaceholders = "<NAME>"\n', ["[evidence] placeholders", "a list of regular expressions", "'<NAME>'"]),
    ('[evidence]\nplaceholders = ["<NAME>", 3]\n', ["[evidence] placeholders", "a list of regular expressions"]),
    ('[evidence]\nplaceholders = ["x*"]\n', ["[evidence] placeholders", "'x*'", "empty text"]),
    ('[evidence]\nplacehoders = ["x"]\n', ["unknown key 'placehoders'", "[evidence]", "placeholders"]),
    ('evidence = ["x"]\n', ["[evidence] must be a table"]),
])
def test_a_bad_list_is_a_one_line_message_naming_the_table_and_the_expression(text, parts):
    with pytest.raises(ConfigError) as info:
        parse_config(text, "audit.toml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("audit.toml: ")
    for part in parts:
        assert part in message


def test_the_default_list_keeps_the_recorded_ids_and_another_list_changes_them(sample):
    level = KnowledgeLevel("W", ("words",))
    config = AuditConfig(knowledge=level, attacker=AttackerConfig("tfidf", {"temperature": 0.5}))
    # the id of this configuration since certainty strata and the acceptable linkage rate were declared (both change
    # what is certified); declaring the default placeholders does not change it
    assert config.config_id == "231e6cbf2fac"
    assert "placeholders" not in config.to_dict()
    other = replace(config, placeholders=CUSTOM)
    assert other.config_id != config.config_id and replace(other, placeholders=DEFAULT_PLACEHOLDERS) == config
    assert replace(config, placeholders=list(DEFAULT_PLACEHOLDERS)).config_id == config.config_id
    with pytest.raises(ConfigError, match="not a valid regular expression"):
        replace(config, placeholders=["("])

    project, documents, registry = sample
    plain, _ = declare_audit(project, registry, documents=documents)
    spelled = replace(project, evidence={"placeholders": DEFAULT_PLACEHOLDERS})  # the default, written out
    assert declare_audit(spelled, registry, documents=documents)[0].config_id == plain.config_id
    custom = replace(project, evidence={"placeholders": CUSTOM})
    assert declare_audit(custom, registry, documents=documents)[0].config_id != plain.config_id


def test_the_declared_file_writes_the_list_back(sample):
    project, documents, registry = sample
    tricky = (*CUSTOM, r"\[\[[^\]]*\]\]", "'quoted'", "Zoë_\\d+")
    config, _ = declare_audit(replace(project, evidence={"placeholders": tricky}), registry, documents=documents)
    text = declared_toml(config)
    assert tomllib.loads(text)["evidence"] == {"placeholders": list(tricky)}
    again, _ = declare_audit(parse_config(text, "audit.toml"), registry, documents=documents)
    assert again.placeholders == tricky and again.config_id == config.config_id
    # the default list is not written: an absent table declares it
    default, _ = declare_audit(project, registry, documents=documents)
    assert "evidence" not in tomllib.loads(declared_toml(default))
    assert declare_audit(parse_config(declared_toml(default), "audit.toml"), registry,
                         documents=documents)[0].config_id == default.config_id
