"""Metrics and the one summary every surface renders."""

from fractions import Fraction

import numpy as np
import pytest
from tables import audited_groups

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.report.metrics import OVERALL, certificate_metrics, ranking_metrics, summarize


@pytest.fixture(scope="module")
def audited():
    return audited_groups()


def test_ranking_metrics_by_hand():
    metrics = ranking_metrics(np.array([1, 2, 0, 4]))  # 0 = outside the pool
    assert metrics["top1"] == 0.25 and metrics["top5"] == 0.75
    assert metrics["mrr"] == pytest.approx((1 + 0.5 + 0 + 0.25) / 4)
    assert metrics["mean_rank"] == pytest.approx(7 / 3)


def test_summary_has_every_metric_per_level_and_group(audited):
    summary = summarize(audited[0]).to_dict()
    keys = {"coverage", "coverage_conditional", "candidate_miss_rate", "median_set_size", "mean_set_size", "top1",
            "mrr", "mean_leakage", "empty_rate", "q_hat", "n_cal", "n_test", "open_world_bound", "p10_set_size",
            "p90_set_size", "min_set_size", "max_set_size", "mean_rank"}
    for label in ("0.8", "0.9"):
        entry = summary["confidence"][label]
        assert keys <= set(entry)
        assert set(entry["groups"]) == {"a", "b"}
        assert entry["groups"]["a"]["n_cal"] + entry["groups"]["b"]["n_cal"] == 200
        assert entry["n_test"] == 300 and entry["candidate_miss_rate"] == 0.0


def test_summary_frame_and_dict_hold_the_same_figures(audited):
    result = audited[0]
    policy = ReleasePolicy(7, 0.2)
    summary = summarize(result, [0.8, 0.93], policy)
    as_dict, frame = summary.to_dict(), summary.to_frame()
    assert as_dict["policy"] == {"flag_below": 7, "leakage_threshold": 0.2, "acceptable_linkage": pytest.approx(1 / 7)}
    for label, confidence in (("0.8", 0.8), ("0.93", 0.93)):
        entry = as_dict["confidence"][label]
        row = frame[(frame["confidence"] == confidence) & (frame["group"] == OVERALL)].iloc[0]
        for key in ("coverage", "median_set_size", "n_flagged", "n_cal", "top1", "empty_rate"):
            assert row[key] == entry[key]
        for group, metrics in entry["groups"].items():
            row = summary.groups_frame(confidence).set_index("group").loc[group]
            assert row["n_flagged"] == metrics["n_flagged"] and row["q_hat"] == metrics["q_hat"]


def test_flag_counts_follow_the_policy_overall_and_per_group(audited):
    result = audited[0]
    cert = result.certificate(0.8)
    policy = ReleasePolicy(5)
    entry = summarize(result, [0.8], policy).level(0.8)
    by_set, by_linkage = cert.set_sizes < 5, cert.linkage > 0.2
    assert entry.n_flagged == int((by_set | by_linkage).sum()) and entry.n_flagged_by_set == int(by_set.sum())
    assert entry.n_flagged_by_linkage == int(by_linkage.sum()) and 0 < entry.n_flagged_by_set < entry.n_flagged
    assert entry.flagged_share == pytest.approx(float((by_set | by_linkage).mean()))
    assert sum(g.n_flagged for g in entry.groups.values()) == entry.n_flagged
    assert certificate_metrics(cert).n_flagged is None  # without a policy nothing is flagged
    assert "n_flagged" not in certificate_metrics(cert).to_dict()


def test_group_thresholds_are_the_group_calibrations(audited):
    result = audited[0]
    entry = summarize(result, [0.9]).level(0.9)
    calibration = result.calibration_for(0.9)
    for group, metrics in entry.groups.items():
        assert metrics.q_hat == pytest.approx(result.test_split.score.to_method(calibration.q_hat(0.9, group)))
        mask = result.test_split.groups.astype(str) == group
        assert np.unique(result.certificate(0.9).q_hat[mask]).tolist() == [calibration.q_hat(0.9, group)]


def test_the_attack_and_the_remainder_by_hand():
    """Six documents: ranks of the truth 1, 1, 2, 1 and two unlabelled; sets and linkage probabilities by hand. The
    remainder (not flagged) is d2 (rank 2), d3 (rank 1) and the unlabelled d5 (linkage 0.05)."""
    from cpa_core.attack.candidates import CandidateTable
    from cpa_core.audit.results import Certificate, ScoredSplit
    from cpa_core.report.metrics import attack_metrics, clopper_pearson

    weights = np.array([[0.6, 0.3, 0.1]] * 6)
    table = CandidateTable(np.array([f"d{i}" for i in range(6)], dtype=object), np.tile([0, 1, 2], (6, 1)), weights,
                           np.full(6, 3), np.array(["a", "b", "c"], dtype=object))
    split = ScoredSplit.build(table, ["a", "a", "b", "a", None, None], None, "aps")
    cert = Certificate(Fraction(9, 10), np.zeros(6), np.array([1, 3, 3, 3, 3, 3]), np.ones(6, dtype=bool), split,
                       linkage=np.array([0.1, 0.5, 0.02, 0.08, 0.3, 0.05]))
    figures = attack_metrics(cert, np.ones(6, dtype=bool), ReleasePolicy(2, acceptable_linkage=0.2))
    assert (figures["first_guess_rate"], figures["top_k"], figures["top_k_rate"]) == (0.75, 2, 1.0)
    assert (figures["first_guess_low"], figures["first_guess_high"]) == clopper_pearson(3, 4)
    assert (figures["n_flagged_by_set"], figures["n_flagged_by_linkage"]) == (1, 2)  # d0 by set; d1, d4 by linkage
    assert (figures["remainder_documents"], figures["remainder_labelled"]) == (3, 2)
    assert figures["remainder_first_guess"] == 0.5
    high = clopper_pearson(1, 2)[1]
    assert figures["remainder_bound"] == pytest.approx((2 * high + 0.05) / 3)
    assert figures["mean_linkage"] == pytest.approx(np.mean([0.1, 0.5, 0.02, 0.08, 0.3, 0.05]))
