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


def test_no_function_word_of_the_sample_is_evidence_and_the_search_never_redacts_one(sample_paths):
    """The sample's function words (words in more than a tenth of its 1,000 documents) are in the explainer's raw
    evidence of flagged documents, and in no worklist, drill-down or search: every surface drops them alike."""
    from cpa_core.attack.explainers import fold
    from cpa_core.audit.pipeline import run_audit
    from cpa_core.audit.project import declare_audit, load_config
    from cpa_core.redaction.decisions import proposed_decisions
    from cpa_core.report.evidence import (
        audit_explainer,
        document_query,
        documents_evidence,
        evidence_rows,
        release_function_words,
    )

    project = load_config(sample_paths["config"])
    documents = project.load_documents(sample_paths["documents"])
    registry = project.load_registry(sample_paths["registry"])
    config, attacker = declare_audit(project, registry, attacker="tfidf", documents=documents)
    result = run_audit(documents, registry, attacker, config)
    explainer = audit_explainer(attacker, registry, config)
    cert = result.certificate(config.policy_confidence)
    split = cert.split
    common = release_function_words(split)
    assert common.documents == {"en": len(split)} and len(common.release) > 20 and not common.by_language
    rows = [int(r) for r in range(len(split)) if cert.flags(config.policy)[r]][:200]
    raw = explainer.evidence_batch([document_query(split, r)[0] for r in rows],
                                   [evidence_rows(split, r) for r in rows], [() for _ in rows])
    assert sum(fold(span.term) in common.release for spans in raw for span in spans) > 0  # what the rule drops
    shown = documents_evidence(split, rows, explainer)
    assert all(fold(span.term) not in common.release for spans in shown for span in spans)
    assert sum(len(spans) > 0 for spans in shown) > 0.9 * len(rows)  # evidence is left to act on
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    table, _ = proposed_decisions(result, attacker, registry, texts)
    assert not {fold(term) for term in table["term"].dropna()} & common.release
