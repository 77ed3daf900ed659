"""A real-data slice end to end: TextWash person descriptions (study 1).

Documents are the anonymised (Textwash) descriptions; the identity is ``category:target`` (30
people). The registry holds one profile per identity, built from the ORIGINAL texts of three other
descriptions of that person, never used as documents. ``cpa audit`` must run on it and give
sane conformal output.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import run_cli
from real_releases import TEXTWASH, textwash_files

PROFILE_DOCS, AUDIT_DOCS = 3, 10  # per identity: 30 x 10 = 300 documents


@pytest.fixture(scope="module")
def textwash_slice(tmp_path_factory):
    if not (TEXTWASH / "anon").is_dir() or not (TEXTWASH / "orig").is_dir():
        pytest.skip(f"TextWash data not available: ../shared/datasets not found (looked in {TEXTWASH})")
    files = textwash_files()
    if len(files) < 30 or min(len(v) for v in files.values()) < PROFILE_DOCS + AUDIT_DOCS:
        pytest.skip(f"TextWash study 1 in {TEXTWASH} is incomplete")
    base = tmp_path_factory.mktemp("textwash")
    documents, registry, profile_files = [], [], set()
    for identity, items in files.items():
        profile_part, audit_part = items[:PROFILE_DOCS], items[PROFILE_DOCS:PROFILE_DOCS + AUDIT_DOCS]
        profile = " ".join((TEXTWASH / "orig" / name).read_text(encoding="utf-8").strip() for _, name in profile_part)
        registry.append({"identity_id": identity, "category": identity.split(":")[0], "profile": profile})
        profile_files.update(name for _, name in profile_part)
        for _, name in audit_part:
            documents.append({"doc_id": name[:-4], "text": (TEXTWASH / "anon" / name).read_text(encoding="utf-8"),
                              "identity_id": identity})
    assert not profile_files & {d["doc_id"] + ".txt" for d in documents}  # disjoint
    paths = {"documents": base / "documents.csv", "registry": base / "registry.csv", "out": base / "out"}
    pd.DataFrame(documents).to_csv(paths["documents"], index=False)
    pd.DataFrame(registry).to_csv(paths["registry"], index=False)
    result = run_cli("audit", "--documents", paths["documents"], "--registry", paths["registry"], "--attacker", "tfidf",
                     "--fields", "profile", "--protocol", "split", "--n-cal", "150", "--n-test", "150", "--confidence", "0.9",
                     "--confidence", "0.95", "--seed", "1", "--out", paths["out"])
    return paths, result, pd.DataFrame(documents)


def test_textwash_audit_runs(textwash_slice):
    paths, result, _ = textwash_slice
    assert result.returncode == 0, result.describe()
    assert "Traceback" not in result.output
    for name in ("summary.json", "calibration.jsonl", "test.jsonl", "worklist.csv", "worklist.json",
                 "manifest.json"):
        assert (paths["out"] / name).is_file(), name


def test_textwash_conformal_sanity(textwash_slice):
    paths, result, _ = textwash_slice
    assert result.returncode == 0, result.describe()
    summary = json.loads((paths["out"] / "summary.json").read_text(encoding="utf-8"))
    assert summary["knowledge"] == "custom"
    levels = summary["confidence"]
    assert set(levels) == {"0.9", "0.95"}
    for label, entry in levels.items():
        assert entry["n_cal"] == 120 and entry["n_test"] == 150  # a fifth of the 150 tunes the temperature
        assert entry["candidate_miss_rate"] == 0.0  # closed world: every identity has a profile
        assert entry["coverage"] is not None and entry["coverage"] == entry["coverage_conditional"]
        assert 0 <= entry["min_set_size"] <= entry["median_set_size"] <= entry["max_set_size"] <= 30
        # 120 calibration documents suffice for both levels, in every certainty stratum
        thresholds = [entry["q_hat"]] if entry["q_hat"] is not None else list(entry["strata_thresholds"].values())
        assert thresholds and None not in thresholds
    assert levels["0.9"]["coverage"] >= 0.75  # target 0.90, slack for Monte Carlo error
    assert levels["0.95"]["coverage"] >= levels["0.9"]["coverage"]
    assert levels["0.95"]["median_set_size"] >= levels["0.9"]["median_set_size"]
    assert levels["0.9"]["top1"] > 1 / 30  # the attacker beats chance on the original-text profiles


def test_textwash_records_and_privacy(textwash_slice):
    paths, result, documents = textwash_slice
    assert result.returncode == 0, result.describe()
    records = [json.loads(line) for line in (paths["out"] / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 150
    for record in records:
        size = record["sets"]["0.9"]["set_size"]
        assert 0 <= size <= len(record["set"]) <= 30
        assert record["pool_size"] == 30
    printed = result.output
    assert not any(text.strip() in printed for text in documents["text"])
