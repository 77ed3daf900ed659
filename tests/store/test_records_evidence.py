"""Records of flagged documents carry the worklist's evidence (one computation, joined by doc id): the same
spans and driving terms as worklist.json, offsets into the released text (on the sample data:
tests/integration/test_records_evidence_sample.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest
from audit_files import check_records_carry_the_worklist_evidence, read_jsonl
from toy_release import toy_release_fixture  # noqa: F401 (the fixture toy_release)

from cpa_core.store.records import EVIDENCE_FIELDS, jsonl_lines, record_splits, records, write_audit

# ------------------------------------------------------------------------------------ a toy release (fast)


@pytest.fixture(scope="module")
def toy_audit(tmp_path_factory, toy_release):
    result, explainer, documents = toy_release
    paths = write_audit(result, tmp_path_factory.mktemp("toy-audit"), explainer)
    return result, paths, dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))


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
