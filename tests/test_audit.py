"""The pipeline: splits, a hand-computed toy audit, re-thresholding without re-attack, metrics, policy."""

import math
import warnings

import numpy as np
import pytest

from cpa_core.audit import AuditConfig, run_audit
from cpa_core.candidates import CandidateTable, softmax_rows, top_candidates
from cpa_core.errors import CalibrationWarning, ConfigError
from cpa_core.knowledge import KnowledgeLevel
from cpa_core.metrics import certificate_metrics, ranking_metrics, summarize
from cpa_core.policy import flag_mask, neutralise_cell, worklist, worklist_csv
from cpa_core.split import split_indices
from tables import documents_and_registry, probability_matrix, sample_truth, table_from_matrix

LEVEL = KnowledgeLevel("toy", ("field",))


def test_split_is_disjoint_sized_and_seeded():
    cal, test = split_indices(100, 30, 50, seed=5)
    assert len(cal) == 30 and len(test) == 50 and not set(cal) & set(test)
    again = split_indices(100, 30, 50, seed=5)
    assert (again[0] == cal).all() and (again[1] == test).all()
    assert not (split_indices(100, 30, 50, seed=6)[0] == cal).all()


def test_stratified_split_is_proportional_and_exact():
    strata = ["a"] * 60 + ["b"] * 30 + ["c"] * 10
    cal, test = split_indices(100, 40, 50, seed=1, strata=strata)
    labels = np.array(strata)
    assert len(cal) == 40 and len(test) == 50 and not set(cal) & set(test)
    assert [int((labels[cal] == g).sum()) for g in "abc"] == [24, 12, 4]
    assert [int((labels[test] == g).sum()) for g in "abc"] == [30, 15, 5]


@pytest.mark.parametrize("n_cal,n_test", [(60, 50), (0, 10), (10, 0)])
def test_impossible_split_sizes_are_config_errors(n_cal, n_test):
    with pytest.raises(ConfigError):
        split_indices(100, n_cal, n_test, seed=0)


def test_top_candidates_and_softmax():
    index, values = top_candidates(np.array([[0.1, 0.9, 0.5], [0.3, 0.2, 0.8]]), 2)
    assert index.tolist() == [[1, 2], [2, 0]] and values.tolist() == [[0.9, 0.5], [0.8, 0.3]]
    w = softmax_rows(np.array([[0.0, np.log(3.0)]]), temperature=1.0)
    assert np.allclose(w, [[0.25, 0.75]])
    w = softmax_rows(np.array([[0.0, np.log(3.0)]]), temperature=0.5)  # sharper: 1 : 9
    assert np.allclose(w, [[0.1, 0.9]])


def toy_table():
    """Four documents, three candidates, probabilities chosen by hand."""
    weights = np.array([[0.6, 0.3, 0.1], [0.5, 0.4, 0.1], [0.7, 0.2, 0.1], [0.4, 0.4, 0.2]])
    candidates = np.array([[0, 1, 2], [1, 0, 2], [2, 1, 0], [0, 2, 1]])
    return CandidateTable(np.array(["d0", "d1", "d2", "d3"], dtype=object), candidates, weights,
                          np.full(4, 3), np.array(["p0", "p1", "p2"], dtype=object))


def test_toy_audit_by_hand():
    documents, registry = documents_and_registry(["p1", "p0", "p2", "p1"], m=3)
    cfg = AuditConfig(knowledge=LEVEL, attacker={"attacker": "toy"}, n_cal=2, n_test=2, seed=0,
                      confidences=(0.5,))
    result = run_audit(documents, registry, None, cfg, table=toy_table())
    cal_ids = result.calibration_split.table.doc_ids.tolist()
    # APS score of each document's truth, by hand
    truth_score = {"d0": 0.9, "d1": 0.9, "d2": 0.7, "d3": 1.0}
    truth_rank = {"d0": 2, "d1": 2, "d2": 1, "d3": 3}
    assert result.calibration_split.truth_scores.tolist() == pytest.approx([truth_score[d] for d in cal_ids])
    # n = 2, alpha = 0.5: k = ceil(3 * 0.5) = 2, the larger calibration score
    expected_q = max(truth_score[d] for d in cal_ids)
    cert = result.certificate(0.5)
    assert cert.q_hat.tolist() == pytest.approx([expected_q, expected_q])
    for row, doc in enumerate(result.test_split.table.doc_ids):
        aps = np.cumsum(toy_table().weights[int(doc[1])])
        # d3 has a tie 0.4/0.4: both enter at 0.8
        aps = [0.8, 0.8, 1.0] if doc == "d3" else aps
        assert cert.set_sizes[row] == sum(s <= expected_q + 1e-12 for s in aps)
        assert result.test_split.truth_ranks[row] == truth_rank[doc]


def test_ranking_metrics_by_hand():
    metrics = ranking_metrics(np.array([1, 2, 0, 4]))  # 0 = outside the pool
    assert metrics["top1"] == 0.25 and metrics["top5"] == 0.75
    assert metrics["mrr"] == pytest.approx((1 + 0.5 + 0 + 0.25) / 4)
    assert metrics["mean_rank"] == pytest.approx(7 / 3)


class CountingAttacker:
    name = "counting"

    def __init__(self, table):
        self.table, self.calls = table, 0

    def params(self):
        return {"attacker": self.name}

    def attack(self, doc_ids, texts, registry, level, progress=None):
        self.calls += 1
        index = [int(d[1:]) for d in doc_ids]
        return self.table.rows(np.array(index))


@pytest.fixture(scope="module")
def audited():
    rng = np.random.default_rng(0)
    probabilities = probability_matrix(600, 30, rng)
    truth = sample_truth(probabilities, rng)
    groups = np.where(np.arange(600) % 3 == 0, "a", "b")
    documents, registry = documents_and_registry([f"p{t}" for t in truth], groups=groups, m=30)
    attacker = CountingAttacker(table_from_matrix(probabilities))
    cfg = AuditConfig(knowledge=LEVEL, attacker=attacker.params(), n_cal=200, n_test=300, seed=3,
                      group_column="group", confidences=(0.8, 0.9))
    return run_audit(documents, registry, attacker, cfg), attacker, documents, registry


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


def test_summary_has_every_metric_per_level_and_group(audited):
    summary = summarize(audited[0])
    keys = {"coverage", "coverage_conditional", "candidate_miss_rate", "median_set_size", "mean_set_size", "top1",
            "mrr", "mean_leakage", "empty_rate", "q_hat", "n_cal", "n_test", "open_world_bound", "p10_set_size",
            "p90_set_size", "min_set_size", "max_set_size", "mean_rank"}
    for label in ("0.8", "0.9"):
        entry = summary["confidence"][label]
        assert keys <= set(entry)
        assert set(entry["groups"]) == {"a", "b"}
        assert entry["groups"]["a"]["n_cal"] + entry["groups"]["b"]["n_cal"] == 200
        assert entry["n_test"] == 300 and entry["candidate_miss_rate"] == 0.0


def test_leakage_and_flags():
    sizes = np.array([0, 1, 5, 11, 40])
    assert flag_mask(sizes, 11).tolist() == [True, True, True, False, False]
    assert flag_mask(sizes, 2, leakage_threshold=0.1).tolist() == [True, True, True, False, False]
    assert flag_mask(sizes, 1).tolist() == [True, False, False, False, False]


def test_worklist_sorted_smallest_first_and_csv_neutralised(audited):
    result = audited[0]
    cert = result.certificate(0.8)
    frame = worklist(cert, 5, result.config.config_id, explain=lambda q, rows: ["=cmd", "term"])
    assert (np.diff(frame["set_size"].to_numpy()) >= 0).all()
    assert (frame["set_size"] < 5).all()
    assert len(frame) == int((cert.set_sizes < 5).sum())
    text = worklist_csv(frame)
    assert "'=cmd; term" in text
    for value, expected in (("=1+1", "'=1+1"), ("+1", "'+1"), ("-2", "'-2"), ("@x", "'@x"), ("ok", "ok"), (3, 3)):
        assert neutralise_cell(value) == expected


def test_config_validation():
    with pytest.raises(ConfigError, match="needs candidate weights"):
        AuditConfig(knowledge=LEVEL, attacker={"attacker": "imported", "kind": "rank"}, score="aps")
    with pytest.raises(ConfigError):
        AuditConfig(knowledge=LEVEL, attacker={}, confidences=(1.2,))
    with pytest.raises(ConfigError):
        AuditConfig(knowledge=LEVEL, attacker={}, miss_policy="ignore")
    a = AuditConfig(knowledge=LEVEL, attacker={"attacker": "x"}, seed=1)
    b = AuditConfig(knowledge=LEVEL, attacker={"attacker": "x"}, seed=2)
    assert a.config_id != b.config_id and a.config_id == AuditConfig(knowledge=LEVEL, attacker={"attacker": "x"}, seed=1).config_id


def test_calibration_too_small_gives_whole_pool_and_warning():
    rng = np.random.default_rng(0)
    probabilities = probability_matrix(40, 10, rng)
    documents, registry = documents_and_registry([f"p{t}" for t in sample_truth(probabilities, rng)], m=10)
    cfg = AuditConfig(knowledge=LEVEL, attacker={}, n_cal=20, n_test=20, confidences=(0.99,))
    with pytest.warns(CalibrationWarning):
        result = run_audit(documents, registry, None, cfg, table=table_from_matrix(probabilities))
    cert = result.certificate(0.99)
    assert (cert.set_sizes == 10).all() and math.isinf(cert.q_hat[0])
    assert summarize(result)["confidence"]["0.99"]["warnings"]


def test_sums_equal_in_exact_arithmetic_compare_equal_across_documents():
    # calibration d0: 0.6 + 0.3 = 0.8999999999999999 in floating point; test d1: 0.5 + 0.4 = 0.9
    documents, registry = documents_and_registry(["p1", "p0", "p2", "p1"], m=3)
    cfg = AuditConfig(knowledge=LEVEL, attacker={}, n_cal=2, n_test=2, seed=0, confidences=(0.5,))
    result = run_audit(documents, registry, None, cfg, table=toy_table())
    assert result.calibration_split.table.doc_ids.tolist() == ["d0", "d2"]
    cert = result.certificate(0.5)
    assert cert.set_sizes[result.test_split.table.doc_ids.tolist().index("d1")] == 2
