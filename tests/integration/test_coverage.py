"""Statistical coverage: the guarantee holds over many random calibration/test splits.

For exchangeable data, the mean test coverage over random splits lies in
[1 - alpha, 1 - alpha + 1/(n + 1)] for continuous scores; we allow four Monte Carlo standard errors.
"""


import numpy as np
import pytest
from tables import (
    documents_and_registry,
    hub_release,
    probability_matrix,
    sample_truth,
    table_from_matrix,
    toy_attacker,
)

from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.io.knowledge import KnowledgeLevel

LEVEL = KnowledgeLevel("toy", ("field",))
N_DOCS, M, N_CAL, REPEATS = 1200, 40, 100, 200


def config(**kwargs):
    base = dict(knowledge=LEVEL, attacker=toy_attacker("synthetic"), protocol="split", n_cal=N_CAL, n_test=N_DOCS - N_CAL,
                confidences=(0.8, 0.9, 0.95))
    base.update(kwargs)
    return AuditConfig(**base)


def coverages(documents, registry, table, cfg, seeds, group=None, conditional=False):
    out = {level: [] for level in cfg.confidences}
    for seed in seeds:
        result = run_audit(documents, registry, None, cfg.__class__(**{**cfg.__dict__, "seed": seed}), table=table)
        for level in cfg.confidences:
            cert = result.certificate(level)
            mask = np.ones(len(cert.covered), bool)
            if group is not None:  # the document's group, whether or not the calibration used it
                labels = documents.frame.set_index("doc_id")["group"]
                mask = labels.loc[list(result.test_split.table.doc_ids)].to_numpy() == group
            if conditional:
                mask &= result.test_split.in_pool
            out[level].append(cert.covered[mask].mean())
    return {level: (np.mean(v), np.std(v) / np.sqrt(len(v))) for level, v in out.items()}


@pytest.fixture(scope="module")
def closed_world():
    rng = np.random.default_rng(1)
    probabilities = probability_matrix(N_DOCS, M, rng)
    truth = sample_truth(probabilities, rng)
    documents, registry = documents_and_registry([f"p{t}" for t in truth], m=M)
    return documents, registry, table_from_matrix(probabilities)


@pytest.mark.parametrize("score", ["aps", "rank", "probability"])
def test_mean_coverage_within_conformal_bounds(closed_world, score):
    documents, registry, table = closed_world
    cfg = config(score=score)
    for level, (mean, se) in coverages(documents, registry, table, cfg, range(REPEATS)).items():
        upper = level + 1 / (N_CAL + 1)
        if score == "rank":  # a discrete score: ties can only add coverage
            upper = 1.0
        assert level - 4 * se <= mean <= upper + 4 * se, (score, level, mean, se)


def test_open_world_coverage_with_misses():
    rng = np.random.default_rng(2)
    probabilities = probability_matrix(N_DOCS, M, rng)
    truth = np.array([f"p{t}" for t in sample_truth(probabilities, rng)], dtype=object)
    missing = rng.random(N_DOCS) < 0.08  # registry incomplete: these identities are nowhere in the pool
    truth[missing] = [f"outsider{i}" for i in range(missing.sum())]
    documents, registry = documents_and_registry(truth, m=M)
    table = table_from_matrix(probabilities)
    rho = missing.mean()
    # conservative policy: a miss scores +inf, so q_hat guards unconditional coverage (rho < alpha)
    for level, (mean, se) in coverages(documents, registry, table, config(confidences=(0.8, 0.9)), range(REPEATS)).items():
        assert mean >= level - 4 * se, ("infinite", level, mean)
    # excluding misses certifies coverage conditional on inclusion; unconditional >= (1 - rho)(1 - alpha)
    cfg = config(miss_policy="exclude", confidences=(0.8, 0.9, 0.95))
    conditional = coverages(documents, registry, table, cfg, range(REPEATS), conditional=True)
    unconditional = coverages(documents, registry, table, cfg, range(REPEATS))
    for level in cfg.confidences:
        mean, se = conditional[level]
        assert level - 4 * se <= mean <= level + 1 / (N_CAL * (1 - rho)) + 4 * se + 0.005
        mean, se = unconditional[level]
        assert mean >= (1 - rho) * level - 4 * se
        assert mean < level  # the misses do cost coverage here


def test_mondrian_gives_per_group_coverage_where_pooled_calibration_fails():
    rng = np.random.default_rng(3)
    probabilities = probability_matrix(N_DOCS, M, rng, concentration=0.2)
    groups = np.where(rng.random(N_DOCS) < 0.5, "sharp", "misled")
    truth = sample_truth(probabilities, rng)
    misled = groups == "misled"
    truth[misled] = rng.integers(0, M, misled.sum())  # the attacker's weights mean nothing here
    documents, registry = documents_and_registry([f"p{t}" for t in truth], groups=groups, m=M)
    table = table_from_matrix(probabilities)
    mondrian = config(group_column="group", n_cal=300, n_test=N_DOCS - 300, confidences=(0.9,))
    pooled = config(n_cal=300, n_test=N_DOCS - 300, confidences=(0.9,))
    for group in ("sharp", "misled"):
        mean, se = coverages(documents, registry, table, mondrian, range(80), group=group)[0.9]
        assert mean >= 0.9 - 4 * se - 0.005, (group, mean)
    mean, se = coverages(documents, registry, table, pooled, range(80), group="misled")[0.9]
    assert mean < 0.88  # without strata, the hard group is under-covered


def test_top_k_truncation_raises_misses_and_keeps_conditional_coverage():
    rng = np.random.default_rng(4)
    probabilities = probability_matrix(N_DOCS, M, rng, concentration=0.5)
    truth = sample_truth(probabilities, rng)
    documents, registry = documents_and_registry([f"p{t}" for t in truth], m=M)
    table = table_from_matrix(probabilities)
    cfg = config(top_k=5, miss_policy="exclude", confidences=(0.9,))
    result = run_audit(documents, registry, None, cfg, table=table)
    assert (result.test_split.table.pool_sizes == 5).all()
    miss = (~result.test_split.in_pool).mean()
    assert 0.05 < miss < 0.9
    mean, se = coverages(documents, registry, table, cfg, range(REPEATS), conditional=True)[0.9]
    assert 0.9 - 4 * se <= mean


# --- certifying a whole release (leave-one-out) -------------------------------------------------------------

def release_coverage(probabilities, truth, groups, n_release, n_unlabelled, confidence, releases, seed,
                     group_column=None):
    """Draw ``releases`` releases of ``n_release`` documents from a labelled pool; hold back the labels of
    ``n_unlabelled`` of each; certify the release; count coverage of the labelled documents' leave-one-out
    sets and of the unlabelled documents' sets against their held-back identities."""

    rng = np.random.default_rng(seed)
    covered = {"labelled": [], "unlabelled": []}
    by_group = {}
    base = config(confidences=(confidence,), n_cal=None, n_test=None, protocol="release", group_column=group_column)
    for _ in range(releases):
        rows = rng.choice(len(truth), n_release, replace=False)
        hidden = rng.choice(n_release, n_unlabelled, replace=False)
        ids = [f"p{t}" for t in truth[rows]]
        for i in hidden:
            ids[i] = None
        documents, registry = documents_and_registry(ids, groups=None if groups is None else groups[rows],
                                                     m=probabilities.shape[1])
        table = table_from_matrix(probabilities[rows])
        result = run_audit(documents, registry, None, base, table=table)
        cert = result.certificate(confidence)
        positions = table.truth_positions([f"p{t}" for t in truth[rows]])  # the held-back labels too
        hit = (positions >= 0) & (positions < cert.set_sizes)
        unlabelled = np.zeros(n_release, dtype=bool)
        unlabelled[hidden] = True
        covered["labelled"].append(hit[~unlabelled].mean())
        covered["unlabelled"].append(hit[unlabelled].mean())
        if groups is not None:
            for g in np.unique(groups):
                by_group.setdefault(g, []).append(hit[groups[rows] == g])
    out = {k: (np.mean(v), np.std(v) / np.sqrt(len(v))) for k, v in covered.items()}
    for g, hits in by_group.items():
        joined = np.concatenate(hits)
        out[g] = (joined.mean(), joined.std() / np.sqrt(len(joined)))
    return out


@pytest.mark.parametrize("confidence", [0.8, 0.9])
def test_release_certificates_cover_every_document(confidence):
    rng = np.random.default_rng(11)
    probabilities = probability_matrix(4000, M, rng)
    truth = sample_truth(probabilities, rng)
    result = release_coverage(probabilities, truth, None, n_release=120, n_unlabelled=20, confidence=confidence,
                              releases=300, seed=12)
    for kind in ("labelled", "unlabelled"):
        mean, se = result[kind]
        assert mean >= confidence - 4 * se - 1e-12, (kind, confidence, mean, se)
    # within a release the labelled documents' coverage is ceil(n(1 - alpha))/n by construction within each certainty
    # stratum (of 25 or more of the 100 labelled documents here), ties aside
    assert result["labelled"][0] <= confidence + 1 / 25 + 4 * result["labelled"][1]


def test_release_certificates_per_group():
    rng = np.random.default_rng(13)
    probabilities = probability_matrix(4000, M, rng, concentration=0.2)
    groups = np.where(rng.random(4000) < 0.5, "sharp", "misled")
    truth = sample_truth(probabilities, rng)
    misled = groups == "misled"
    truth[misled] = rng.integers(0, M, misled.sum())  # the attacker's weights mean nothing here
    result = release_coverage(probabilities, truth, groups, n_release=160, n_unlabelled=20, confidence=0.9,
                              releases=200, seed=14, group_column="group")
    for group in ("sharp", "misled", "unlabelled"):
        mean, se = result[group]
        assert mean >= 0.9 - 4 * se, (group, mean, se)


class MatrixRetrieval:
    """A retrieval attacker over a fixed similarity matrix (a document's text is its row), temperature ``auto``."""

    def __new__(cls, matrix):
        from dataclasses import dataclass, field

        from cpa_core.attack.base import RetrievalAttacker

        @dataclass
        class Attacker(RetrievalAttacker):
            matrix: np.ndarray = field(repr=False, default=None)
            temperature: object = "auto"
            top_k: int | None = None
            chunk_size: int = 64
            clue_extractor: object = None
            name: str = "matrix"

            def __post_init__(self):
                self._start()

            def params(self):
                return {"attacker": self.name, "temperature": self.temperature}

            def similarities(self, doc_ids, texts, registry, level, progress=None):
                rows = np.array([int(text) for text in texts])
                return list(texts), lambda start, stop: self.matrix[rows[start:stop]]

        return Attacker(matrix=matrix)


@pytest.mark.parametrize("labelled", [9, 40])
def test_the_auto_temperature_keeps_documents_of_unknown_subject_covered(labelled):
    """The issue's setting: a few labelled documents and 60 whose subject is unknown, many random releases, the
    temperature ``auto``: documents of unknown subject are covered at the confidence level (the temperature is fitted
    on a tuning fold that never calibrates), and so are the labelled ones."""
    rng = np.random.default_rng(21)
    pool, m = 3000, 25
    similarities = rng.normal(size=(pool, m))
    truth = np.where(rng.random(pool) < 0.7, similarities.argmax(axis=1), rng.integers(0, m, pool))
    similarities[np.arange(pool), truth] += 0.5
    hits = {(kind, level): [] for kind in ("labelled", "unlabelled") for level in (0.8, 0.9)}
    chosen = set()
    for _ in range(300):
        rows = rng.choice(pool, labelled + 60, replace=False)
        ids = [f"p{t}" for t in truth[rows]]
        hidden = np.zeros(len(rows), dtype=bool)
        hidden[rng.choice(len(rows), 60, replace=False)] = True
        documents, registry = documents_and_registry([None if h else i for i, h in zip(ids, hidden)], m=m)
        documents.frame["text"] = [str(r) for r in rows]
        base = config(confidences=(0.8, 0.9), n_cal=None, n_test=None, protocol="release")
        result = run_audit(documents, registry, MatrixRetrieval(similarities), base)
        chosen.add(result.inputs["learned"]["temperature"])
        tuned = np.isin(result.test_split.table.doc_ids.astype(str), result.inputs["learned"]["tuning_documents"])
        positions = result.test_split.table.truth_positions(ids)
        for level in (0.8, 0.9):
            cert = result.certificate(level)
            hit = (positions >= 0) & (positions < cert.set_sizes)
            hits[("unlabelled", level)].append(hit[hidden])
            hits[("labelled", level)].append(hit[~hidden & ~tuned])
    assert len(chosen) > 1 or labelled < 10  # fitted release by release (a fold of two certifies nothing: the largest)
    for (kind, level), values in hits.items():
        joined = np.concatenate(values)
        se = np.sqrt(level * (1 - level) / len(joined))
        assert len(joined) > 1000 and joined.mean() >= level - 4 * se, (kind, level, joined.mean(), se)


def mixed_pool(seed: int, n: int = 6000, m: int = 60):
    from tables import mixed_release

    rng = np.random.default_rng(seed)
    probabilities, truth, _ = mixed_release(n, m, rng, share_sure=0.35, lift=4.0)
    return probabilities, truth


@pytest.mark.parametrize("protocol", ["release", "split"])
def test_coverage_holds_within_each_certainty_stratum(protocol):
    """Many random releases mixing documents the attacker is sure about with documents it cannot place, certified in
    certainty strata: the documents of each stratum (by its rank, least to most certain) are covered at the level,
    documents of unknown subject (release protocol) and held-out test documents (split protocol) alike."""
    probabilities, truth = mixed_pool(31)
    rng = np.random.default_rng(32)
    by_stratum: dict[str, list] = {}
    for _ in range(150):
        rows = rng.choice(len(truth), 400, replace=False)
        ids = [f"p{t}" for t in truth[rows]]
        hidden = np.zeros(400, dtype=bool)
        if protocol == "release":
            hidden[rng.choice(400, 100, replace=False)] = True
        documents, registry = documents_and_registry([None if h else i for i, h in zip(ids, hidden)],
                                                     m=probabilities.shape[1])
        sizes = {"n_cal": 200, "n_test": 200, "seed": int(rng.integers(1 << 30))} if protocol == "split" else \
            {"n_cal": None, "n_test": None}
        base = config(confidences=(0.9,), protocol=protocol, **sizes)
        result = run_audit(documents, registry, None, base, table=table_from_matrix(probabilities[rows]))
        assert len(result.strata) >= 2
        cert = result.certificate(0.9)
        split = result.test_split
        positions = split.table.truth_positions([ids[int(d[1:])] for d in split.table.doc_ids])
        hit = (positions >= 0) & (positions < cert.set_sizes)
        audited = hidden[[int(d[1:]) for d in split.table.doc_ids]] if protocol == "release" else \
            np.ones(len(split), dtype=bool)
        for label in np.unique(split.strata):
            inside = (split.strata == label) & audited
            by_stratum.setdefault(str(label), []).append(hit[inside])
    assert len(by_stratum) >= 2
    for label, values in by_stratum.items():
        joined = np.concatenate(values)
        se = np.sqrt(0.09 / len(joined))
        assert joined.mean() >= 0.9 - 4 * se, (label, joined.mean(), len(joined))


def assert_calibrated_by_decile(predicted: np.ndarray, observed: np.ndarray) -> None:
    """In each decile of the predicted probability (of at least 300 documents), the observed rate is the predicted
    one within four standard errors and 0.03."""
    edges = np.quantile(predicted, np.linspace(0, 1, 11))
    codes = np.clip(np.searchsorted(edges, predicted, side="right") - 1, 0, 9)
    for decile in range(10):
        inside = codes == decile
        if inside.sum() < 300:
            continue
        p, o = predicted[inside].mean(), observed[inside].mean()
        se = np.sqrt(max(p * (1 - p), 0.01) / inside.sum())
        assert abs(o - p) < 4 * se + 0.03, (decile, p, o, inside.sum())


def test_the_linkage_probability_is_calibrated_on_withheld_labels():
    """Predicted against observed first-guess rate, by decile of the linkage probability, over the documents whose
    labels were withheld in many random releases."""
    probabilities, truth = mixed_pool(41)
    rng = np.random.default_rng(42)
    predicted, observed = [], []
    for _ in range(60):
        rows = rng.choice(len(truth), 600, replace=False)
        ids = [f"p{t}" for t in truth[rows]]
        hidden = np.zeros(600, dtype=bool)
        hidden[rng.choice(600, 200, replace=False)] = True
        documents, registry = documents_and_registry([None if h else i for i, h in zip(ids, hidden)],
                                                     m=probabilities.shape[1])
        base = config(confidences=(0.9,), n_cal=None, n_test=None, protocol="release")
        result = run_audit(documents, registry, None, base, table=table_from_matrix(probabilities[rows]))
        table = result.test_split.table
        first = table.candidate_ids[table.candidates[:, 0]]
        predicted.append(result.linkage[hidden])
        observed.append((first == np.array(ids, dtype=object))[hidden])
    predicted, observed = np.concatenate(predicted), np.concatenate(observed)
    assert_calibrated_by_decile(predicted, observed)


def test_the_learned_linkage_probability_is_calibrated_on_withheld_labels_and_tells_documents_apart():
    """Releases where half the documents fall on hub candidates with the same margins as the placeable half (the
    learned, cross-fitted statistic of :mod:`cpa_core.audit.linkage`): over the documents whose labels were withheld,
    the observed first-guess rate in each decile is the predicted one, and the probability tells linked from unlinked
    documents apart far better than the certainty does."""
    from sklearn.metrics import roc_auc_score

    from cpa_core.audit.stratification import certainty

    rng = np.random.default_rng(51)
    predicted, observed, margins = [], [], []
    for _ in range(20):
        table, truth, _ = hub_release(int(rng.integers(1 << 30)), n=1000)
        hidden = rng.random(len(truth)) < 0.4
        documents, registry = documents_and_registry([None if h else t for t, h in zip(truth, hidden)],
                                                     m=table.candidate_ids.size)
        base = config(confidences=(0.9,), n_cal=None, n_test=None, protocol="release")
        result = run_audit(documents, registry, None, base, table=table)
        assert result.linkage_model.describe()["method"] == "cross Venn-Abers"
        split = result.test_split.table
        first = split.candidate_ids[split.candidates[:, 0]]
        predicted.append(result.linkage[hidden])
        observed.append((first == np.array(truth, dtype=object))[hidden])
        margins.append(certainty(split)[hidden])
    predicted, observed, margins = np.concatenate(predicted), np.concatenate(observed), np.concatenate(margins)
    assert_calibrated_by_decile(predicted, observed)
    assert roc_auc_score(observed, predicted) > 0.95 > 0.6 > roc_auc_score(observed, margins)
