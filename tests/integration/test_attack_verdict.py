"""Real releases where the attacker links a lot (Blog Authorship, TextWash from ``../shared/datasets``): the verdict
states the attack's success with its interval, is never "release" (nor "redact one document"), and the flags catch
most of the documents the attacker names at first guess."""

from __future__ import annotations

import pytest
from real_releases import BLOG, PROFILE, TEXTWASH, blog_release, textwash_release

from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.report.metrics import summarize
from cpa_core.report.verdict import release_verdict


def audited(release, **declared):
    attacker = TfidfAttacker()  # the defaults a newcomer gets: TF-IDF, temperature auto, certainty strata
    documents, registry = release
    config = AuditConfig(knowledge=PROFILE, attacker=AttackerConfig.of(attacker), **declared)
    result = run_audit(documents, registry, attacker, config)
    summary = summarize(result)
    confidence = config.policy_confidence
    return result, summary.level(confidence), release_verdict(summary, confidence)


def test_a_blog_release_whose_authors_the_attacker_names_is_not_releasable_as_it_is():
    """The linkage probability tells the posts the attacker can place from the rest: the flags catch nearly every post
    it names at first guess, and what they leave is linked within the acceptable rate (upper bound), so the release
    goes out only once the flagged posts are redacted or withheld."""
    release = blog_release()
    if release is None:
        pytest.skip(f"the Blog Authorship slice is not available (looked in {BLOG})")
    result, level, verdict = audited(release)
    assert level.n_test > 1500 and level.first_guess_rate > 0.3
    assert f"first guess is the right person for {100 * level.first_guess_rate:.1f} %" in verdict.headline
    assert f"(95 % CI {100 * level.first_guess_low:.1f}–{100 * level.first_guess_high:.1f} %)" in verdict.headline
    cert = result.certificate(result.config.policy_confidence)
    flagged = cert.flags(result.config.policy)
    named = result.first_guess_right
    assert flagged[named].mean() > 0.95  # nearly every post it links at first guess
    assert level.n_flagged > 10 * level.n_flagged_by_set  # the linkage rule, not the set sizes, catches them
    rate = result.config.policy.linkage_rate
    assert verdict.status not in ("release", "inconclusive")
    if verdict.status == "redact":  # what the flags leave: hundreds of posts, linked within the acceptable rate
        assert (~flagged).sum() > 300 and named[~flagged].mean() <= level.remainder_bound <= rate
    else:
        assert verdict.status == "unsafe" and level.remainder_bound > rate


def test_a_textwash_release_is_not_released():
    release = textwash_release("semifamous")
    if release is None:
        pytest.skip(f"TextWash study 1 is not available (looked in {TEXTWASH})")
    result, level, verdict = audited(release, protocol="split", n_cal=100, n_test=100, seed=0)
    assert level.first_guess_rate > 0.5
    assert verdict.status != "release" and verdict.n_flagged > 50
    named = result.first_guess_right
    assert result.certificate(0.9).flags(result.config.policy)[named].all()
