"""The packaged all-MiniLM-L6-v2 explains its matches on the sample data with sentences of the released text, at
most one encoder call per document. The explainers by hand: tests/attack/test_attacker_explainers.py.
"""

from __future__ import annotations

import time

from evidence_checks import fits, flagged
from packaged_model import needs_model

from cpa_core.attack.attackers.dense import DenseAttacker
from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS, placeholder_regions
from cpa_core.report.evidence import document_evidence


@needs_model
def test_the_packaged_model_explains_sample_matches_with_sentences(sample_paths, tmp_path):
    from cpa_core.audit.project import load_config
    from cpa_core.io.tables import load_documents, load_registry

    documents = load_documents(sample_paths["documents"])
    registry = load_registry(sample_paths["registry"])
    level = load_config(sample_paths["config"]).level("K3")
    frame = documents.frame.iloc[:30]
    attacker = DenseAttacker(temperature=0.05, cache_dir=str(tmp_path / "emb"))
    table = attacker.attack(frame["doc_id"].tolist(), frame["text"].tolist(), registry, level)
    cert = flagged(table, frame["identity_id"].tolist())
    explainer = attacker.explainer(registry, level)
    calls = attacker.encoder_calls_
    start = time.perf_counter()
    spans = [document_evidence(cert.split, row, explainer) for row in range(len(frame))]
    per_document = (time.perf_counter() - start) / len(frame)
    assert attacker.encoder_calls_ - calls <= len(frame)  # at most one encoder call per document
    assert per_document < 2.0
    assert sum(map(bool, spans)) >= len(frame) // 2
    for text, found in zip(frame["text"], spans):
        regions = placeholder_regions(text, DEFAULT_PLACEHOLDERS)
        for span in found:
            assert fits(text, span) and span.weight > 0 and span.term.startswith("sentence: ")
            assert not any(a < span.end and span.start < b for a, b in regions)
            assert "[REDACTED]" not in span.text
