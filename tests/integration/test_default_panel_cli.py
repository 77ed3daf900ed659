"""``cpa audit`` with no attacker declared runs the default panel for the release's size (one ``cpa`` process on the
sample data), and how the command line chooses its attackers: the default panel by size (``default_panel``), and
whatever is declared (--attacker, ``[audit] attackers``, ``[audit] attacker``, --scores) over it; commands that run
one attacker keep TF-IDF. A declared panel: tests/integration/test_panel_cli.py."""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib

import packaged_model  # noqa: F401 (the Hugging Face libraries offline: nothing is downloaded)
import pandas as pd
import pytest
from cli_checks import OUTPUT_FILES, ok
from conftest import run_cli, run_cli_inprocess

from cpa_core.attack.model_store import packaged_model_zip
from cpa_core.audit.panel import default_panel
from cpa_core.audit.project import ProjectConfig, parse_config
from cpa_core.cli.main import _attackers, build_parser
from cpa_core.store.output_folder import complete_folder

FULL = ("tfidf", "lexical_fusion", "dense", "learned")
WITHOUT_DENSE = ("tfidf", "lexical_fusion", "learned")
LEXICAL = ("tfidf", "lexical_fusion")


@pytest.fixture(scope="module")
def default_audit(sample_paths, tmp_path_factory):
    """The sample data audited with nothing declared but the sample's configuration (which names no attacker): one
    process, given the time every ``cpa`` run of the tests is given."""
    declared = tomllib.loads(sample_paths["config"].read_text(encoding="utf-8"))["audit"]
    assert "attacker" not in declared and "attackers" not in declared
    out = tmp_path_factory.mktemp("default") / "audit"
    done = run_cli("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                   "--config", sample_paths["config"], "--out", out, "--no-history")
    return out, done


def _declared(*extra: str):
    """The parsed options of ``cpa audit`` with ``extra``."""
    return build_parser().parse_args(["audit", "--documents", "d.csv", "--registry", "r.csv", "--out", "o", *extra])


# ------------------------------------------------------------------------------------ the default panel, run

def test_nothing_declared_runs_the_default_panel_each_member_a_whole_audit(default_audit, sample_paths):
    out, done = default_audit
    ok(done)
    n_documents, n_profiles = (len(pd.read_csv(sample_paths[role], dtype=str)) for role in ("documents", "registry"))
    expected = list(default_panel(n_documents, n_profiles))
    assert expected == list(FULL if packaged_model_zip() is not None else WITHOUT_DENSE)

    contents = complete_folder(out, "audit", verify=["manifest.json", "summary.json"])
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["kind"] == "panel" and manifest["config_id"] == contents["config_id"]
    assert manifest["attackers"] == expected
    assert sorted(manifest["members"]) == sorted(expected)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["panel"]["attackers"] == expected and sorted(summary["members"]) == sorted(expected)
    assert [member["attacker"] for member in summary["verdict"]["members"]] == expected
    top = {name for name in contents["files"] if "/" not in name}
    assert {"summary.json", "worklist.csv", "worklist.json", "manifest.json"} <= top
    assert "documents.jsonl" not in top  # a panel's records are its members'
    for name in expected:
        member = out / "members" / name
        assert manifest["members"][name]["folder"] == f"members/{name}"
        for file in (*OUTPUT_FILES, "report.html"):
            assert f"members/{name}/{file}" in contents["files"] and (member / file).stat().st_size > 0, (name, file)
        member_manifest = json.loads((member / "manifest.json").read_text(encoding="utf-8"))
        assert member_manifest["attacker"]["attacker"] == name
        assert member_manifest["config_id"] == manifest["members"][name]["config_id"]
        assert json.loads((member / "summary.json").read_text(encoding="utf-8"))["attacker"] == name
    if os.name == "posix":  # the members' records hold document text: private, as a single audit's
        for path in (out, *out.rglob("*")):
            assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path


def test_one_progress_line_per_member(default_audit):
    _, done = default_audit
    ok(done)
    expected = json.loads((default_audit[0] / "manifest.json").read_text(encoding="utf-8"))["attackers"]
    said = [line for line in done.stderr_lines if re.match(r"cpa: attacker \d+ of \d+: ", line)]
    assert said == [f"cpa: attacker {i} of {len(expected)}: {name}" for i, name in enumerate(expected, 1)]
    assert f"flagged by at least one of {len(expected)} attackers" in done.stderr


# ------------------------------------------------------------------------------------ the default panel, by size

@pytest.mark.parametrize("n_documents, n_profiles", [(1, 1), (10_000, 10_000), (10_000, 1), (1, 10_000)])
def test_a_release_of_at_most_ten_thousand_documents_and_profiles_gets_the_full_panel(n_documents, n_profiles):
    assert default_panel(n_documents, n_profiles, dense_present=True) == FULL
    assert default_panel(n_documents, n_profiles, dense_present=False) == WITHOUT_DENSE


@pytest.mark.parametrize("n_documents, n_profiles", [(10_001, 10_000), (10_000, 10_001), (10_001, 10_001),
                                                     (10_001, 1), (1, 10_001), (1_000_000, 50)])
@pytest.mark.parametrize("dense_present", [True, False, None])
def test_a_larger_release_gets_the_lexical_panel(n_documents, n_profiles, dense_present):
    assert default_panel(n_documents, n_profiles, dense_present=dense_present) == LEXICAL


def test_dense_is_a_member_where_its_model_is_installed(monkeypatch, tmp_path):
    import cpa_core.attack.model_store as model_store

    assert default_panel(1_000, 400) == (FULL if packaged_model_zip() is not None else WITHOUT_DENSE)
    monkeypatch.setattr(model_store, "packaged_model_zip", lambda: None)
    assert default_panel(1_000, 400) == WITHOUT_DENSE
    monkeypatch.setattr(model_store, "packaged_model_zip", lambda: tmp_path / "model.zip")
    assert default_panel(1_000, 400) == FULL


# ------------------------------------------------------------------------------------ what the command line runs

SAMPLE_SIZE = (1_000, 400)
LARGE = (20_000, 400)


@pytest.mark.parametrize("release", [SAMPLE_SIZE, LARGE])
def test_nothing_declared_is_the_default_panel_for_the_release(release):
    assert _attackers(_declared(), ProjectConfig(), None, release) == list(default_panel(*release))
    assert _attackers(_declared(), parse_config("[audit]\nseed = 3\n"), None, release) == list(default_panel(*release))


@pytest.mark.parametrize("release", [SAMPLE_SIZE, LARGE, None])
def test_what_is_declared_wins_over_the_default(release):
    in_file = parse_config('[audit]\nattackers = ["learned", "tfidf"]\n')
    one_in_file = parse_config('[audit]\nattacker = "dense"\n')
    assert _attackers(_declared("--attacker", "lexical_fusion"), ProjectConfig(), None, release) == ["lexical_fusion"]
    assert _attackers(_declared("--attacker", "dense", "--attacker", "tfidf"), ProjectConfig(), None, release) == [
        "dense", "tfidf"]
    assert _attackers(_declared(), in_file, None, release) == ["learned", "tfidf"]
    assert _attackers(_declared(), one_in_file, None, release) == ["dense"]
    scores = object()  # a table of candidate scores (only whether one was given matters here)
    assert _attackers(_declared("--scores", "s.csv"), ProjectConfig(), scores, release) == ["imported"]
    # the command line over the file, the file's panel over its one attacker
    assert _attackers(_declared("--attacker", "tfidf"), in_file, None, release) == ["tfidf"]
    both = parse_config('[audit]\nattackers = ["lexical_fusion", "learned"]\nattacker = "dense"\n')
    assert _attackers(_declared(), both, None, release) == ["lexical_fusion", "learned"]


def test_a_command_that_runs_one_attacker_keeps_tfidf():
    assert _attackers(_declared(), ProjectConfig(), None) == ["tfidf"]
    assert _attackers(_declared(), parse_config("[audit]\nseed = 3\n"), None) == ["tfidf"]


def test_a_dry_run_with_nothing_declared_runs_tfidf_alone(sample_paths, tmp_path, monkeypatch):
    import importlib

    cli_main = importlib.import_module("cpa_core.cli.main")  # the module (the package exports its function main)
    counted = []

    def count(documents, registry, attacker, config):
        counted.append((attacker.name, config.attacker.name))
        return 0

    monkeypatch.setattr(cli_main, "estimate_llm_calls", count)
    done = ok(run_cli_inprocess("audit", "--documents", sample_paths["documents"], "--registry",
                                sample_paths["registry"], "--config", sample_paths["config"], "--dry-run",
                                "--out", tmp_path / "out"))
    assert counted == [("tfidf", "tfidf")]
    assert done.stdout == "0 LLM calls needed (answers already cached are not counted)\n"
    assert not (tmp_path / "out").exists()
