"""Redaction on a real release where the attacker links a lot (the Blog Authorship slice from ``../shared/datasets``,
the posts of half of its authors against every author's profile):
every suggested step lowers its document's risk, and the release the proposed decisions make (accepted edits,
documents to withhold left out), audited again under the same declared threat model and policy, flags fewer than half
as many documents at every level, fewer by linkage, and the attacker names far fewer authors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from real_releases import BLOG, PROFILE, blog_release

from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.redaction.decisions import accepted, proposed_decisions
from cpa_core.redaction.suggestions import decided_frame


def audit(documents, registry):
    attacker = TfidfAttacker()  # the defaults a newcomer gets
    config = AuditConfig(knowledge=PROFILE, attacker=AttackerConfig.of(attacker), confidences=(0.9, 0.95, 0.99))
    return run_audit(documents, registry, attacker, config), attacker


def test_the_decided_blog_release_flags_fewer_documents_at_every_level_and_no_set_shrinks():
    release = blog_release(authors_share=1 / 2)
    if release is None:
        pytest.skip(f"the Blog Authorship slice is not available (looked in {BLOG})")
    documents, registry = release
    result, attacker = audit(documents, registry)
    config = result.config
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    table, suggestions = proposed_decisions(result, attacker, registry, texts, deny=["urlLink"])
    cert = result.certificate(config.policy_confidence)
    assert len(suggestions) == int(cert.flags(config.policy).sum()) > 500
    for s in suggestions:  # no suggestion lowers |C|, and no step raises the risk
        risks = [s.before] + [step.risk for step in s.steps]
        assert all(b.no_higher_than(a) for a, b in zip(risks, risks[1:]))
        assert s.set_size_after >= s.set_size_before
        assert all(e.term.casefold() != "urllink" for e in s.edits)
    edits, withheld = accepted(table)
    after, _ = audit(replace(documents, frame=decided_frame(documents.frame, edits, withheld), sha256="1" * 64),
                     registry)
    for level in config.confidences:
        before_cert, after_cert = result.certificate(level), after.certificate(level)
        # flags after: the search stops where the stored calibration accepts a document, and no longer where the
        # attacker's first guess moves; the new calibration flags what it finds (the verdict decides), and may flag by
        # its set a document it did not touch (its threshold is the decided release's, not the original's)
        flagged_before, flagged_after = before_cert.flags(config.policy), after_cert.flags(config.policy)
        assert flagged_after.sum() < flagged_before.sum() / 2, level
        by_linkage = [int(config.policy.flags_by_linkage(cert.linkage, len(cert.set_sizes)).sum())
                      for cert in (before_cert, after_cert)]
        assert by_linkage[1] < by_linkage[0], level
    assert after.first_guess_right.mean() < result.first_guess_right.mean() / 1.5
    characters = [sum(e.length for e in document) for document in edits.values()]
    assert np.median(characters) < 200  # a few words per document, not the whole post
