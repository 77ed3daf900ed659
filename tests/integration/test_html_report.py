"""The certificate report in the core: built without the dashboard, and written by ``cpa audit`` as report.html."""

from __future__ import annotations

import html
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd

REPO_ROOT = Path(__file__).resolve().parents[2]
HOSTILE = '<script>alert("cpa")</script>'
AUDIT_FILES = {"summary.json", "documents.jsonl", "worklist.csv", "worklist.json", "manifest.json", "audit.toml"}

HEADLESS_REPORT = textwrap.dedent("""
    import json, sys
    from datetime import datetime, timezone
    from pathlib import Path

    from cpa_core.audit.pipeline import run_audit
    from cpa_core.audit.project import ProjectConfig, declare_audit
    from cpa_core.io.knowledge import KnowledgeLevel
    from cpa_core.io.synthetic import generate_sample_data
    from cpa_core.io.tables import load_documents, load_registry
    from cpa_core.report.html import certificate_report
    from cpa_core.report.metrics import confidence_curve
    from cpa_core.report.worklist import worklist
    from cpa_core.store.records import manifest

    folder = Path(sys.argv[1])
    paths = generate_sample_data(folder, seed=4, n_people=40, n_documents=160)
    documents, registry = load_documents(paths["documents"]), load_registry(paths["registry"])
    project = ProjectConfig(levels={"K1": KnowledgeLevel("K1", ("age_band", "gender", "occupation", "city"))},
                            attackers={"tfidf": {"temperature": 0.05}})
    config, attacker = declare_audit(project, registry, knowledge="K1",
                                     overrides={"protocol": "split", "seed": 1, "confidence": [0.8]})
    result = run_audit(documents, registry, attacker, config)
    config = result.config  # bound to the audited release
    arguments = dict(curve=confidence_curve(result), manifest=manifest(result),
                     worklist=worklist(result.certificate(config.policy_confidence), config.policy, config.config_id),
                     generated_at=datetime.now(timezone.utc))  # one time for both versions
    (folder / "screen.html").write_text(certificate_report(result, **arguments), encoding="utf-8")
    (folder / "print.html").write_text(certificate_report(result, **arguments, for_print=True), encoding="utf-8")
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("streamlit", "plotly", "cpa_ui"))
    print(json.dumps({"loaded": loaded, "config_id": config.config_id}))
""")


def test_the_core_builds_the_report_without_the_dashboard(tmp_path):
    """In a fresh process: the report is built with no Streamlit, plotly or cpa_ui module ever imported; its
    figures are static SVG and it runs no script; on screen it is the print version but for the figures' note."""
    done = subprocess.run([sys.executable, "-c", HEADLESS_REPORT, str(tmp_path)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["loaded"] == []
    screen = (tmp_path / "screen.html").read_text(encoding="utf-8")
    printed = (tmp_path / "print.html").read_text(encoding="utf-8")
    assert screen.startswith("<!DOCTYPE html>") and screen.rstrip().endswith("</html>")
    assert facts["config_id"] in screen and 'id="verdict"' in screen and 'id="signoff"' in screen
    assert "<script" not in screen and "Plotly" not in screen and screen.count("<svg ") == 2
    assert "Static version: the charts" in screen and "Printed version: the charts" in printed
    assert screen.replace("Static version", "Printed version") == printed


def test_cpa_audit_writes_the_certificate_report(sample_paths, cli, tmp_path):
    """``cpa audit`` writes report.html beside summary.json, private like the other files and listed nowhere: it
    states the verdict of summary.json and the configuration id of manifest.json, and escapes what comes from the
    data (a group label that is markup); document text, hostile or not, never appears in it."""
    frame = pd.read_csv(sample_paths["documents"], dtype=str, keep_default_na=False)
    frame.loc[frame["group"] == "ner_masking", "group"] = HOSTILE
    frame.loc[0, "text"] = f"{frame.loc[0, 'text']} {HOSTILE}"
    documents = tmp_path / "documents.csv"
    frame.to_csv(documents, index=False)
    out = tmp_path / "audit"
    done = cli("audit", "--documents", documents, "--registry", sample_paths["registry"], "--config",
               sample_paths["config"], "--attacker", "tfidf", "--out", out, "--no-history")
    assert done.returncode == 0, done.describe()

    assert {p.name for p in out.iterdir()} == AUDIT_FILES | {"report.html", "contents.json"}
    path = out / "report.html"
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    report = path.read_text(encoding="utf-8")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    manifest_text = (out / "manifest.json").read_text(encoding="utf-8")
    manifest = json.loads(manifest_text)
    assert "report.html" not in manifest_text

    assert report.startswith("<!DOCTYPE html>") and report.rstrip().endswith("</html>")
    verdict = summary["verdict"]
    assert f"Verdict: {html.escape(verdict['title'])}</div>" in report
    assert f'<p class="headline">{html.escape(verdict["headline"])}</p>' in report
    assert f"configuration {manifest['config_id']} · generated {manifest['created_at']}" in report
    assert f"<tr><th>configuration id</th><td>{manifest['config_id']}</td></tr>" in report

    assert "<script" not in report and HOSTILE not in report  # no script at all, none from the data
    assert html.escape(HOSTILE) in report  # the group label, escaped
    assert frame.loc[0, "text"][:60] not in report and html.escape(frame.loc[0, "text"][:60]) not in report
