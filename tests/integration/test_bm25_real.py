"""The BM25 attacker on a real release (the Blog Authorship slice from ``../shared/datasets``: 1,000 authors, each
profile ten of their posts, the release one to three other posts of each): a working attacker, its first guess
right for far more posts than chance (1 in 1,000) and within reach of the TF-IDF attacker's, the ``auto`` temperature
chosen inside the grid's range; and ``cpa audit --attacker bm25`` on the sample data, in its own process."""

from __future__ import annotations

import json

import pytest
from cli_checks import OUTPUT_FILES, ok
from conftest import run_cli
from real_releases import BLOG, PROFILE, blog_release

from cpa_core.attack.attackers.bm25 import Bm25Attacker
from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.temperature import TEMPERATURE_GRID
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.report.metrics import summarize

CONFIDENCE = 0.9


@pytest.fixture(scope="module")
def release():
    built = blog_release()
    if built is None:
        pytest.skip(f"the Blog Authorship slice is not available: ../shared/datasets not found (looked in {BLOG})")
    return built


def audit(release, attacker):
    documents, registry = release
    config = AuditConfig(knowledge=PROFILE, attacker=AttackerConfig.of(attacker), confidences=(CONFIDENCE,))
    return run_audit(documents, registry, attacker, config)


def test_the_bm25_attacker_links_blog_posts_to_their_authors(release):
    chance = 1 / len(release[1])
    bm25_result = audit(release, Bm25Attacker())
    bm25, tfidf = (summarize(result).level(CONFIDENCE) for result in (bm25_result, audit(release, TfidfAttacker())))
    assert bm25.n_test == tfidf.n_test > 1800
    assert bm25.first_guess_rate > 100 * chance  # 35.2 % on this slice (TF-IDF 39.9 %)
    assert bm25.first_guess_rate > 0.75 * tfidf.first_guess_rate
    assert bm25.mean_set_size < 0.6 * len(release[1])  # the certificate is informative
    assert TEMPERATURE_GRID[0] <= bm25_result.inputs["learned"]["temperature"] <= TEMPERATURE_GRID[-1]


def test_cpa_audit_with_the_bm25_attacker_on_the_sample_data(sample_paths, tmp_path):
    out = tmp_path / "audit"
    done = ok(run_cli("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                      "--config", sample_paths["config"], "--knowledge", "K3", "--attacker", "bm25",
                      "--temperature", "0.5", "--out", out, "--no-history"))
    assert all((out / name).is_file() for name in OUTPUT_FILES)
    assert "first guess is the right person" in done.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["attacker"]["attacker"] == "bm25" and manifest["attacker"]["temperature"] == 0.5
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["attacker"] == "bm25" and summary["confidence"]["0.9"]["n_test"] == 1000
