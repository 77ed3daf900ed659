"""An attacker panel: the members' certificates of one release, and the worst over them, by hand."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from tables import LEVEL, documents_and_registry, probability_matrix, sample_truth, table_from_matrix, toy_attacker

from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.panel import PanelCertificate, PanelResult, peer_names
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.results import Certificate
from cpa_core.common.errors import ConfigError


def _certificate(sizes, linkage):
    n = len(sizes)
    return Certificate(Fraction(9, 10), np.zeros(n), np.asarray(sizes), np.ones(n, dtype=bool), split=None,
                       linkage=None if linkage is None else np.asarray(linkage, dtype=float))


def test_a_document_s_risk_is_the_worst_over_the_members_by_hand():
    policy = ReleasePolicy(flag_below=3, acceptable_linkage=0.25)
    panel = PanelCertificate(("a", "b"), (_certificate([5, 1, 4, 9], [0.1, 0.1, 0.3, 0.0]),
                                          _certificate([2, 6, 4, 8], [0.2, 0.05, 0.1, 0.1])))
    assert panel.set_sizes.tolist() == [2, 1, 4, 8]
    assert panel.smallest_by.tolist() == [1, 0, 0, 1]  # a tie (4, 4) names the first member
    assert panel.linkage.tolist() == [0.2, 0.1, 0.3, 0.1] and panel.linkage_by.tolist() == [1, 0, 0, 1]
    assert panel.member_flags(policy).tolist() == [[False, True], [True, False], [True, False], [False, False]]
    assert panel.flags(policy).tolist() == [True, True, True, False]
    assert PanelCertificate(("a",), (_certificate([1], None),)).linkage is None


def _member(name: str, probabilities, truth, seed: int = 0):
    documents, registry = documents_and_registry([f"p{t}" for t in truth], m=probabilities.shape[1])
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(name), confidences=(0.8, 0.9), flag_below=5)
    return run_audit(documents, registry, None, config, table=table_from_matrix(probabilities))


def test_a_panel_audits_one_release_under_one_configuration():
    rng = np.random.default_rng(1)
    probabilities = probability_matrix(120, 20, rng)
    truth = sample_truth(probabilities, rng)
    a, b = _member("a", probabilities, truth), _member("b", probability_matrix(120, 20, rng), truth)
    panel = PanelResult((a, b))
    assert panel.names == ("a", "b") and panel.member("b") is b
    assert panel.config_id != a.config.config_id and panel.config_id == PanelResult((a, b)).config_id
    assert panel.config_id == PanelResult((b, a)).config_id
    cert = panel.certificate(0.9)
    assert np.array_equal(cert.set_sizes, np.minimum(a.certificate(0.9).set_sizes, b.certificate(0.9).set_sizes))
    with pytest.raises(ConfigError, match="names each attacker once"):
        PanelResult((a, a))
    other = _member("c", probabilities[:60], truth[:60])
    with pytest.raises(ConfigError, match="audit different documents"):
        PanelResult((a, other))
    stricter = replace(b, config=replace(b.config, flag_below=7))
    with pytest.raises(ConfigError, match="differ in more than their attacker"):
        PanelResult((a, stricter))


def test_a_member_s_peers_are_the_other_cheap_members_but_the_held_out_one():
    declared = [("tfidf", False), ("dense", True), ("learned", False), ("bm25", False)]
    assert peer_names(declared) == {"tfidf": ["learned", "bm25"], "dense": ["tfidf", "learned", "bm25"],
                                    "learned": ["tfidf", "bm25"], "bm25": ["tfidf", "learned"]}
    assert peer_names(declared, held_out="bm25") == {"tfidf": ["learned"], "dense": ["tfidf", "learned"],
                                                     "learned": ["tfidf"], "bm25": ["tfidf", "learned"]}
    assert peer_names([("dense", True), ("profile_llm", True)]) == {"dense": [], "profile_llm": []}


def test_a_panel_attaches_the_peers_its_record_names_that_it_has():
    rng = np.random.default_rng(3)
    probabilities = probability_matrix(120, 20, rng)
    truth = sample_truth(probabilities, rng)
    a, b, c = (_member(name, probability_matrix(120, 20, rng), truth).with_inputs(panel={"peers": peers})
               for name, peers in (("a", ["b", "c"]), ("b", ["a"]), ("c", [])))
    panel = PanelResult((a, b, c))
    assert [[peer.config.attacker.name for peer in member.peers] for member in panel.members] == [["b", "c"], ["a"], []]
    assert panel.members[2] is c  # nothing to attach: the member as it was
    again = PanelResult(panel.members)
    assert all(x is y for x, y in zip(again.members, panel.members))  # attached once
    part = PanelResult((a, c))  # a panel without b: a reads c alone
    assert [peer.config.attacker.name for peer in part.members[0].peers] == ["c"]
    assert a.with_peers(()).peers == ()
    other = _member("d", probabilities[:60], truth[:60])
    with pytest.raises(ConfigError, match="audits other documents"):
        a.with_peers((other,))
