"""The pipeline: a hand-computed toy audit, a calibration too small for its level, sums equal in exact arithmetic, a
peaked softmax, a shortlist, the order of the attack and the release protocol's calibration documents (certificates
at other levels: tests/audit/test_results.py; the configuration: tests/audit/test_configuration.py; the temperature
``auto`` and the memory check through an audit: tests/attack/test_temperature.py, tests/attack/test_budget.py)."""

import math
from dataclasses import replace

import numpy as np
import pytest
from tables import (
    LEVEL,
    documents_and_registry,
    probability_matrix,
    sample_truth,
    table_from_matrix,
    toy_attacker,
    toy_table,
)

from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.conformal.scores import get_score
from cpa_core.report.metrics import summarize


def test_toy_audit_by_hand():
    documents, registry = documents_and_registry(["p1", "p0", "p2", "p1"], m=3)
    cfg = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=2, n_test=2, seed=0,
                      confidences=(0.5,), protocol="split")
    result = run_audit(documents, registry, None, cfg, table=toy_table())
    cal_ids = result.calibration_split.table.doc_ids.tolist()
    # APS score of each document's truth, by hand
    truth_score = {"d0": 0.9, "d1": 0.9, "d2": 0.7, "d3": 1.0}
    truth_rank = {"d0": 2, "d1": 2, "d2": 1, "d3": 3}
    stored = result.calibration_split.truth_scores
    assert get_score("aps").to_method(stored).tolist() == pytest.approx([truth_score[d] for d in cal_ids])
    # n = 2, alpha = 0.5: k = ceil(3 * 0.5) = 2, the larger calibration score
    expected_q = max(truth_score[d] for d in cal_ids)
    cert = result.certificate(0.5)
    assert get_score("aps").to_method(cert.q_hat).tolist() == pytest.approx([expected_q, expected_q])
    for row, doc in enumerate(result.test_split.table.doc_ids):
        aps = np.cumsum(toy_table().weights[int(doc[1])])
        # d3 has a tie 0.4/0.4: both enter at 0.8
        aps = [0.8, 0.8, 1.0] if doc == "d3" else aps
        assert cert.set_sizes[row] == sum(s <= expected_q + 1e-12 for s in aps)
        assert result.test_split.truth_ranks[row] == truth_rank[doc]


def test_calibration_too_small_gives_whole_pool_and_a_note():
    rng = np.random.default_rng(0)
    probabilities = probability_matrix(40, 10, rng)
    documents, registry = documents_and_registry([f"p{t}" for t in sample_truth(probabilities, rng)], m=10)
    cfg = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=20, n_test=20, confidences=(0.99,), protocol="split")
    result = run_audit(documents, registry, None, cfg, table=table_from_matrix(probabilities))
    cert = result.certificate(0.99)
    assert (cert.set_sizes == 10).all() and math.isinf(cert.q_hat[0])
    assert [note.confidence for note in result.calibration.notes_] == ["0.99"]
    assert "needs at least 99" in summarize(result).to_dict()["confidence"]["0.99"]["warnings"][0]


def test_sums_equal_in_exact_arithmetic_compare_equal_across_documents():
    # calibration d0: 0.6 + 0.3 = 0.8999999999999999 in floating point; test d1: 0.5 + 0.4 = 0.9
    documents, registry = documents_and_registry(["p1", "p0", "p2", "p1"], m=3)
    cfg = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=2, n_test=2, seed=0, confidences=(0.5,), protocol="split")
    result = run_audit(documents, registry, None, cfg, table=toy_table())
    assert result.calibration_split.table.doc_ids.tolist() == ["d0", "d2"]
    cert = result.certificate(0.5)
    assert cert.set_sizes[result.test_split.table.doc_ids.tolist().index("d1")] == 2


def test_a_peaked_softmax_does_not_saturate_into_whole_pool_sets():
    """A sharp attacker (temperature 0.02): the top candidate holds nearly all the mass and the tails are
    ~1e-13. On the METHOD's scale rounded to 12 decimals every tail candidate scores 1.0 and ties with the
    truth of any missed calibration document, so every set would be the whole pool; stored masses keep the
    tail apart, and the sets stay small with coverage intact."""
    from cpa_core.attack.candidates import CandidateTable, rank_by_similarity

    rng = np.random.default_rng(5)
    n, m = 600, 120
    similarities = rng.random((n, m)) * 0.2
    truth = rng.integers(0, m, n)
    found = rng.random(n) < 0.95  # confidently right for 95 %, confidently wrong for the others
    decoy = (truth + rng.integers(1, m, n)) % m
    similarities[np.arange(n), np.where(found, truth, decoy)] += 0.8
    candidates, weights, tail, *_ = rank_by_similarity(lambda a, b: similarities[a:b], n, m, None, 0.02, 256)
    table = CandidateTable(np.array([f"d{i}" for i in range(n)], dtype=object), candidates, weights,
                           np.full(n, m), np.array([f"p{j}" for j in range(m)], dtype=object), tail_mass=tail)
    documents, registry = documents_and_registry([f"p{t}" for t in truth], m=m)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=300, n_test=300, confidences=(0.9, 0.95), protocol="split")
    result = run_audit(documents, registry, None, config, table=table)
    missed = result.calibration_split.truth_ranks > 1
    rounded = np.round(get_score("aps").to_method(result.calibration_split.truth_scores[missed]), 12)
    assert missed.sum() > 5 and (rounded == 1.0).all()  # what the rounded scale made of them
    for level in (0.9, 0.95):
        cert = result.certificate(level)
        assert (cert.set_sizes == m).mean() < 0.05 and cert.covered.mean() >= level - 0.05
    # the probability score separates the confident top from the tail even better
    by_probability = run_audit(documents, registry, None, replace(config, score="probability"), table=table)
    assert np.median(by_probability.certificate(0.9).set_sizes) == 1


def test_a_shortlist_keeps_the_scores_and_the_sets_it_can_hold():
    rng = np.random.default_rng(8)
    probabilities = probability_matrix(500, 60, rng, concentration=0.2)
    documents, registry = documents_and_registry([f"p{t}" for t in sample_truth(probabilities, rng)], m=60)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), n_cal=250, n_test=250, confidences=(0.8,), protocol="split")
    table = table_from_matrix(probabilities)
    full = run_audit(documents, registry, None, config, table=table)
    short = run_audit(documents, registry, None, replace(config, top_k=20), table=table)
    kept = full.test_split.sorted_scores[:, :20]
    np.testing.assert_allclose(short.test_split.sorted_scores, kept, rtol=1e-14)  # no renormalisation
    assert short.calibration.q_hat(0.8) == pytest.approx(full.calibration.q_hat(0.8), rel=1e-14)
    fits = full.certificate(0.8).set_sizes < 20
    assert fits.mean() > 0.5
    assert (short.certificate(0.8).set_sizes[fits] == full.certificate(0.8).set_sizes[fits]).all()


def test_splits_are_the_same_whichever_order_the_documents_are_attacked_in(sample_paths):
    """The attack runs calibration documents first, then audited ones (each split a run of rows); the tables
    equal those cut from an attack of every document in file order."""
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.audit.pipeline import attack_documents
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(sample_paths["documents"]), load_registry(sample_paths["registry"])
    level = LEVEL.__class__("K2", ("age_band", "gender", "occupation", "city", "keywords", "events"))
    config = AuditConfig(knowledge=level, attacker=toy_attacker("tfidf"), confidences=(0.9, 0.95), protocol="split",
                         seed=5)
    result = run_audit(documents, registry, TfidfAttacker(temperature=0.05), config)
    everything, _ = attack_documents(documents, registry, TfidfAttacker(temperature=0.05), level)  # file order
    index = {doc: row for row, doc in enumerate(everything.doc_ids)}
    for split in (result.calibration_split, result.test_split):
        rows = [index[doc] for doc in split.table.doc_ids]
        assert np.array_equal(split.table.candidates, everything.candidates[rows])
        assert np.array_equal(split.table.weights, everything.weights[rows])


@pytest.mark.parametrize("group_column, miss_policy, top_k", [(None, "infinite", None), ("group", "exclude", 6)])
def test_a_release_calibrates_on_its_labelled_documents_without_a_copy_of_their_candidates(group_column, miss_policy,
                                                                                            top_k):
    """Unlabelled documents between labelled ones: the calibration documents are not a run of rows, yet their
    candidates and scores are not copied (they are the audited split's rows); they calibrate exactly as the rows
    themselves would, and certifying them alone is refused."""
    from cpa_core.audit.results import AuditResult, certify

    rng = np.random.default_rng(4)
    n = 240
    probabilities = probability_matrix(n, 25, rng)
    truth = np.array([f"p{t}" for t in sample_truth(probabilities, rng)], dtype=object)
    truth[3::5] = None  # every fifth document's subject is unknown
    groups = np.where(np.arange(n) % 3 == 0, "a", "b")
    documents, registry = documents_and_registry(list(truth), groups=groups, m=25)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), group_column=group_column, miss_policy=miss_policy,
                         top_k=top_k, confidences=(0.8, 0.9))
    result = run_audit(documents, registry, None, config, table=table_from_matrix(probabilities))
    cal, test = result.calibration_split, result.test_split
    labelled = np.flatnonzero([t is not None for t in truth])
    assert cal.table.doc_ids.tolist() == [f"d{i}" for i in labelled]
    assert cal.table.candidates.nbytes == cal.table.weights.nbytes == cal.sorted_scores.nbytes == 0
    copied = test.rows(labelled)  # the same documents with their candidates
    for name in ("truth_ids", "truth_positions", "truth_scores", "truth_ranks", "groups"):
        assert np.array_equal(getattr(cal, name), getattr(copied, name)), name
    reference = AuditResult(result.config, copied, test, result.calibration, result.inputs)
    assert summarize(result).to_dict() == summarize(reference).to_dict()
    for level in (0.7, 0.8, 0.9):
        assert np.array_equal(result.certificate(level).set_sizes, reference.certificate(level).set_sizes)
    with pytest.raises(ValueError, match="candidates are not kept"):
        certify(cal, result.calibration, 0.9)


@pytest.mark.parametrize("protocol", ["release", "split"])
def test_progress_says_each_step_in_the_terms_of_the_protocol(protocol, tmp_path):
    """The first step is said before the attacker prepares anything (choosing a temperature 'auto' may take most of
    the run): under the release protocol nothing is split into calibration and test documents, so nothing says so."""
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.io.synthetic import generate_sample_data
    from cpa_core.io.tables import load_documents, load_registry

    paths = generate_sample_data(tmp_path, seed=3, n_people=30, n_documents=90)
    documents, registry = load_documents(paths["documents"]), load_registry(paths["registry"])
    level = LEVEL.__class__("K2", ("age_band", "gender", "occupation", "city", "keywords", "events"))
    config = AuditConfig(knowledge=level, attacker=toy_attacker("tfidf"), confidences=(0.8,), protocol=protocol,
                         seed=1)
    said: list[tuple[int, int, str]] = []
    attacker = TfidfAttacker(temperature="auto")
    learn = attacker.learn

    def learn_after_the_first_step(*args, **kwargs):
        assert said, "the attacker prepared before the run said what it was doing"
        return learn(*args, **kwargs)

    attacker.learn = learn_after_the_first_step
    result = run_audit(documents, registry, attacker, config, progress=lambda done, total, step: said.append(
        (done, total, step)))
    steps = list(dict.fromkeys(step for _, _, step in said))
    n = said[0][1]  # the attacked documents: every one under the release protocol
    assert said[0][0] == 0 and said[-1][:2] == (n, n)
    assert n >= len(result.test_split)
    if protocol == "release":
        assert steps[0] == "preparing the attack on every document (the labelled ones calibrate each other)"
        assert steps[-1] == "calibrating on the labelled documents, each leaving its own score out"
        assert not [step for step in steps if "test" in step or "split" in step], steps
    else:
        assert steps[0] == "preparing the attack on the calibration and test documents"
        assert steps[-1] == "calibrating on the calibration documents"
    assert "ranking the registry" in steps[1:-1]  # the attacker's own step, between the two
