"""The PDF certificate report: rendered offline from the print version, A4 pages that are not blank, with the
verdict and the configuration on its first page, asking for no resource (the renderer alone:
tests/ui/test_pdf.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pypdfium2 as pdfium
import pytest

from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.project import ProjectConfig, declare_audit
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.synthetic import generate_sample_data
from cpa_core.io.tables import load_documents, load_registry
from cpa_core.report.html import certificate_report
from cpa_core.report.metrics import confidence_curve, summarize
from cpa_core.report.verdict import release_verdict
from cpa_core.report.worklist import worklist
from cpa_core.store.records import manifest
from cpa_ui.pdf import RefusingFetcher, report_pdf

CONFIDENCE = 0.8
POLICY = ReleasePolicy(20)


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """A small audit's print report, its PDF, the URLs the renderer asked for, and the pages as PNG files."""
    folder = tmp_path_factory.mktemp("pdf")
    paths = generate_sample_data(folder, seed=11, n_people=60, n_documents=300)
    documents, registry = load_documents(paths["documents"]), load_registry(paths["registry"])
    project = ProjectConfig(levels={"K2": KnowledgeLevel("K2", ("age_band", "gender", "occupation", "city",
                                                                 "keywords", "events"))},
                            attackers={"tfidf": {"temperature": 0.04}})
    config, attacker = declare_audit(project, registry, knowledge="K2",
                                     overrides={"protocol": "split", "n_cal": 120, "n_test": 150, "seed": 2,
                                                "confidence": [0.8, 0.9]})
    result = run_audit(documents, registry, attacker, config).with_policy(CONFIDENCE, POLICY)
    html = certificate_report(result, curve=confidence_curve(result),
                              worklist=worklist(result.certificate(CONFIDENCE), POLICY, result.config.config_id),
                              manifest=manifest(result), for_print=True,
                              generated_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    fetcher = RefusingFetcher()
    pdf = report_pdf(html, fetcher)
    document = pdfium.PdfDocument(pdf)
    pages, texts = [], []
    for index in range(len(document)):
        page = document[index]
        image = page.render(scale=1).to_pil()
        image.save(folder / f"page-{index + 1}.png")
        pages.append(np.asarray(image.convert("L"), dtype=float))
        texts.append(page.get_textpage().get_text_range())
    size = document[0].get_size()  # points
    document.close()
    return {"pdf": pdf, "pages": pages, "texts": texts, "size": size, "refused": fetcher.refused, "result": result,
            "verdict": release_verdict(summarize(result, [CONFIDENCE], POLICY), CONFIDENCE)}


def test_pdf_has_pages_that_are_not_blank(rendered):
    assert rendered["pdf"].startswith(b"%PDF-")
    assert len(rendered["pages"]) >= 1
    for number, page in enumerate(rendered["pages"], start=1):
        assert page.shape[0] > page.shape[1]  # portrait
        assert page.std() > 5, f"page {number} is blank"
        assert (page < 128).mean() > 0.003, f"page {number} has (almost) no ink"


def test_pdf_is_a4(rendered):
    assert tuple(round(side) for side in rendered["size"]) == (595, 842)  # points


def test_first_page_carries_the_verdict_and_the_configuration(rendered):
    first, everything = _words(rendered["texts"][0]), _words(" ".join(rendered["texts"]))
    verdict = rendered["verdict"]
    assert f"Verdict: {verdict.title}" in first
    assert _words(verdict.headline) in first
    assert rendered["result"].config.config_id in first
    for text in ("Reviewed by", "Signature", rendered["result"].inputs["registry"]["sha256"],
                 "Flagged documents (redaction worklist)"):
        assert text in everything, text


def test_the_report_asks_for_no_resource(rendered):
    assert rendered["refused"] == []
