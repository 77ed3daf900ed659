"""The audit's folder: summary, records (written by one function), worklist and manifest."""

import json

import pytest
from tables import audited_groups

from cpa_core.conformal.calibration import confidence_label
from cpa_core.report.diagnostics import whole_pool
from cpa_core.report.metrics import summarize
from cpa_core.store.records import jsonl_lines, manifest, record_splits, records, write_audit


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    result = audited_groups()[0]
    out = tmp_path_factory.mktemp("audit")
    return result, write_audit(result, out), out


def test_the_folder_holds_every_file(written):
    _, paths, out = written
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["summary.json", "calibration.jsonl", "test.jsonl", "worklist.csv", "worklist.json", "manifest.json",
         "audit.toml"])
    assert set(paths) == {p.name for p in out.iterdir()}


def test_records_files_are_the_records_function(written):
    result, paths, _ = written
    for name in record_splits(result):
        assert paths[f"{name}.jsonl"].read_text(encoding="utf-8") == "".join(jsonl_lines(records(result, name)))
    test = [json.loads(line) for line in paths["test.jsonl"].read_text(encoding="utf-8").splitlines()]
    assert len(test) == len(result.test_split) and {r["split"] for r in test} == {"test"}
    cert = result.certificate(0.8)
    assert [r["sets"]["0.8"]["set_size"] for r in test] == cert.set_sizes.tolist()
    levels = result.config.confidences
    certs = {confidence_label(level): result.certificate(level) for level in levels}
    whole = {label: whole_pool(c) for label, c in certs.items()}
    for row, record in enumerate(test):  # each level's set: the first set_size members of the widest, written once
        pool = record["pool_size"]
        assert len(record["set"]) == max([c.set_sizes[row] for c in certs.values() if c.set_sizes[row] < pool] + [0])
        for label, c in certs.items():
            entry = record["sets"][label]
            if entry["set_size"] < pool:
                assert record["set"][:entry["set_size"]] == [str(m) for m in c.members(row)]
            else:  # the entire pool: not listed again
                assert len(c.members(row)) == pool
            assert entry["whole_pool"] == bool(whole[label][row])
            assert entry["covered"] == bool(c.covered[row]) and entry["leakage"] == float(c.leakage[row])


def test_summary_file_is_the_summary_object_and_its_verdict(written):
    from cpa_core.report.verdict import release_verdict
    result, paths, _ = written
    written_summary = json.loads(paths["summary.json"].read_text(encoding="utf-8"))
    verdict = written_summary.pop("verdict")
    assert written_summary == json.loads(json.dumps(summarize(result).to_dict()))
    assert verdict == json.loads(json.dumps(release_verdict(summarize(result), result.config.policy_confidence).to_dict()))
    assert verdict["confidence"] == float(result.config.policy_confidence)


def test_manifest_quotes_the_declared_configuration(written):
    result, paths, _ = written
    written_manifest = json.loads(paths["manifest.json"].read_text(encoding="utf-8"))
    fresh = manifest(result)
    for key in ("config_id", "config", "attacker", "split", "warnings", "seed"):
        assert written_manifest[key] == json.loads(json.dumps(fresh[key], default=str))
    assert written_manifest["attacker"] == {"attacker": "counting"}
    assert written_manifest["split"]["n_cal"] == 200 and written_manifest["split"]["n_test"] == 300


def test_a_release_audit_writes_one_record_per_document_and_says_how_it_was_certified(tmp_path):
    from dataclasses import replace

    import numpy as np
    from tables import documents_and_registry, probability_matrix, sample_truth, table_from_matrix

    from cpa_core.audit.pipeline import run_audit

    rng = np.random.default_rng(6)
    probabilities = probability_matrix(120, 20, rng)
    truth = [f"p{t}" for t in sample_truth(probabilities, rng)]
    truth[5] = None  # a document whose subject is unknown
    documents, registry = documents_and_registry(truth, m=20)
    config = replace(audited_groups()[0].config, protocol="release", n_cal=None, n_test=None, group_column=None)
    result = run_audit(documents, registry, None, config, table=table_from_matrix(probabilities))
    paths = write_audit(result, tmp_path)
    assert "documents.jsonl" in paths and "test.jsonl" not in paths
    lines = [json.loads(line) for line in paths["documents.jsonl"].read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 120 and {r["split"] for r in lines} == {"documents"}
    by_doc = {r["doc_id"]: r for r in lines}
    assert by_doc["d5"]["certified_by"] == ("all calibration documents (its subject unknown, or in the temperature's "
                                            "tuning fold)") and by_doc["d5"]["identity_id"] is None
    assert by_doc["d0"]["certified_by"] == "leave-one-out: the other calibration documents"
    assert json.loads(paths["manifest.json"].read_text(encoding="utf-8"))["protocol"] == "release"


def test_the_manifest_locates_each_input_file_from_any_directory(tmp_path, monkeypatch):
    from cpa_core.store.records import located_inputs

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "documents.csv").write_text("doc_id,text,identity_id\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    inputs = {"documents": {"file": "data/documents.csv", "sha256": "x"}, "registry": {"file": "registry.csv"},
              "strata": [{"label": "a"}], "scores": {"file": None}}
    located = located_inputs(inputs)
    assert located["documents"] == {"file": "data/documents.csv", "sha256": "x",
                                    "path": str((tmp_path / "data" / "documents.csv").resolve())}
    assert located["registry"] == {"file": "registry.csv"}  # an upload's name, not a file here: no path
    assert located["strata"] == inputs["strata"] and located["scores"] == {"file": None}
    assert "path" not in inputs["documents"]  # the result's own inputs are left as they are
    result = audited_groups()[0]
    assert manifest(result)["working_directory"] == str(tmp_path)


# --- an attacker panel's folder -------------------------------------------------------------------------------

def test_a_panel_s_folder_holds_its_report_at_the_top_and_its_redaction_in_its_summary(tmp_path):
    import stat

    from toy_panel import REDACTION, toy_panel

    from cpa_core.report.verdict import panel_verdict
    from cpa_core.store.output_folder import OUTPUT_NAMES
    from cpa_core.store.records import PANEL_FOLDER, REPORT_FILE, panel_summary, write_panel

    panel = toy_panel()
    out = tmp_path / "panel"
    out.mkdir(mode=0o700)
    summary = write_panel(panel, out, {}, redaction=REDACTION)
    top = sorted(p.name for p in out.iterdir())
    assert top == sorted(["summary.json", "worklist.csv", "worklist.json", "manifest.json", REPORT_FILE, PANEL_FOLDER])
    assert set(top) <= set(OUTPUT_NAMES["audit"])  # names the output folder machinery knows as an audit's
    assert stat.S_IMODE((out / PANEL_FOLDER).stat().st_mode) == 0o700  # its members' records hold document text
    assert stat.S_IMODE((out / REPORT_FILE).stat().st_mode) == 0o600
    assert json.loads((out / "summary.json").read_text()) == summary and summary["redaction"] == REDACTION
    report = (out / REPORT_FILE).read_text()
    verdict = panel_verdict(panel, panel.config.policy_confidence)
    assert "A redacted release" in report and verdict.title in report
    for name in panel.names:  # each member's own report, linked from the panel's
        assert (out / PANEL_FOLDER / name / REPORT_FILE).is_file()
        assert f"href='{PANEL_FOLDER}/{name}/{REPORT_FILE}'" in report
    members = {name: summary["members"][name] for name in panel.names}
    assert "redaction" not in panel_summary(panel, members)  # none given, none stored
    assert panel_summary(panel, members, redaction=REDACTION)["redaction"] == REDACTION
