"""Benchmarks of the calibration layer: (a) calibrate + certify vs MAPIE vs a plain argsort, and
(b) re-thresholding a large audit at a new confidence level.

Everything goes through cpa_core's public functions, as a user would call them. Each function
returns a plain dict of figures; ``bench/run.py`` prints and records them.
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from typing import Callable

import numpy as np

from cpa_core.attack.candidates import CandidateTable, top_candidates
from cpa_core.audit.configuration import AttackerConfig, AuditConfig
from cpa_core.audit.results import AuditResult, ScoredSplit
from cpa_core.conformal.calibration import calibrate, set_sizes
from cpa_core.conformal.scores import get_score
from cpa_core.io.knowledge import KnowledgeLevel

LEVELS = (0.90, 0.95, 0.99)
DIRICHLET_CONCENTRATION = 0.1


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    """Wall time and CPU time (seconds) of one call of ``fn``, and its result.

    On a quiet machine the two agree for these single-threaded steps; CPU time is the figure that
    survives other processes competing for the cores.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def round_robin(steps: dict[str, tuple[Callable[[], object], int]]) -> tuple[dict, dict, dict]:
    """Run the steps in turn (``name: (fn, repeats)``) so that a load burst hits all of them alike.

    Returns the wall times, CPU times and the last result of each step.
    """
    walls = {name: [] for name in steps}
    cpus = {name: [] for name in steps}
    results = {}
    for round_ in range(max(repeats for _, repeats in steps.values())):
        for name, (fn, repeats) in steps.items():
            if round_ < repeats:
                wall, cpu, results[name] = timed(fn)
                walls[name].append(wall)
                cpus[name].append(cpu)
    return walls, cpus, results


# --------------------------------------------------------------------------------------------
# (a) calibrate + certified sets at three levels on an n x M probability matrix
# --------------------------------------------------------------------------------------------

def probability_matrix(n_rows: int, n_classes: int, seed: int,
                       concentration: float = DIRICHLET_CONCENTRATION) -> tuple[np.ndarray, np.ndarray]:
    """Rows drawn from a symmetric Dirichlet, and one label per row drawn from that row."""
    rng = np.random.default_rng(seed)
    gamma = rng.standard_gamma(concentration, size=(n_rows, n_classes))
    probs = gamma / gamma.sum(axis=1, keepdims=True)
    del gamma
    u = rng.random(n_rows)
    labels = np.minimum((np.cumsum(probs, axis=1) < u[:, None]).sum(axis=1), n_classes - 1)
    return probs, labels.astype(np.int64)


def ours_core(probs: np.ndarray, labels: np.ndarray, n_cal: int, levels=LEVELS) -> dict:
    """cpa_core's public functions on a dense probability matrix, as a user would call them.

    Calibration rows: the truth's APS score in one pass (``truth_scores``, no sort) -> ``calibrate``.
    Test rows: sorted weights (a value sort; the candidate order is not needed) -> ``sorted_scores`` ->
    ``set_sizes`` at each level. A set is the top of the ranking, so its members are the candidates whose
    weight reaches the weight of its last member (tied candidates enter together): the boolean membership
    matrix (what MAPIE returns) is one comparison per level, and the truth is covered when it is a member.
    """
    n, m = probs.shape
    aps = get_score("aps")
    calibration = calibrate(aps.truth_scores(probs[:n_cal], labels[:n_cal]), levels)
    test = probs[n_cal:]
    ranked = np.sort(test, axis=1)[:, ::-1]                         # weights by decreasing value
    pools = np.full(n - n_cal, m)
    test_scores = aps.sorted_scores(ranked, pools)
    rows = np.arange(n - n_cal)
    truth_weights = test[rows, labels[n_cal:]]
    out = {}
    for level in levels:
        q_hat = calibration.q_hat(level)
        sizes = set_sizes(test_scores, pools, q_hat)
        cutoff = np.where(sizes > 0, ranked[rows, np.maximum(sizes, 1) - 1], np.inf)
        members = test >= cutoff[:, None]                            # (n_test, M) boolean sets
        out[level] = (sizes, truth_weights >= cutoff, members)
    return out


def ranked_table(probs: np.ndarray) -> CandidateTable:
    """What an attacker hands the audit: every row's candidates ranked by decreasing probability."""
    n, m = probs.shape
    index, weights = top_candidates(probs, None)
    return CandidateTable(np.arange(n), index, weights, np.full(n, m), np.arange(m))


def ours_audit_path(table: CandidateTable, labels: np.ndarray, n_cal: int, levels=LEVELS) -> dict:
    """``run_audit``'s certificate path from the attacker's ranked table: the two splits' rows -> ``ScoredSplit.build``
    x2 -> ``calibrate`` -> ``AuditResult.certificate`` x3."""
    n = len(table)
    cal = ScoredSplit.build(table.rows(np.arange(n_cal)), labels[:n_cal], None, "aps")
    test = ScoredSplit.build(table.rows(np.arange(n_cal, n)), labels[n_cal:], None, "aps")
    config = AuditConfig(knowledge=KnowledgeLevel("bench", ("profile",)), attacker=AttackerConfig("matrix"),
                         confidences=tuple(levels), n_cal=n_cal, n_test=n - n_cal, protocol="split")
    result = AuditResult(config, cal, test, calibrate(cal.calibration_scores("infinite")[0], levels))
    out = {}
    for level in levels:
        certificate = result.certificate(level)
        out[level] = (certificate.set_sizes, certificate.covered)
    return out


def ours_audit_objects(probs: np.ndarray, labels: np.ndarray, n_cal: int, levels=LEVELS) -> dict:
    """The same with the ranking included: the probability matrix -> :func:`ranked_table` -> :func:`ours_audit_path`."""
    return ours_audit_path(ranked_table(probs), labels, n_cal, levels)


def floor_argsort(probs: np.ndarray) -> np.ndarray:
    return np.argsort(probs, axis=1)


def _mapie_estimator(probs: np.ndarray):
    from sklearn.base import BaseEstimator, ClassifierMixin

    class RowLookup(ClassifierMixin, BaseEstimator):
        """A fitted classifier whose ``predict_proba(X)`` returns the matrix rows ``X[:, 0]``."""

        def __init__(self, probs=None):
            self.probs = probs

        def fit(self, X=None, y=None):
            self.classes_ = np.arange(self.probs.shape[1])
            self.n_features_in_ = 1
            return self

        def predict_proba(self, X):
            return self.probs[np.asarray(X, dtype=np.int64)[:, 0]]

        def predict(self, X):
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    return RowLookup(probs).fit()


def mapie_split(probs: np.ndarray, labels: np.ndarray, n_cal: int, levels=LEVELS) -> dict:
    """MAPIE's SplitConformalClassifier, conformity_score="aps", prefit; X = row indices."""
    from mapie.classification import SplitConformalClassifier

    n = probs.shape[0]
    X = np.arange(n).reshape(-1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "fewer labels in the conformalization set than classes"
        model = SplitConformalClassifier(_mapie_estimator(probs), confidence_level=list(levels),
                                         conformity_score="aps", prefit=True, random_state=0)
        model.conformalize(X[:n_cal], labels[:n_cal])
        _, sets = model.predict_set(X[n_cal:])  # include_last_label=True (MAPIE's default)
    rows = np.arange(n - n_cal)
    return {level: (sets[:, :, j].sum(axis=1), sets[rows, labels[n_cal:], j]) for j, level in enumerate(levels)}


def coverage_tolerance(level: float, n_cal: int, n_test: int) -> float:
    """Three standard errors of the empirical coverage (calibration and test sampling)."""
    return 3 * math.sqrt(level * (1 - level) * (1 / n_cal + 1 / n_test))


def bench_conformal(quick: bool = False, seed: int = 20261122) -> dict:
    n_rows, n_classes = (1_000, 500) if quick else (4_000, 2_000)
    n_cal = n_rows // 2
    repeats = 3 if quick else 5
    mapie_repeats = 2 if quick else 5
    probs, labels = probability_matrix(n_rows, n_classes, seed)
    # warm-up (lazy imports, first-call costs) before any timing
    ours_core(probs[:300], labels[:300], 150)
    ours_audit_objects(probs[:300], labels[:300], 150)
    mapie_split(probs[:300], labels[:300], 150)
    table = ranked_table(probs)
    walls, cpus, results = round_robin({
        "floor": (lambda: floor_argsort(probs), repeats),
        "core": (lambda: ours_core(probs, labels, n_cal), repeats),
        "path": (lambda: ours_audit_path(table, labels, n_cal), repeats),
        "objects": (lambda: ours_audit_objects(probs, labels, n_cal), repeats),
        "mapie": (lambda: mapie_split(probs, labels, n_cal), mapie_repeats),
    })
    core, objects, mapie = results["core"], results["objects"], results["mapie"]
    for level in LEVELS:  # the paths of ours agree exactly
        assert np.array_equal(results["path"][level][0], objects[level][0]), "the certificate paths differ"
        assert np.array_equal(core[level][0], objects[level][0]), "core and audit-object set sizes differ"
        assert np.array_equal(core[level][1], objects[level][1]), "core and audit-object coverage differ"
        assert np.array_equal(core[level][2].sum(axis=1), core[level][0]), "membership and set sizes differ"
    n_test = n_rows - n_cal
    levels = {}
    for level in LEVELS:
        tolerance = coverage_tolerance(level, n_cal, n_test)
        cov = float(np.mean(core[level][1]))
        levels[level] = {
            "coverage": cov, "coverage_ok": cov >= level - tolerance, "tolerance": tolerance,
            "median_size": float(np.median(core[level][0])), "mean_size": float(np.mean(core[level][0])),
            "mapie_coverage": float(np.mean(mapie[level][1])),
            "mapie_median_size": float(np.median(mapie[level][0])),
            "mapie_mean_size": float(np.mean(mapie[level][0])),
        }
    best = {name: min(times) for name, times in walls.items()}
    best_cpu = {name: min(times) for name, times in cpus.items()}
    return {
        "shape": (n_rows, n_classes), "n_cal": n_cal, "n_test": n_test, "repeats": repeats,
        "mapie_repeats": mapie_repeats, "concentration": DIRICHLET_CONCENTRATION, "best": best,
        "best_cpu": best_cpu, "times": walls, "cpu_times": cpus,
        "speedup_vs_mapie": best["mapie"] / best["core"],
        "speedup_objects_vs_mapie": best["mapie"] / best["objects"],
        "ratio_to_floor": best["core"] / best["floor"],
        "speedup_path_vs_mapie": best["mapie"] / best["path"],
        "ratio_path_to_floor": best["path"] / best["floor"],
        "cpu_speedup_path_vs_mapie": best_cpu["mapie"] / best_cpu["path"],
        "cpu_ratio_path_to_floor": best_cpu["path"] / best_cpu["floor"],
        "ratio_objects_to_floor": best["objects"] / best["floor"],
        "cpu_speedup_vs_mapie": best_cpu["mapie"] / best_cpu["core"],
        "cpu_ratio_to_floor": best_cpu["core"] / best_cpu["floor"],
        "levels": levels,
    }


# --------------------------------------------------------------------------------------------
# (b) re-thresholding a large audit at a confidence level not computed yet
# --------------------------------------------------------------------------------------------

def synthetic_table(rng: np.random.Generator, n: int, k: int, registry_size: int, start: int) -> CandidateTable:
    """``n`` documents with ``k`` distinct ranked candidates each and Dirichlet(0.3) weights."""
    gamma = rng.standard_gamma(0.3, size=(n, k))
    weights = -np.sort(-(gamma / gamma.sum(axis=1, keepdims=True)), axis=1)
    base = rng.integers(0, registry_size, size=(n, 1))
    candidates = ((base + 97 * np.arange(k)) % registry_size).astype(np.int32)  # distinct in a row
    ids = np.array([f"P{i:05d}" for i in range(registry_size)], dtype=object)
    docs = np.array([f"D{i:06d}" for i in range(start, start + n)], dtype=object)
    return CandidateTable(docs, candidates, weights, np.full(n, k, dtype=np.int64), ids)


def sampled_truth(rng: np.random.Generator, table: CandidateTable) -> np.ndarray:
    """A true identity per document, drawn from its own weights (so coverage is meaningful)."""
    u = rng.random(len(table))
    position = np.minimum((np.cumsum(table.weights, axis=1) < u[:, None]).sum(axis=1), table.width - 1)
    return table.candidate_ids[table.candidates[np.arange(len(table)), position]]


def bench_rethreshold(quick: bool = False, seed: int = 20261122) -> dict:
    n_test = 10_000 if quick else 100_000
    n_cal, k, registry_size = 2_000, 100, 10_000
    rng = np.random.default_rng(seed)
    test_table = synthetic_table(rng, n_test, k, registry_size, 0)
    cal_table = synthetic_table(rng, n_cal, k, registry_size, n_test)
    test_truth, cal_truth = sampled_truth(rng, test_table), sampled_truth(rng, cal_table)
    groups = np.array(["manual_redaction", "ner_masking", "generalisation"], dtype=object)
    test_groups, cal_groups = groups[rng.integers(0, 3, n_test)], groups[rng.integers(0, 3, n_cal)]

    start = time.perf_counter()
    test_split = ScoredSplit.build(test_table, test_truth, test_groups, "aps")
    cal_split = ScoredSplit.build(cal_table, cal_truth, cal_groups, "aps")
    build_s = time.perf_counter() - start

    level = KnowledgeLevel("bench", ("profile",))
    results = {}
    for name, group_column in (("pooled", None), ("mondrian", "group")):
        config = AuditConfig(knowledge=level, attacker=AttackerConfig("synthetic"), n_cal=n_cal, n_test=n_test,
                             top_k=k, group_column=group_column, protocol="split")
        scores, strata = cal_split.calibration_scores(config.miss_policy)
        result = AuditResult(config, cal_split, test_split, calibrate(scores, config.confidences,
                                                                      strata if group_column else None))
        result.certificate(0.8)  # warm-up
        # new levels, none stored in result.calibration: each call calibrates and counts afresh
        new_levels = [round(0.905 + 0.01 * i, 3) for i in range(9)]
        times, cpu_times, coverage = [], [], []
        for new in new_levels:
            wall, cpu, certificate = timed(lambda: result.certificate(new))
            times.append(wall)
            cpu_times.append(cpu)
            coverage.append(float(certificate.covered.mean()) - new)
        results[name] = {"times": times, "median": statistics.median(times), "cpu_times": cpu_times,
                         "cpu_median": statistics.median(cpu_times), "levels": new_levels,
                         "worst_coverage_gap": min(coverage)}
    return {"n_test": n_test, "n_cal": n_cal, "k": k, "registry_size": registry_size, "build_s": build_s,
            **results}
