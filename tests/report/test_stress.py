"""Stress tests on one attack table: sweeps of top-K, score, n_cal and seed, split stability, and
calibration drift between two configurations."""

import math
from dataclasses import replace

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
)

from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.audit.results import certify
from cpa_core.conformal.calibration import calibrate
from cpa_core.common.errors import ConfigError
from cpa_core.io.split import split_indices
from cpa_core.report.metrics import certificate_metrics, summarize
from cpa_core.report.stress import COLUMNS, SWEEPS, drift, split_stability, sweep

LEVELS = (0.8, 0.9)


def same(a, b) -> bool:
    """Equal figures, where NaN (an infinite threshold in a frame) equals None or NaN."""
    missing = lambda v: v is None or (isinstance(v, float) and math.isnan(v))  # noqa: E731
    if missing(a) or missing(b):
        return missing(a) and missing(b)
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a == pytest.approx(b, rel=1e-12, abs=1e-12)


@pytest.fixture(scope="module")
def synthetic():
    """300 documents, 25 candidates, a calibrated attacker: (documents, registry, config, table, probabilities)."""
    rng = np.random.default_rng(7)
    probabilities = probability_matrix(300, 25, rng)
    truth = sample_truth(probabilities, rng)
    documents, registry = documents_and_registry([f"p{t}" for t in truth], m=25)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), confidences=LEVELS, n_cal=150, n_test=150, seed=0, protocol="split")
    return documents, registry, config, table_from_matrix(probabilities), probabilities


# eight documents, four candidates ranked p0 > p1 > p2 > p3 for every document; document i's truth has index
# TRUTH[i] in that ranking
TRUTH = np.array([0, 0, 1, 1, 2, 2, 3, 3])


@pytest.fixture(scope="module")
def hand_made():
    probabilities = np.tile([0.4, 0.3, 0.2, 0.1], (8, 1))
    documents, registry = documents_and_registry([f"p{t}" for t in TRUTH], m=4)
    config = AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), confidences=LEVELS, n_cal=4, n_test=4, seed=0, protocol="split")
    return documents, registry, config, table_from_matrix(probabilities)


def test_unknown_field_is_a_config_error(synthetic):
    documents, registry, config, table, _ = synthetic
    with pytest.raises(ConfigError, match="cannot sweep 'temperature'; expected one of top_k, score, seed"):
        sweep(documents, registry, config, table, "temperature", [0.1])


def test_an_invalid_value_is_a_config_error(synthetic):
    documents, registry, config, table, _ = synthetic
    with pytest.raises(ConfigError, match="score: expected one of .*found 'nope'"):
        sweep(documents, registry, config, table, "score", ["aps", "nope"])
    with pytest.raises(ConfigError, match="top_k: expected an integer at least 1, found 0"):
        sweep(documents, registry, config, table, "top_k", [0])


@pytest.mark.parametrize("field, values", [("top_k", [3, None]), ("score", ["rank", "aps"]), ("seed", [5, 0])])
def test_one_row_per_value_and_level_named_by_the_variant_column(synthetic, field, values):
    documents, registry, config, table, _ = synthetic
    frame = sweep(documents, registry, config, table, field, values)
    column = SWEEPS[field]
    assert column == {"top_k": "top_k", "score": "score", "seed": "seed"}[field]
    assert list(frame.columns) == [column] + COLUMNS + ["n_cal"]
    assert len(frame) == len(values) * len(LEVELS)
    assert frame["confidence"].tolist() == list(LEVELS) * len(values)
    declared = frame[column].tolist()
    for i, value in enumerate(values):
        assert all(same(v, value) for v in declared[2 * i: 2 * i + 2]), (declared, value)
    assert (frame["n_test"] == 150).all()
    assert (frame["n_cal"] == 150).all()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_top_k_sweep_by_hand(hand_made, seed):
    documents, registry, config, table = hand_made
    cal, test = split_indices(8, 4, 4, seed)
    frame = sweep(documents, registry, replace(config, seed=seed), table, "top_k", [1, 2, 3, 4, None])
    for k in (1, 2, 3, 4, None):
        pool = 4 if k is None else k
        miss = np.mean(TRUTH[test] >= pool)
        rows = frame[frame["top_k"].map(lambda v: same(v, k))]  # noqa: B023
        assert len(rows) == 2
        for _, row in rows.iterrows():
            # n = 4: at 0.8, k = ceil(5 * 0.8) = 4, the largest calibration score (+inf if a truth was cut off);
            # at 0.9, k = 5 > 4, an infinite threshold: every set is the whole (truncated) pool
            if row["confidence"] == 0.9 or (TRUTH[cal] >= pool).any():
                size, q_finite = pool, False
            else:  # the APS sums are strictly increasing: the set stops at the largest calibration truth
                size, q_finite = TRUTH[cal].max() + 1, True
            assert row["candidate_miss_rate"] == pytest.approx(miss)
            assert row["median_set_size"] == size and row["mean_set_size"] == size
            assert row["coverage"] == pytest.approx(np.mean(TRUTH[test] < size))
            assert math.isfinite(row["q_hat"]) == q_finite
            assert row["top1"] == pytest.approx(np.mean(TRUTH[test] == 0))


def test_top_k_miss_rate_is_non_increasing_in_k(synthetic):
    documents, registry, config, table, probabilities = synthetic
    ks = [1, 2, 3, 5, 10, 25]
    frame = sweep(documents, registry, config, table, "top_k", ks)
    truth = documents.frame["identity_id"].str[1:].astype(int).to_numpy()
    _, test = split_indices(300, 150, 150, 0)
    # rank of the truth among the 25 candidates (no ties in a Dirichlet draw)
    ranks = (probabilities[test] > probabilities[test, truth[test]][:, None]).sum(axis=1) + 1
    for level in LEVELS:
        miss = frame[frame["confidence"] == level]["candidate_miss_rate"].to_numpy()
        assert (np.diff(miss) <= 0).all()
        assert miss.tolist() == pytest.approx([np.mean(ranks > k) for k in ks])
    assert miss[0] > 0.5 and miss[-1] == 0


def test_score_sweep_rows_equal_audits_run_with_that_score(synthetic):
    documents, registry, config, table, _ = synthetic
    scores = ["aps", "rank", "probability"]
    frame = sweep(documents, registry, config, table, "score", scores)
    sizes_seen = set()
    for score in scores:
        result = run_audit(documents, registry, None, replace(config, score=score), table=table)
        for level in LEVELS:
            row = frame[(frame["score"] == score) & (frame["confidence"] == level)].iloc[0]
            cert = result.certificate(level)
            assert row["coverage"] == pytest.approx(cert.covered.mean())
            assert row["median_set_size"] == np.median(cert.set_sizes)
            assert row["mean_set_size"] == pytest.approx(cert.set_sizes.mean())
            if (cert.q_hat == cert.q_hat[0]).all():  # one threshold (else it varies by certainty stratum)
                assert row["q_hat"] == pytest.approx(result.test_split.score.to_method(cert.q_hat[0]))
            sizes_seen.add((level, float(cert.set_sizes.mean())))
    assert len(sizes_seen) == len(scores) * len(LEVELS)  # the scores really differ
    assert config.score == "aps"


def test_seed_sweeps_re_split_like_a_declared_audit(synthetic):
    documents, registry, config, table, _ = synthetic
    for field, values in (("seed", [0, 4]),):
        frame = sweep(documents, registry, config, table, field, values)
        for value in values:
            result = run_audit(documents, registry, None, replace(config, **{field: value}), table=table)
            assert len(result.calibration_split) == (value if field == "n_cal" else 150)
            expected = summarize(result).overall_frame()
            got = frame[frame[SWEEPS[field]] == value].reset_index(drop=True)
            for column in COLUMNS + ["n_cal"]:
                assert all(same(a, b) for a, b in zip(got[column], expected[column])), (field, value, column)
    seeds = sweep(documents, registry, config, table, "seed", [0, 4])
    assert seeds["coverage"].iloc[0] != seeds["coverage"].iloc[2] or \
        seeds["mean_set_size"].iloc[0] != seeds["mean_set_size"].iloc[2]  # another split, other figures


def test_split_stability_mean_and_std_over_seeds(synthetic):
    documents, registry, config, table, _ = synthetic
    seeds = (0, 1, 2)
    frame = split_stability(documents, registry, config, table, seeds)
    assert list(frame.columns) == ["confidence", "coverage_mean", "coverage_std", "coverage_conditional_mean",
                                   "coverage_conditional_std", "median_set_size_mean", "median_set_size_std",
                                   "mean_set_size_mean", "mean_set_size_std", "n_seeds"]
    assert frame["confidence"].tolist() == list(LEVELS) and (frame["n_seeds"] == 3).all()
    certs = {s: run_audit(documents, registry, None, replace(config, seed=s), table=table) for s in seeds}
    for i, level in enumerate(LEVELS):
        per_seed = {"coverage": [], "coverage_conditional": [], "median_set_size": [], "mean_set_size": []}
        for s in seeds:
            cert = certs[s].certificate(level)
            per_seed["coverage"].append(cert.covered.mean())
            per_seed["coverage_conditional"].append(cert.covered[cert.split.in_pool].mean())
            per_seed["median_set_size"].append(np.median(cert.set_sizes))
            per_seed["mean_set_size"].append(cert.set_sizes.mean())
        for name, values in per_seed.items():
            assert frame[f"{name}_mean"].iloc[i] == pytest.approx(np.mean(values))
            assert frame[f"{name}_std"].iloc[i] == pytest.approx(np.std(values, ddof=1))
        assert frame["coverage_std"].iloc[i] > 0


@pytest.fixture(scope="module")
def calibrated_and_shifted(synthetic):
    """A: the calibrated attacker; B: an over-confident one (probabilities to the 4th power) on the same truth."""
    documents, registry, config, table, probabilities = synthetic
    sharp = probabilities ** 4
    sharp /= sharp.sum(axis=1, keepdims=True)
    a = run_audit(documents, registry, None, config, table=table)
    b = run_audit(documents, registry, None, replace(config, attacker=toy_attacker("sharp")), table=table_from_matrix(sharp))
    return a, b


def test_drift_rows_label_both_configurations(calibrated_and_shifted):
    a, b = calibrated_and_shifted
    frame = drift(a, b)
    assert list(frame.columns) == ["calibration", "calibrated_on", "tested_on"] + COLUMNS
    assert frame["calibration"].tolist() == ["drift (calibrated on A)", "own (recalibrated on B)"] * 2
    assert frame["confidence"].tolist() == [0.8, 0.8, 0.9, 0.9]
    assert a.config.config_id != b.config.config_id
    assert (frame["calibrated_on"] == a.config.config_id).all() and (frame["tested_on"] == b.config.config_id).all()


def test_drift_own_rows_are_the_shifted_audit_certificates(calibrated_and_shifted):
    """The own rows: B's test split certified by B's calibration documents in one pooled stratum, as an audit of B
    declared with one certainty stratum certifies it."""
    a, b = calibrated_and_shifted
    frame = drift(a, b)
    own = frame[frame["calibration"] == "own (recalibrated on B)"]
    for (_, row), level in zip(own.iterrows(), LEVELS):
        scores, _ = b.calibration_split.calibration_scores(b.config.miss_policy)
        cert = certify(replace(b.test_split, strata=None), calibrate(scores, [level]), level)
        metrics = certificate_metrics(cert).to_dict()
        for column in COLUMNS:
            assert same(row[column], metrics[column]), column


def test_drift_rows_apply_the_threshold_of_a_to_the_test_split_of_b(calibrated_and_shifted):
    a, b = calibrated_and_shifted
    frame = drift(a, b)
    shifted = frame[frame["calibration"] == "drift (calibrated on A)"]
    split = b.test_split
    for (_, row), level in zip(shifted.iterrows(), LEVELS):
        scores, _ = a.calibration_split.calibration_scores(a.config.miss_policy)
        q = calibrate(scores, [level]).q_hat(level)  # A's threshold, pooled over its certainty strata
        assert row["q_hat"] == split.score.to_method(q)
        sizes = (split.sorted_scores <= q).sum(axis=1)
        assert row["mean_set_size"] == pytest.approx(sizes.mean())
        assert row["median_set_size"] == np.median(sizes)
        assert row["empty_rate"] == pytest.approx(np.mean(sizes == 0))
        assert row["coverage"] == pytest.approx(np.mean(split.truth_scores <= q))
    # the over-confident attacker's sums pass A's threshold early: coverage collapses below the target
    own = frame[frame["calibration"] == "own (recalibrated on B)"]
    assert (shifted["coverage"].to_numpy() < 0.5).all()
    assert (own["coverage"].to_numpy() > 0.7).all()


def test_drift_onto_itself_changes_nothing(calibrated_and_shifted):
    a, _ = calibrated_and_shifted
    frame = drift(a, a)
    shifted, own = (frame[frame["calibration"] == label].reset_index(drop=True)
                    for label in ("drift (calibrated on A)", "own (recalibrated on B)"))
    for column in COLUMNS:
        assert all(same(x, y) for x, y in zip(shifted[column], own[column])), column


def test_drift_calibrates_a_grouped_audit_pooled():
    result = audited_groups()[0]  # calibrated per group
    frame = drift(result, result)
    scores = np.sort(result.calibration_split.truth_scores)
    n = len(scores)
    for level in (0.8, 0.9):
        k = math.ceil((n + 1) * level)  # the k-th smallest of the pooled calibration scores
        row = frame[(frame["calibration"] == "drift (calibrated on A)") & (frame["confidence"] == level)].iloc[0]
        assert row["q_hat"] == pytest.approx(result.test_split.score.to_method(scores[k - 1]))
        own = frame[(frame["calibration"] == "own (recalibrated on B)") & (frame["confidence"] == level)].iloc[0]
        assert own["q_hat"] == row["q_hat"]  # both pooled: drift onto itself is its own calibration


def test_a_sweep_needs_a_value():
    from cpa_core.report.stress import sweep

    with pytest.raises(ConfigError, match="at least one value"):
        sweep(None, None, None, None, "seed", [])


def test_the_calibration_size_ablation_keeps_the_test_documents_fixed(synthetic):
    from cpa_core.report.stress import ncal_ablation

    documents, registry, config, table, _ = synthetic
    frame = ncal_ablation(documents, registry, config, table, [40, 100], seeds=[0, 1, 2])
    assert frame["n_cal_declared"].tolist() == [40, 40, 100, 100] and (frame["n_seeds"] == 3).all()
    assert (frame["n_test"] == 150).all() and frame["n_cal"].tolist() == [40, 40, 100, 100]
    # by hand for seed 0: the same 150 test documents for every n_cal, nested calibration sets after them
    from cpa_core.audit.results import ScoredSplit, certify
    from cpa_core.conformal.calibration import calibrate

    full = ScoredSplit.build(table, documents.frame["identity_id"].to_numpy(dtype=object), None, config.score)
    order = np.random.default_rng(0).permutation(len(documents))
    test = full.rows(order[:150])
    seed0 = ncal_ablation(documents, registry, config, table, [40, 100], seeds=[0])
    for n_cal in (40, 100):
        calibration = calibrate(full.rows(order[150:150 + n_cal]).calibration_scores(config.miss_policy)[0],
                                config.confidences)
        for level in LEVELS:
            row = seed0[(seed0["n_cal_declared"] == n_cal) & (seed0["confidence"] == level)].iloc[0]
            assert row["coverage"] == pytest.approx(certify(test, calibration, level).covered.mean())
    seeds_apart = ncal_ablation(documents, registry, config, table, [40], seeds=[0])
    one = ncal_ablation(documents, registry, config, table, [40], seeds=[1])
    both = ncal_ablation(documents, registry, config, table, [40], seeds=[0, 1])
    assert both["coverage"].tolist() == pytest.approx(((seeds_apart["coverage"] + one["coverage"]) / 2).tolist())
    with pytest.raises(ConfigError, match="labelled documents"):
        ncal_ablation(documents, registry, config, table, [10_000])
