"""An audit's bundle reproduces it: its command, run on the sample files next to it, writes the audit's figures
(the declared configuration: tests/store/test_bundle.py)."""

from __future__ import annotations

import io
import json
import shutil
import zipfile

from conftest import SAMPLE_DIR, run_cli
from sample_release import sample_project_fixture  # noqa: F401 (the fixture sample_project)

from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.project import declare_audit
from cpa_core.report.verdict import summary_document
from cpa_core.store.bundle import audit_bundle


def test_bundle_reproduces_the_audit(sample_project, tmp_path):
    project, documents, registry = sample_project
    config, attacker = declare_audit(project, registry, documents=documents, knowledge="K1")
    config = config.with_policy(0.93, ReleasePolicy(5))
    result = run_audit(documents, registry, attacker, config)
    expected = summary_document(result)
    with zipfile.ZipFile(io.BytesIO(audit_bundle(result))) as archive:
        archive.extractall(tmp_path)
    for name in ("documents.csv", "registry.csv"):
        shutil.copy(SAMPLE_DIR / name, tmp_path / name)
    script = (tmp_path / "reproduce.sh").read_text().splitlines()
    assert script[3] == "sha256sum -c SHA256SUMS"
    command = script[4].split()
    assert command[:2] == ["cpa", "audit"]
    run = run_cli(*command[1:], cwd=tmp_path)
    assert run.returncode == 0, run.describe()
    reproduced = json.loads((tmp_path / "out" / "reproduced" / "summary.json").read_text())
    assert reproduced == json.loads(json.dumps(expected)) == json.loads(
        (tmp_path / "expected-summary.json").read_text())
    manifest = json.loads((tmp_path / "out" / "reproduced" / "manifest.json").read_text())
    assert manifest["config_id"] == config.config_id == reproduced["verdict"]["config_id"]
    assert f"verdict ({reproduced['verdict']['status']})" in run.stderr


def test_the_bundle_of_a_redacted_release_reproduces_audit_redaction_and_re_audit(sample_project, tmp_path):
    """The chain as the dashboard certifies it: the original audit, the decisions the curator took, the release they
    make and its audit; the bundle's script runs all three again on the original files and gives the same figures."""
    import subprocess

    from cpa_core.io.tables import load_documents
    from cpa_core.redaction.decisions import accepted, proposed_decisions, redacted_config
    from cpa_core.redaction.suggestions import redacted_file

    project, documents, registry = sample_project
    config, attacker = declare_audit(project, registry, documents=documents, knowledge="K1")
    before = run_audit(documents, registry, attacker, config)
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    table, _ = proposed_decisions(before, attacker, registry, texts)
    table.loc[table.index[::3], "accept"] = False  # the curator's own choices
    edits, withheld = accepted(table)
    name, payload = redacted_file(SAMPLE_DIR / "documents.csv", documents, edits, withheld)
    redacted = load_documents(payload, name=name)
    again, attacker_again = declare_audit(project, registry, documents=redacted, knowledge="K1")
    after = run_audit(redacted, registry, attacker_again, redacted_config(again, redacted.frame))
    after = after.with_inputs(redaction={"from_audit": 1, "from_config_id": config.config_id})
    with zipfile.ZipFile(io.BytesIO(audit_bundle(after, before, table))) as archive:
        archive.extractall(tmp_path)
    for file in ("documents.csv", "registry.csv"):
        shutil.copy(SAMPLE_DIR / file, tmp_path / file)
    lines = [line for line in (tmp_path / "reproduce.sh").read_text().splitlines() if not line.startswith("#")]
    assert lines[:2] == ["set -e", "sha256sum -c SHA256SUMS"]
    assert subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True).returncode == 0
    for line in lines[2:]:
        if line.startswith("echo "):  # the redacted release is the one the audit certified
            check = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
            continue
        command = line.split()
        assert command[0] == "cpa"
        run = run_cli(*command[1:], cwd=tmp_path)
        assert run.returncode == 0, run.describe()
    reproduced = json.loads((tmp_path / "out" / "reproduced" / "summary.json").read_text())
    expected = json.loads((tmp_path / "expected-summary.json").read_text())
    assert reproduced == expected and "redaction" not in expected
    assert reproduced["verdict"]["config_id"] == after.config.config_id
