"""What an audit computed: certificates at any level without a new attack (a toy audit by hand, and each level alone
against many at once), the certificates kept, the calibration documents' own sets, and the result declared under
a curator's policy."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from tables import (
    LEVEL,
    audited_groups,
    documents_and_registry,
    probability_matrix,
    sample_truth,
    table_from_matrix,
    toy_attacker,
    toy_audit,
)

from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.results import AuditResult, certify
from cpa_core.conformal.scores import get_score

APS = get_score("aps")


@pytest.fixture(scope="module")
def toy():
    """The toy audit of tables.toy_audit: d0 and d2 calibrate (scores 0.9 and 0.7), d1 and d3 are certified."""
    result = toy_audit()
    assert result.calibration_split.table.doc_ids.tolist() == ["d0", "d2"]
    return result


def by_doc(result: AuditResult, values) -> dict:
    return dict(zip(result.test_split.table.doc_ids.tolist(), np.asarray(values).tolist()))


@pytest.mark.parametrize("level, q_hat, sizes, covered", [
    # n = 2 calibration scores {0.7, 0.9}: the ceil(3 x level)-th smallest
    (0.3, 0.7, {"d1": 1, "d3": 0}, {"d1": False, "d3": False}),   # ceil(0.9) = 1st: 0.7
    (0.5, 0.9, {"d1": 2, "d3": 2}, {"d1": True, "d3": False}),    # ceil(1.5) = 2nd: 0.9
    (0.6, 0.9, {"d1": 2, "d3": 2}, {"d1": True, "d3": False}),    # ceil(1.8) = 2nd
    (0.9, np.inf, {"d1": 3, "d3": 3}, {"d1": True, "d3": True}),  # ceil(2.7) = 3rd of 2: infinite, the whole pool
])
def test_certificates_of_the_toy_audit_by_hand(toy, level, q_hat, sizes, covered):
    cert = toy.certificate(level)
    assert cert.confidence == Fraction(str(level))
    assert APS.to_method(cert.q_hat).tolist() == pytest.approx([q_hat, q_hat])
    assert by_doc(toy, cert.set_sizes) == sizes and by_doc(toy, cert.covered) == covered
    assert by_doc(toy, cert.leakage) == pytest.approx({d: 1 / max(1, s) for d, s in sizes.items()})


def test_a_certificate_at_a_new_level_is_certify_with_a_calibration_at_that_level(toy):
    assert "0.3" not in toy.calibration.q_hat_  # audited at 0.5 only
    new = toy.certificate(0.3)
    fresh = certify(toy.test_split, toy.calibrate_at([0.3]), 0.3)
    for name in ("q_hat", "set_sizes", "covered"):
        assert np.array_equal(getattr(new, name), getattr(fresh, name)), name
    assert toy.certificate(0.3) is new  # kept
    many = toy.certificates([0.3, 0.5, 0.9])
    for cert in many:
        alone = toy.certificate(cert.confidence)
        assert np.array_equal(cert.set_sizes, alone.set_sizes) and np.array_equal(cert.q_hat, alone.q_hat)
    assert toy.certificates([]) == []


def test_members_are_the_ranked_candidates_of_the_set(toy):
    cert = toy.certificate(0.5)
    rows = {doc: row for row, doc in enumerate(toy.test_split.table.doc_ids.tolist())}
    assert cert.members(rows["d1"]).tolist() == ["p1", "p0"]
    assert cert.members(rows["d3"]).tolist() == ["p0", "p2"]
    assert toy.certificate(0.3).members(rows["d3"]).tolist() == []  # the empty set


def test_the_calibration_documents_own_sets(toy):
    cert = toy.calibration_certificate(0.5)  # q = 0.9: d0 0.6, 0.9, 1.0 and d2 0.7, 0.9, 1.0
    assert cert.set_sizes.tolist() == [2, 2] and cert.covered.tolist() == [True, True]


def test_with_policy_declares_the_curators_choice_and_keeps_every_set(toy):
    chosen = toy.with_policy(0.3, ReleasePolicy(2, 0.6))
    assert chosen.config.confidences == (0.3, 0.5) and chosen.config.flag_confidence == 0.3
    assert chosen.config.policy == ReleasePolicy(2, 0.6) and chosen.config.config_id != toy.config.config_id
    assert toy.config.confidences == (0.5,) and toy.config.flag_confidence is None  # the audit itself is unchanged
    assert chosen.test_split is toy.test_split and chosen.calibration_split is toy.calibration_split
    for level in (0.3, 0.5, 0.9):
        assert np.array_equal(chosen.certificate(level).set_sizes, toy.certificate(level).set_sizes)
    flags = chosen.config.policy.flags(chosen.certificate(0.3).set_sizes)
    assert by_doc(toy, flags) == {"d1": True, "d3": True}  # sizes 1 and 0, both below 2


def test_with_inputs_adds_facts_for_the_manifest(toy):
    more = toy.with_inputs(llm_counters={"attacker": {"calls": 3}})
    assert more.inputs == {**toy.inputs, "llm_counters": {"attacker": {"calls": 3}}}
    assert "llm_counters" not in toy.inputs and more.test_split is toy.test_split


@pytest.fixture(scope="module")
def audited():
    return audited_groups()


def test_rethresholding_never_reattacks_and_matches_a_fresh_audit(audited):
    result, attacker, documents, registry = audited
    assert attacker.calls == 1
    new = result.certificate(0.93)
    assert attacker.calls == 1
    fresh = run_audit(documents, registry, attacker, AuditConfig(**{**result.config.__dict__, "confidences": (0.93,)}))
    assert (fresh.certificate(0.93).set_sizes == new.set_sizes).all()
    assert (fresh.certificate(0.93).q_hat == new.q_hat).all()


def test_sets_are_prefixes_and_grow_with_confidence(audited):
    result = audited[0]
    previous = None
    for level in (0.5, 0.8, 0.9, 0.95):
        cert = result.certificate(level)
        if previous is not None:
            assert (cert.set_sizes >= previous).all()
        previous = cert.set_sizes
        row = int(np.argmax(cert.set_sizes))
        members = cert.members(row)
        assert len(members) == cert.set_sizes[row]
        assert members.tolist() == result.test_split.table.candidate_ids[
            result.test_split.table.candidates[row, : len(members)]].tolist()


LEVELS = (0.5, 0.8, 0.85, 0.9, 0.93, 0.95, 0.99, 0.995, 0.999)


@pytest.mark.parametrize("protocol, group_column, miss_policy, top_k, n", [
    ("split", "group", "infinite", None, 600), ("split", None, "exclude", 5, 600),
    ("release", "group", "infinite", 8, 600), ("release", None, "exclude", None, 600),
    ("release", "group", "infinite", None, 30),  # too few documents for the high levels: infinite thresholds
])
def test_certificates_at_many_levels_equal_each_level_alone(protocol, group_column, miss_policy, top_k, n):
    """The confidence curve's one pass (thresholds from one sort, sizes from one bucketing of the scores) against
    each level certified on its own, with strata, shortlists (padding), misses and infinite thresholds."""
    rng = np.random.default_rng(11)
    probabilities = probability_matrix(n, 30, rng)
    truth = sample_truth(probabilities, rng)
    truth[::7] = 29  # an identity the shortlists often cut: misses
    groups = np.where(np.arange(n) % 3 == 0, "a", "b")
    documents, registry = documents_and_registry([f"p{t}" for t in truth], groups=groups, m=30)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), protocol=protocol, group_column=group_column,
                         miss_policy=miss_policy, top_k=top_k, confidences=(0.9,), seed=2,
                         **({"n_cal": n // 3, "n_test": n // 2} if protocol == "split" else {}))
    result = run_audit(documents, registry, None, config, table=table_from_matrix(probabilities))
    together = result.certificates(LEVELS)
    for level, cert in zip(LEVELS, together):
        alone = replace(result, _extra_levels={}).certificate(level)
        assert cert.confidence == alone.confidence
        assert np.array_equal(cert.q_hat, alone.q_hat)
        assert np.array_equal(cert.set_sizes, alone.set_sizes), level
        assert np.array_equal(cert.covered, alone.covered)
    assert np.isinf(together[-1].q_hat).any()  # 0.999 needs more calibration documents than any case has


def test_an_audit_keeps_its_latest_certificates_and_they_are_those_computed_afresh(audited):
    from cpa_core.audit import results as audit_module

    result = replace(audited[0], _extra_levels={})
    levels = [round(0.5 + 0.02 * i, 2) for i in range(audit_module.KEPT_CERTIFICATES + 4)]
    first = [result.certificate(level) for level in levels]
    assert len(result._certificates) == audit_module.KEPT_CERTIFICATES
    assert result.certificate(levels[-1]) is first[-1]  # kept: the same object
    again = result.certificate(levels[0])  # dropped long ago: computed again, the same sets
    assert again is not first[0] and np.array_equal(again.set_sizes, first[0].set_sizes)
    fresh = replace(audited[0], _extra_levels={}).certificate(levels[3])
    assert np.array_equal(result.certificate(levels[3]).q_hat, fresh.q_hat)
