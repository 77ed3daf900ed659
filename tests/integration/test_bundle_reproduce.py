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
