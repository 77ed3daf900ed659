"""The learned re-identifier on a real release (the Blog Authorship slice from ``../shared/datasets``: 1,000 authors,
each profile ten of their posts, the release one to three other posts of each): it names more authors at first guess
than the TF-IDF attacker on the same release, with a smaller mean certified set; and ``cpa audit --attacker learned``
on the sample data, in its own process."""

from __future__ import annotations

import json

import pytest
from cli_checks import OUTPUT_FILES, ok
from conftest import run_cli
from real_releases import BLOG, PROFILE, blog_release

from cpa_core.attack.attackers.learned import FALLBACK_RIDGE, LearnedAttacker
from cpa_core.attack.attackers.tfidf import TfidfAttacker
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


def test_the_learned_attacker_names_more_authors_than_tfidf_on_the_blog_release(release):
    attacker = LearnedAttacker()
    tfidf, learned = (summarize(audit(release, a)).level(CONFIDENCE) for a in (TfidfAttacker(), attacker))
    assert tfidf.n_test == learned.n_test > 1800
    assert learned.first_guess_rate > tfidf.first_guess_rate
    assert learned.mean_set_size < tfidf.mean_set_size
    model = attacker.model_  # trained on the registry alone: chunks of the profiles, the penalty from held-out chunks
    assert model.owners_.size > len(release[1]) and model.ridge_ in model.loo_
    trained = attacker.trained()  # what the manifest records of it
    assert trained["ridge_chosen"] == "leave-one-out over the registry's chunks"
    assert trained["ridge_leave_one_out_first_guess"][f"{model.ridge_:g}"] == model.loo_[model.ridge_]


def test_cpa_audit_with_the_learned_attacker_on_the_sample_data(sample_paths, tmp_path):
    out = tmp_path / "audit"
    done = ok(run_cli("audit", "--documents", sample_paths["documents"], "--registry", sample_paths["registry"],
                      "--config", sample_paths["config"], "--attacker", "learned", "--param", "ridge=\"auto\"",
                      "--out", out, "--no-history"))
    assert all((out / name).is_file() for name in OUTPUT_FILES)
    assert "training the learned attacker" in done.stderr and "first guess is the right person" in done.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["attacker"]["attacker"] == "learned" and manifest["attacker"]["ridge"] == "auto"
    assert manifest["inputs"]["learned"]["temperature"] > 0
    # what it trained on: the sample's short profiles are one chunk each, so auto has nothing to hold out
    assert manifest["inputs"]["trained"] == {"chunks": 400, "chunk_words": 300, "ridge": FALLBACK_RIDGE,
                                             "ridge_chosen": "fallback"}
    assert "trained on the registry: ridge" in (out / "report.html").read_text(encoding="utf-8")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["attacker"] == "learned" and summary["confidence"]["0.9"]["n_test"] == 1000
