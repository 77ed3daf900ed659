"""Records of flagged documents carry the worklist's evidence (one computation, joined by doc id): the same
spans and driving terms as worklist.json, offsets into the released text (on the sample data:
tests/integration/test_records_evidence_sample.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest
from audit_files import check_records_carry_the_worklist_evidence, read_jsonl

from cpa_core.store.records import EVIDENCE_FIELDS, jsonl_lines, record_splits, records, write_audit

# ------------------------------------------------------------------------------------ a toy release (fast)


@pytest.fixture(scope="module")
def toy_audit(tmp_path_factory, toy_release):
    result, explainer, documents = toy_release
    paths = write_audit(result, tmp_path_factory.mktemp("toy-audit"), explainer)
    return result, paths, dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))


@pytest.fixture(scope="module")
def toy_release():
    """A toy TF-IDF audit, its explainer and its documents."""
    from conftest import toy_frames

    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.audit.configuration import AttackerConfig, AuditConfig
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.tables import load_documents, load_registry
    from cpa_core.report.evidence import audit_explainer

    frame, people = toy_frames(n_people=12, docs_per_person=6, seed=3)
    # non-ASCII evidence: a person-specific word written with accents in the released text
    frame["text"] = [f"{text} Zoë went to Gdańsk with Müller." if identity in ("P001", "P004") else text
                     for text, identity in zip(frame["text"], frame["identity_id"])]
    people.loc[people["identity_id"].isin(["P001", "P004"]), "keywords"] += " zoe gdansk muller"
    documents = load_documents(frame.to_csv(index=False).encode("utf-8"), name="toy-documents.csv")
    registry = load_registry(people.to_csv(index=False).encode("utf-8"), name="toy-registry.csv")
    attacker = TfidfAttacker(temperature=0.1)
    config = AuditConfig(knowledge=KnowledgeLevel("K3", ("city", "occupation", "keywords")),
                         attacker=AttackerConfig.of(attacker), confidences=(0.8, 0.9), protocol="split", n_cal=36,
                         n_test=36, seed=1, flag_below=4)
    result = run_audit(documents, registry, attacker, config)
    explainer = audit_explainer(attacker, registry, config)
    assert explainer is not None
    return result, explainer, documents


def test_evidence_explained_in_one_batch_is_each_document_explained_alone(toy_release):
    from cpa_core.report.evidence import document_evidence, documents_evidence

    result, explainer, _ = toy_release
    split = result.test_split
    rows = list(range(len(split)))[::-1]  # any order, every document
    batch = documents_evidence(split, rows, explainer)
    assert sum(map(len, batch)) > 0
    assert batch == [document_evidence(split, row, explainer) for row in rows]
    assert documents_evidence(split, rows, None) == [[] for _ in rows]


def test_toy_records_of_flagged_documents_carry_the_worklist_evidence(toy_audit):
    result, paths, texts = toy_audit
    flagged = json.loads(paths["worklist.json"].read_text(encoding="utf-8"))
    assert 0 < len(flagged) < len(result.test_split)  # some flagged, some not
    assert check_records_carry_the_worklist_evidence(result, paths, texts) > 0
    written = "\n".join(span["text"] for r in read_jsonl(paths["test.jsonl"]) for span in r.get("evidence", []))
    assert any(word in written for word in ("Zoë", "Gdańsk", "Müller")), "no non-ASCII span among the flagged"


def test_toy_records_file_is_the_records_function_with_the_worklist(toy_audit):
    from cpa_core.report.worklist import worklist

    result, paths, _ = toy_audit
    config = result.config
    # the worklist as written, given to the records function: the same files
    work = pd.DataFrame(json.loads(paths["worklist.json"].read_text(encoding="utf-8")))
    assert paths["test.jsonl"].read_text(encoding="utf-8") == "".join(jsonl_lines(records(result, "test", work=work)))
    assert paths["calibration.jsonl"].read_text(encoding="utf-8") == \
        "".join(jsonl_lines(records(result, "calibration", work=work)))
    assert not any("evidence" in r for r in records(result, "test"))  # no worklist given: no evidence fields
    other = worklist(result.certificate(0.8), replace(config.policy, flag_below=3), "someone-else")
    with pytest.raises(ValueError, match="configuration someone-else"):
        list(records(result, "test", work=other))


def test_without_an_explainer_no_record_carries_evidence(tmp_path):
    from tables import audited_groups

    result = audited_groups()[0]
    paths = write_audit(result, tmp_path)
    assert json.loads(paths["worklist.json"].read_text(encoding="utf-8"))  # flagged documents, empty evidence
    for name in record_splits(result):
        assert not any(set(EVIDENCE_FIELDS) & set(r) for r in read_jsonl(paths[f"{name}.jsonl"]))
