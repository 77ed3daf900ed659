"""The audit's folder: summary, records (written by one function), worklist and manifest."""

import json

import pytest

from cpa_core.records import SPLIT_NAMES, jsonl_lines, manifest, records
from tables import audited_groups


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    result = audited_groups()[0]
    out = tmp_path_factory.mktemp("audit")
    return result, result.write(out), out


def test_the_folder_holds_every_file(written):
    _, paths, out = written
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["summary.json", "calibration.jsonl", "test.jsonl", "worklist.csv", "worklist.json", "manifest.json"])
    assert set(paths) == {p.name for p in out.iterdir()}


def test_records_files_are_the_records_function(written):
    result, paths, _ = written
    for name in SPLIT_NAMES:
        assert paths[f"{name}.jsonl"].read_text(encoding="utf-8") == "".join(jsonl_lines(records(result, name)))
    test = [json.loads(line) for line in paths["test.jsonl"].read_text(encoding="utf-8").splitlines()]
    assert len(test) == len(result.test_split) and {r["split"] for r in test} == {"test"}
    cert = result.certificate(0.8)
    assert [r["sets"]["0.8"]["set_size"] for r in test] == cert.set_sizes.tolist()
    assert test[0]["sets"]["0.8"]["set"] == [str(c) for c in cert.members(0)]


def test_summary_file_is_the_summary_object(written):
    result, paths, _ = written
    assert json.loads(paths["summary.json"].read_text(encoding="utf-8")) == json.loads(
        json.dumps(result.summary().to_dict()))


def test_manifest_quotes_the_declared_configuration(written):
    result, paths, _ = written
    written_manifest = json.loads(paths["manifest.json"].read_text(encoding="utf-8"))
    fresh = manifest(result)
    for key in ("config_id", "config", "attacker", "split", "warnings", "seed"):
        assert written_manifest[key] == json.loads(json.dumps(fresh[key], default=str))
    assert written_manifest["attacker"] == {"attacker": "counting"}
    assert written_manifest["split"]["n_cal"] == 200 and written_manifest["split"]["n_test"] == 300
