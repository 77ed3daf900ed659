"""Records of the sample's flagged documents carry the worklist's evidence: the same spans and driving terms as
worklist.json, offsets into the released text (on toy data: tests/store/test_records_evidence.py)."""

from __future__ import annotations

import json

from audit_files import check_records_carry_the_worklist_evidence

from cpa_core.report.metrics import summarize
from cpa_core.store.records import write_audit


def test_sample_records_evidence_is_the_worklist_evidence(sample_paths, tmp_path):
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.audit.project import declare_audit, load_config
    from cpa_core.report.evidence import audit_explainer

    project = load_config(sample_paths["config"])
    documents = project.load_documents(sample_paths["documents"])
    registry = project.load_registry(sample_paths["registry"])
    config, attacker = declare_audit(project, registry, documents=documents)
    result = run_audit(documents, registry, attacker, config)
    paths = write_audit(result, tmp_path / "audit", audit_explainer(attacker, registry, config))
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    flagged = json.loads(paths["worklist.json"].read_text(encoding="utf-8"))
    assert len(flagged) == summarize(result).level(config.policy_confidence).n_flagged > 0
    assert check_records_carry_the_worklist_evidence(result, paths, texts) >= len(flagged)
