"""The declared placeholder list: ``[evidence] placeholders`` parsed and validated like the other tables, carried in
the audit configuration (a non-default list is another configuration id, the default list keeps the ids already
recorded), written back by :func:`~cpa_core.store.bundle.declared_toml`, and given to every explainer by
:func:`~cpa_core.report.evidence.audit_explainer`.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace

import numpy as np
import pytest
from conftest import SAMPLE_DIR

from cpa_core.attack.attackers.dense import DenseAttacker
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.explainers import LeaveOneOutExplainer, TermExplainer
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.project import declare_audit, load_config, parse_config
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS, placeholder_regions
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.report.evidence import audit_explainer, document_evidence
from cpa_core.store.bundle import declared_toml
from cpa_core.store.records import write_audit
from cpa_core.store.snapshot import read_snapshot, write_snapshot

CUSTOM = (r"\bNURSE_[A-Z]\b", r"\{\{[^}]*\}\}", "«[^»]+»", r'"[A-Z]+"')

REGISTRY_CSV = ("identity_id,city,job\n"
                "P1,Leeds,nurse\nP2,Leeds,baker\nP3,York,pilot\nP4,Hull,nurse\nP5,York,baker\n")
DOCUMENTS_CSV = ("doc_id,text,identity_id\n"
                 "d1,Our NURSE_A from Leeds works as a nurse. {{York}} was not visited.,P1\n"
                 "d2,A baker in Leeds; «Hull» is redacted.,P2\n"
                 "d3,A pilot from York.,P3\n"
                 "d4,A nurse in Hull.,P4\n"
                 "d5,A baker in York.,P5\n")


@pytest.fixture(scope="module")
def sample():
    project = load_config(SAMPLE_DIR / "audit.toml")
    documents = project.load_documents(SAMPLE_DIR / "documents.csv", name="sample_data/documents.csv")
    registry = project.load_registry(SAMPLE_DIR / "registry.csv", name="sample_data/registry.csv")
    return project, documents, registry


def toml_list(patterns) -> str:
    return "[" + ", ".join(json.dumps(p) for p in patterns) + "]"


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
    assert config.config_id == "dfb625804fce"  # the id this configuration had before placeholders were declared
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


def test_the_audit_explainer_has_the_declared_placeholders_and_every_span_respects_them(tmp_path):
    registry = load_registry(REGISTRY_CSV.encode(), name="registry.csv")
    documents = load_documents(DOCUMENTS_CSV.encode(), name="documents.csv")
    project = parse_config(f"[evidence]\nplaceholders = {toml_list(CUSTOM)}\n"
                           "[attacker.tfidf]\ntemperature = 0.5\n", "audit.toml")
    config, attacker = declare_audit(project, registry, documents=documents)
    explainer = audit_explainer(attacker, registry, config)
    assert isinstance(explainer, TermExplainer) and explainer.placeholders == CUSTOM
    assert explainer.similarity is not None  # the rest of the explainer is the attacker's
    result = run_audit(documents, registry, attacker, config)
    texts = dict(zip(documents.frame["doc_id"], documents.frame["text"]))
    cert = result.certificate(config.policy_confidence)
    split = cert.split
    spans = {split.table.doc_ids[row]: document_evidence(split, row, explainer) for row in range(len(split))}
    assert "York" not in [s.text for s in spans["d1"]] and "Hull" not in [s.text for s in spans["d2"]]
    assert "Leeds" in [s.text for s in spans["d1"]]
    # without the declared list, the words inside the custom placeholders are evidence
    default = audit_explainer(attacker, registry, replace(config, placeholders=DEFAULT_PLACEHOLDERS))
    assert "York" in [s.text for s in document_evidence(split, list(split.table.doc_ids).index("d1"), default)]

    # what the command line writes: the worklist with the configuration's explainer
    paths = write_audit(result, tmp_path / "out", audit_explainer(attacker, registry, config))
    for record in json.loads(paths["worklist.json"].read_text(encoding="utf-8")):
        text = texts[record["doc_id"]]
        regions = placeholder_regions(text, CUSTOM)
        for span in record["evidence"]:
            start, end = span["offset"], span["offset"] + span["length"]
            assert text[start:end] == span["text"] and not any(a < end and start < b for a, b in regions)
    assert tomllib.loads(paths["audit.toml"].read_text(encoding="utf-8"))["evidence"]["placeholders"] == list(CUSTOM)


def test_the_dense_explainer_takes_the_declared_placeholders(tmp_path):
    class Letters:
        def encode(self, texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True,
                   show_progress_bar=False):
            out = np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], np.float32)
            return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    registry = load_registry(REGISTRY_CSV.encode(), name="registry.csv")
    attacker = DenseAttacker(model="fake-letters", encoder=Letters(), temperature=1.0, cache=False)
    level = KnowledgeLevel("L", ("city", "job"))
    config = AuditConfig(knowledge=level, attacker=AttackerConfig.of(attacker), placeholders=CUSTOM)
    explainer = audit_explainer(attacker, registry, config)
    assert isinstance(explainer, LeaveOneOutExplainer) and explainer.placeholders == CUSTOM
    text = "Works in Leeds {{as a nurse}} today. Seen «in York» once."
    spans = explainer.evidence(text, [0, 1])
    assert spans and all(text[s.start:s.end] == s.text for s in spans)
    assert not any("nurse" in s.text or "York" in s.text for s in spans)
    assert audit_explainer(TfidfAttacker(temperature=1.0), registry, config).placeholders == CUSTOM


def test_a_snapshot_keeps_the_declared_placeholders(tmp_path):
    registry = load_registry(REGISTRY_CSV.encode(), name="registry.csv")
    documents = load_documents(DOCUMENTS_CSV.encode(), name="documents.csv")
    project = parse_config(f"[evidence]\nplaceholders = {toml_list(CUSTOM)}\n", "audit.toml")
    config, attacker = declare_audit(project, registry, documents=documents)
    result = run_audit(documents, registry, attacker, config)
    path, sha256 = write_snapshot(result, tmp_path)
    restored = read_snapshot(path, sha256)
    assert restored.config.placeholders == CUSTOM and restored.config.config_id == config.config_id
