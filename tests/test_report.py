"""The HTML certificate report: self-contained, complete, escaped, and free of document text."""

from __future__ import annotations

from datetime import datetime, timezone
from html.parser import HTMLParser

import pandas as pd
import pytest
from plotly.offline import get_plotlyjs

from cpa_core.audit import run_audit
from cpa_core.config import ProjectConfig, declare_audit
from cpa_core.data import load_documents, load_registry
from cpa_core.knowledge import KnowledgeLevel
from cpa_core.metrics import confidence_curve
from cpa_core.policy import ReleasePolicy, worklist
from cpa_core.records import manifest
from cpa_core.synthetic import generate_sample_data
from cpa_ui.report import certificate_report

HOSTILE_GROUP = '<img src=x onerror="alert(1)">'
HOSTILE_FILE = "<b>notes</b>.csv"
CONFIDENCE = 0.8


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    """A small synthetic audit whose group labels and file name are hostile markup."""
    folder = tmp_path_factory.mktemp("report-data")
    paths = generate_sample_data(folder, seed=5, n_people=80, n_documents=400)
    frame = pd.read_csv(paths["documents"], dtype=str, keep_default_na=False)
    frame.loc[frame["group"] == "ner_masking", "group"] = HOSTILE_GROUP
    documents = load_documents(frame.to_csv(index=False).encode("utf-8"), name=HOSTILE_FILE)
    registry = load_registry(paths["registry"])
    project = ProjectConfig(levels={"K2": KnowledgeLevel("K2", ("age_band", "gender", "occupation", "city",
                                                                 "keywords", "events"), "direct", "medium")},
                            attackers={"tfidf": {"temperature": 0.04}})
    config, attacker = declare_audit(project, registry, knowledge="K2",
                                     overrides={"protocol": "split", "n_cal": 150, "n_test": 200, "seed": 3, "group_column": "group",
                                                "confidence": [0.8, 0.9]})
    result = run_audit(documents, registry, attacker, config)
    policy = ReleasePolicy(30, 0.2)
    work = worklist(result.certificate(CONFIDENCE), policy, config.config_id,
                    explain=lambda query, rows: ["golf", "<script>"])
    html = certificate_report(result, confidence=CONFIDENCE, policy=policy, curve=confidence_curve(result),
                              worklist=work, manifest=manifest(result),
                              generated_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    return {"result": result, "html": html, "worklist": work, "documents": documents}


def test_report_is_one_complete_html_document(audit):
    html = audit["html"]
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    parser = _Tags()
    parser.feed(html)
    tags = [tag for tag, _ in parser.tags]
    assert tags.count("html") == 1 and tags.count("body") == 1 and "title" in tags


def test_report_is_self_contained(audit):
    html = audit["html"]
    parser = _Tags()
    parser.feed(html)
    for tag, attrs in parser.tags:
        assert "src" not in attrs or tag not in ("script", "img", "iframe"), (tag, attrs)
        assert tag != "link", attrs
    # plotly.js is inlined exactly once (its defaults name URLs it never loads for these charts) ...
    bundle = get_plotlyjs()
    assert html.count(bundle[:200]) == 1
    outside = html.replace(bundle, "")
    assert "http://" not in outside and "https://" not in outside
    # ... and every figure is drawn from data in the page
    assert html.count("Plotly.newPlot") >= 3
    for div in ("fig-histogram", "fig-curve", "fig-groups"):
        assert f'id="{div}"' in html


def test_report_states_what_was_audited_and_the_configuration(audit):
    html, result = audit["html"], audit["result"]
    config = result.config
    for text in (config.config_id, "K2", "age_band, gender, occupation, city, keywords, events", "aps",
                 "whole registry", "80 %", "flag |C| &lt; 30 or leakage &gt; 0.2", "2026-01-02T03:04:05+00:00",
                 result.inputs["documents"]["sha256"], result.inputs["registry"]["sha256"]):
        assert text in html, text
    for section in ("What was audited", "The declared threat configuration", "The guarantee, in plain words",
                    "exchangeable", "do not mean", "not</b> a probability of\nre-identification",
                    "Flagged documents", "Data checksums and versions", "numpy"):
        assert section in html, section


def test_report_numbers_match_the_core(audit):
    html, result = audit["html"], audit["result"]
    cert = result.certificate(CONFIDENCE)
    flagged = int(((cert.set_sizes < 30) | (1 / cert.set_sizes.clip(min=1) > 0.2)).sum())
    assert len(audit["worklist"]) == flagged
    assert f"<b>{flagged:,}</b> of {len(cert.set_sizes):,}" in html
    for doc_id in audit["worklist"]["doc_id"].head(20):
        assert f"<td>{doc_id}</td>" in html


def test_report_escapes_data_and_contains_no_document_text(audit):
    html = audit["html"]
    assert HOSTILE_GROUP not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert HOSTILE_FILE not in html and "&lt;b&gt;notes&lt;/b&gt;.csv" in html
    assert "<script>," not in html and "&lt;script&gt;" in html
    texts = audit["documents"].frame["text"]
    longest = texts[texts.str.len().idxmax()]
    for snippet in (longest[:60], longest[-60:]):
        assert snippet not in html


def test_confidence_curve_of_the_report_matches_the_certificates(audit):
    from cpa_core.metrics import certificate_metrics

    result = audit["result"]
    curve = confidence_curve(result, confidences=(0.5, 0.8, 0.9, 0.95))
    assert list(curve["confidence"]) == [0.5, 0.8, 0.9, 0.95]
    for row in curve.itertuples():
        metrics = certificate_metrics(result.certificate(row.confidence))
        assert row.coverage == metrics["coverage"] and row.median_set_size == metrics["median_set_size"]
    # thresholds grow with the confidence level, so sets are nested: coverage and sizes never decrease
    assert curve["coverage"].is_monotonic_increasing and curve["mean_set_size"].is_monotonic_increasing
