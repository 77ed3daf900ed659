"""An attacker added by one module plus one registration (tests/overlap_attacker.py) audits through the command
line and runs from the dashboard's form without any other change. The TOML reader and the command line's checks:
tests/attack/test_registry.py."""

from __future__ import annotations

import json

from apptest import TIMEOUT_S, shown
from conftest import REPO_ROOT, run_cli_inprocess
from overlap_attacker import registered_overlap  # noqa: F401 (the fixture overlap)


def test_the_dashboard_form_runs_it(overlap, sample_paths):
    from streamlit.testing.v1 import AppTest

    from cpa_ui import nav

    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=TIMEOUT_S).run()
    at.switch_page(nav.THREAT).run()
    at.multiselect(key="w.threat.attackers").set_value(["overlap"]).run()
    assert "Word overlap" in at.multiselect(key="w.threat.attackers").options
    at.number_input(key="w.threat.param.overlap.min_word_length").set_value(4).run()
    assert not at.exception and not at.error, [shown(e) for e in at.error]
    assert any("counts the words each registry profile shares" in shown(i) for i in at.info)
    at.switch_page(nav.CALIBRATE).run()
    at.button(key="calibrate.run").click().run()
    assert not at.exception and not at.error
    config = at.session_state["cpa.run"].result.config
    assert config.attacker.name == "overlap" and config.attacker.params == {"min_word_length": 4, "temperature": 1.0}


def test_the_command_line_runs_it_with_its_own_option(overlap, sample_paths, tmp_path):
    out = tmp_path / "overlap"
    result = run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                               "--config", sample_paths["config"], "--attacker", "overlap", "--min-word-length", 4,
                               "--temperature", 0.5, "--out", out)
    assert result.returncode == 0, result.describe()
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert summary["attacker"] == "overlap"
    assert manifest["attacker"] == {"attacker": "overlap", "min_word_length": 4, "temperature": 0.5, "top_k": None}
    assert summary["confidence"]["0.9"]["coverage"] > 0.5  # the sample documents share words with their people
