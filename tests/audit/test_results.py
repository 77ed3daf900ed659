"""What an audit computed: certificates at any level without a new attack (a toy audit by hand, and each level alone
against many at once), the certificates kept, the calibration documents' own sets, and the result declared under
a curator's policy."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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
from cpa_core.audit.results import AuditResult, ScoredSplit, certify
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
    ("split", "group", "infinite", None, 400), ("split", None, "exclude", 5, 400),
    ("release", "group", "infinite", 8, 400), ("release", None, "exclude", None, 400),
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


# --- a shortlist that cuts only candidates of weight 0 ------------------------------------------------------------

def _ranked(similarities: np.ndarray, top_k, temperature: float = 1.0):
    from cpa_core.attack.candidates import CandidateTable, rank_by_similarity

    n, m = similarities.shape
    ranking = rank_by_similarity(lambda a, b: similarities[a:b], n, m, top_k, temperature, chunk_size=4)
    cut = top_k is not None and top_k < m
    return CandidateTable(np.array([f"d{i}" for i in range(n)], dtype=object), ranking.candidates, ranking.weights,
                          np.full(n, ranking.candidates.shape[1]), np.array([f"p{j}" for j in range(m)], dtype=object),
                          tail_mass=ranking.tail_mass, cut_ties=ranking.cut_ties if cut else None,
                          cut_below=ranking.cut_below if cut else None)


def test_a_tie_kept_by_a_shortlist_that_cuts_only_weight_zero_is_not_a_wholly_tied_pool():
    """Hand-worked. Registry p0..p3; document d0 ties p0 and p1 at the top and its other two similarities are so low
    that their weights underflow: exactly (1/2, 1/2, 0, 0) (T = 1, similarities 0, 0, -10^4, -10^4). Without a shortlist
    the APS score of p0 and p1 is 1/2 + 1/2 = 1 (p2, p3 add nothing); a top-2 shortlist cuts only p2 and p3 and must not
    make it a pool whose candidates all tie (scores -inf, the whole shortlist at any threshold). Calibration: eight
    documents whose subject is the top of (7/8, 1/8, 0, 0), APS 7/8, and one whose subject is the second, APS 1. At 80 %
    (n = 9) q_hat is the ceil(10 * 4/5) = 8th smallest, 7/8: d0's set holds p0 and p1 only if 1 <= 7/8, false: it is
    empty (the attacker is sure it is one of two people, more certain than the threshold needs). At 90 % q_hat is the
    9th, 1: 1 <= 1, its set is p0 and p1 (without the shortlist p2 and p3 too: the shortlist lists two)."""
    from fractions import Fraction as F

    from cpa_core.conformal.calibration import conformal_threshold, set_sizes

    sure = [0.0, -np.log(7.0), -1e4, -1e4]  # weights 7/8, 1/8, 0, 0
    similarities = np.array([[0.0, 0.0, -1e4, -1e4]] + [sure] * 9)
    truths = ["p0"] + ["p0"] * 8 + ["p1"]
    exact = {"d0": [F(1, 2), F(1, 2), F(0), F(0)], "sure": [F(7, 8), F(1, 8), F(0), F(0)]}

    def aps(weights, y):  # the METHOD's score in exact arithmetic
        return sum(w for w in weights if w >= weights[y])

    calibration = sorted([aps(exact["sure"], 0)] * 8 + [aps(exact["sure"], 1)])
    assert aps(exact["d0"], 0) == aps(exact["d0"], 1) == 1 and calibration[7] == F(7, 8) and calibration[8] == 1
    full = _ranked(similarities, None)
    assert full.weights[0].tolist() == [0.5, 0.5, 0.0, 0.0] and full.weights[1, 0] == pytest.approx(7 / 8)
    for name, table in [("attacked with top-2", _ranked(similarities, 2)), ("cut to top-2", full.truncate(2))]:
        assert table.cut_below[0] == 2 and table.cut_ties[0] == 0 and table.tail_mass[0] == 0.0, name
        split = ScoredSplit.build(table, truths, None, "aps")
        assert not split.uninformative[0] and APS.to_method(split.sorted_scores[0]).tolist() == [1.0, 1.0], name
        for level, k in [(Fraction(4, 5), 8), (Fraction(9, 10), 9)]:
            q_hat = conformal_threshold(split.truth_scores[1:], 1 - level)
            assert APS.to_method(q_hat) == pytest.approx(float(calibration[k - 1]), abs=1e-15)
            members = sum(1 for y in (0, 1) if aps(exact["d0"], y) <= calibration[k - 1])  # exact membership
            assert set_sizes(split.sorted_scores[:1], split.table.pool_sizes[:1], q_hat).tolist() == [members], name
        whole = ScoredSplit.build(full, truths, None, "aps")
        np.testing.assert_array_equal(split.sorted_scores, whole.sorted_scores[:, :2])
        np.testing.assert_array_equal(split.truth_scores, whole.truth_scores)


@settings(max_examples=120, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_cutting_only_weight_zero_changes_no_score_no_set_and_no_certainty(n, nonzero_most, zeros, seed):
    """Random documents: a few candidates of small integer similarity (ties likely, a whole top tied often), the rest
    so far below that their weights underflow to 0 (at distinct similarities). A shortlist K that keeps every nonzero
    candidate (and perhaps some of weight 0) gives, with the attacker's own top-K or a cut of the full ranking, the
    scores of the kept candidates, the truths' scores and ranks, the uninformative status and the certainty of the
    uncut pool, and at any threshold the uncut set cut to its first K candidates."""
    from cpa_core.audit.stratification import certainty
    from cpa_core.conformal.calibration import set_sizes

    rng = np.random.default_rng(seed)
    m = nonzero_most + zeros
    similarities = np.full((n, m), -1e4) - rng.permutation(m)[None, :]  # weight 0, distinct similarities
    counts = rng.integers(1, nonzero_most + 1, n)
    for row, count in enumerate(counts):
        similarities[row, rng.choice(m, count, replace=False)] = rng.integers(0, 3, count)
    k = int(rng.integers(counts.max(), m))  # covers every nonzero candidate, cuts at least one of weight 0
    truths = [f"p{j}" for j in rng.integers(0, m, n)]
    full = _ranked(similarities, None)
    assert (np.count_nonzero(full.weights, axis=1) == counts).all()
    for table in (_ranked(similarities, k), full.truncate(k)):
        assert (table.cut_below + table.cut_ties == m - k).all() and not table.tail_mass.any()
        np.testing.assert_array_equal(certainty(table), certainty(full))
        for score in ("aps", "rank", "probability"):
            cut, whole = ScoredSplit.build(table, truths, None, score), ScoredSplit.build(full, truths, None, score)
            np.testing.assert_array_equal(cut.sorted_scores, whole.sorted_scores[:, :k], err_msg=score)
            np.testing.assert_array_equal(cut.uninformative, whole.uninformative)
            kept = cut.in_pool
            np.testing.assert_array_equal(cut.truth_scores[kept], whole.truth_scores[kept])
            np.testing.assert_array_equal(cut.truth_ranks[kept], whole.truth_ranks[kept])
            values = np.unique(whole.sorted_scores)
            for q_hat in [-np.inf, np.inf, *values, *(values - 1e-9)]:
                np.testing.assert_array_equal(set_sizes(cut.sorted_scores, cut.table.pool_sizes, q_hat),
                                              np.minimum(set_sizes(whole.sorted_scores, whole.table.pool_sizes, q_hat),
                                                         k), err_msg=f"{score} {q_hat}")
