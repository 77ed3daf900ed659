"""``cpa audit`` with an attacker panel on the sample data: every member run and calibrated on its own in its folder,
the panel's summary, worklist and verdict at the top, the members side by side."""

from __future__ import annotations

import csv
import json

import pytest
from cli_checks import assert_one_line_error, ok
from conftest import run_cli_inprocess

from cpa_core.store.output_folder import complete_folder


def _audit(sample_paths, out, *extra):
    return run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                             "--config", sample_paths["config"], "--knowledge", "K1", "--out", out, "--no-history",
                             *extra)


@pytest.fixture(scope="module")
def panel(sample_paths, tmp_path_factory):
    out = tmp_path_factory.mktemp("panel") / "audit"
    done = ok(_audit(sample_paths, out, "--attacker", "tfidf", "--attacker", "lexical_fusion"))
    return out, done


def test_each_member_is_a_whole_audit_and_the_panel_is_the_worst_over_them(panel, sample_paths, tmp_path):
    out, done = panel
    contents = complete_folder(out, "audit", verify=["manifest.json", "summary.json"])
    assert {"members/tfidf/summary.json", "members/lexical_fusion/report.html", "worklist.csv"} <= set(contents["files"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["panel"]["attackers"] == ["tfidf", "lexical_fusion"]
    single = tmp_path / "single"
    ok(_audit(sample_paths, single, "--attacker", "tfidf"))
    alone = json.loads((single / "summary.json").read_text())["confidence"]
    member = summary["members"]["tfidf"]["confidence"]
    assert alone.keys() == member.keys()
    for level in alone:  # the same sets; the linkage probability also reads the peer's attack
        assert _sets(alone[level]) == _sets(member[level]), "a member's sets are those of its attacker alone"
    linkage = json.loads((out / "members" / "tfidf" / "manifest.json").read_text())["linkage"]
    assert linkage["peers"] == ["lexical_fusion"] and "lexical_fusion:rank_of_first_guess" in linkage["features"]
    assert json.loads((single / "manifest.json").read_text())["linkage"]["peers"] == []
    verdict = summary["verdict"]
    flagged = {name: {row["doc_id"] for row in csv.DictReader((out / "members" / name / "worklist.csv").open())}
               for name in ("tfidf", "lexical_fusion")}
    panel_rows = list(csv.DictReader((out / "worklist.csv").open()))
    assert {row["doc_id"] for row in panel_rows} == flagged["tfidf"] | flagged["lexical_fusion"]
    assert verdict["n_flagged"] == len(panel_rows) and verdict["bound_level"] == pytest.approx(0.9875)
    assert [member["attacker"] for member in verdict["members"]] == ["tfidf", "lexical_fusion"]
    assert verdict["decided_by"] in ("tfidf", "lexical_fusion")
    assert "attacker 1 of 2: tfidf" in done.stderr and "attacker 2 of 2: lexical_fusion" in done.stderr
    assert f"decided by {verdict['decided_by']}" in done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "panel" and manifest["config_id"] == contents["config_id"]


def _sets(figures: dict) -> dict:
    """A level's figures that the sets alone decide (not the flags, the linkage probability or what they leave)."""
    return {key: _sets(value) if isinstance(value, dict) else value for key, value in figures.items()
            if not any(word in key for word in ("flag", "linkage", "remainder", "released", "bound", "kept"))}


def test_a_panel_is_declared_in_the_file_too(sample_paths, tmp_path):
    config = tmp_path / "audit.toml"
    config.write_text(sample_paths["config"].read_text(encoding="utf-8").replace(
        "[audit]", '[audit]\nattackers = ["lexical_fusion", "tfidf"]', 1), encoding="utf-8")
    out = tmp_path / "audit"
    ok(run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                         "--config", config, "--knowledge", "K1", "--out", out, "--no-history"))
    assert json.loads((out / "summary.json").read_text())["panel"]["attackers"] == ["lexical_fusion", "tfidf"]


def test_what_a_panel_cannot_be_is_one_line(panel, sample_paths, tmp_path):
    assert_one_line_error(_audit(sample_paths, tmp_path / "a", "--attacker", "tfidf", "--attacker", "tfidf"),
                          "names each attacker once")
    assert_one_line_error(run_cli_inprocess("stress", "topk", "--documents", sample_paths["documents"], "--registry",
                                            sample_paths["registry"], "--config", sample_paths["config"],
                                            "--attacker", "tfidf", "--attacker", "lexical_fusion"),
                          "this command runs one attacker")
    assert_one_line_error(run_cli_inprocess("redact", "--audit", panel[0], "--out", tmp_path / "r", "--held-out",
                                            "tfidf"),
                          "--held-out tfidf: expected an attacker the redaction search never consults, found a member "
                          "of the audit's panel (tfidf, lexical_fusion)")


def test_each_member_is_recorded_in_the_history_as_of_its_panel(sample_paths, tmp_path):
    from cpa_core.audit.panel import PanelResult
    from cpa_core.store.history import list_audits, load_audit, load_result

    history = tmp_path / "history.sqlite"
    out = tmp_path / "audit"
    done = ok(run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry",
                                sample_paths["registry"], "--config", sample_paths["config"], "--knowledge", "K1",
                                "--attacker", "tfidf", "--attacker", "lexical_fusion", "--out", out,
                                "--history", history))
    assert "recorded tfidf of the panel as audit 1" in done.stderr
    assert "recorded lexical_fusion of the panel as audit 2" in done.stderr
    listed = list_audits(history)
    assert listed["attacker"].tolist() == ["tfidf", "lexical_fusion"]
    panel_id = json.loads((out / "summary.json").read_text())["panel"]["config_id"]
    for audit_id, name in ((1, "tfidf"), (2, "lexical_fusion")):
        entry = load_audit(audit_id, history)
        assert entry.summary["panel"] == {"config_id": panel_id, "attackers": ["tfidf", "lexical_fusion"],
                                          "attacker": name, "peers": [other for other in ("tfidf", "lexical_fusion")
                                                                      if other != name]}
        assert entry.out_dir == str((out / "members" / name).resolve())
        assert load_result(audit_id, history).config.attacker.name == name
    reopened = PanelResult(tuple(load_result(audit_id, history) for audit_id in (1, 2)))
    assert [member.linkage_model.peers for member in reopened.members] == [("lexical_fusion",), ("tfidf",)]
