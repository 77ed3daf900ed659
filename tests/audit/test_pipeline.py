"""The pipeline: a hand-computed toy audit, re-thresholding without re-attack, configuration checks."""

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
    toy_table,
)

from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.common.errors import ConfigError
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


def test_config_validation():
    with pytest.raises(ConfigError, match="needs candidate weights"):
        AuditConfig(knowledge=LEVEL, attacker=toy_attacker("imported", weight_kind="rank"), score="aps")
    with pytest.raises(ConfigError, match="scores candidates itself"):
        AuditConfig(knowledge=LEVEL, attacker=toy_attacker("profile", required_score="given"), score="aps")
    with pytest.raises(ConfigError):
        AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), confidences=(1.2,))
    with pytest.raises(ConfigError):
        AuditConfig(knowledge=LEVEL, attacker=toy_attacker(), miss_policy="ignore")
    a = AuditConfig(knowledge=LEVEL, attacker=toy_attacker("x"), seed=1)
    b = AuditConfig(knowledge=LEVEL, attacker=toy_attacker("x"), seed=2)
    assert a.config_id != b.config_id and a.config_id == AuditConfig(knowledge=LEVEL, attacker=toy_attacker("x"), seed=1).config_id


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
    candidates, weights, tail = rank_by_similarity(lambda a, b: similarities[a:b], n, m, None, 0.02, 256)
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


def test_the_auto_temperature_is_chosen_from_all_labelled_documents_and_recorded(sample_paths):
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.attack.temperature import TEMPERATURE_GRID
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(sample_paths["documents"]), load_registry(sample_paths["registry"])
    level = LEVEL.__class__("K2", ("age_band", "gender", "occupation", "city", "keywords", "events"))
    attacker = TfidfAttacker()  # the default temperature: auto
    config = AuditConfig(knowledge=level, attacker=toy_attacker("tfidf"), confidences=(0.9,))
    result = run_audit(documents, registry, attacker, config)
    learned = result.inputs["learned"]
    assert learned["temperature"] in TEMPERATURE_GRID and learned["labelled_documents_used"] > 900
    assert attacker.effective_temperature == learned["temperature"]
    # the same choice whichever protocol: it depends on the labelled documents only, all of them alike
    split = run_audit(documents, registry, TfidfAttacker(), replace(config, protocol="split", seed=3))
    assert split.inputs["learned"]["temperature"] == learned["temperature"]
    with pytest.raises(ConfigError, match="temperature 'auto'"):
        TfidfAttacker().attack(["d"], ["text"], registry, level)  # outside an audit: nothing to learn from


def test_beyond_its_budget_auto_fits_on_the_documents_whose_id_hashes_into_a_sample(sample_paths, monkeypatch):
    """A large release: ``auto`` reads the similarities of a sample fixed by the documents' own ids (never by their
    position or text), and chooses what :func:`fit_temperature` chooses on exactly those documents."""
    from cpa_core.attack import temperature
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.attack.temperature import fit_sample, fit_temperature
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(sample_paths["documents"]), load_registry(sample_paths["registry"])
    level = LEVEL.__class__("K2", ("age_band", "gender", "occupation", "city", "keywords", "events"))
    config = AuditConfig(knowledge=level, attacker=toy_attacker("tfidf"), confidences=(0.9,))
    doc_ids, all_texts = documents.frame["doc_id"].tolist(), documents.frame["text"].tolist()
    identities = documents.frame["identity_id"].tolist()
    n, m = len(doc_ids), len(registry)
    assert fit_sample(doc_ids, m) is None  # within the budget: every document
    monkeypatch.setattr(temperature, "FIT_SIMILARITIES", n * m // 4)
    sample = fit_sample(doc_ids, m)
    assert 0.15 * n < len(sample) < 0.35 * n  # about a quarter (binomial: 10 SE from the edges at n = 1,000)
    result = run_audit(documents, registry, TfidfAttacker(), config)
    learned = result.inputs["learned"]
    assert learned["documents_sampled"] == len(sample)
    reference = TfidfAttacker()
    ids, texts = [doc_ids[i] for i in sample], [all_texts[i] for i in sample]
    _, similarities = reference.similarities(ids, texts, registry, level)
    column = {ident: i for i, ident in enumerate(registry.ids.tolist())}
    truth = np.array([column.get(identities[i], -1) for i in sample])
    assert learned["temperature"] == fit_temperature(similarities, len(sample), truth, reference.chunk_size)
    assert learned["labelled_documents_used"] == int((truth >= 0).sum())
    # the sample is a set of ids: the same documents, and temperature, whatever their order in the release
    order = np.random.default_rng(5).permutation(n)
    shuffled = fit_sample([doc_ids[i] for i in order], m)
    assert sorted(doc_ids[order[i]] for i in shuffled) == sorted(ids)


def test_an_audit_the_machine_cannot_hold_is_refused_before_the_attack(sample_paths, monkeypatch):
    from cpa_core.attack import budget
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(sample_paths["documents"]), load_registry(sample_paths["registry"])
    level = LEVEL.__class__("K1", ("age_band", "gender", "occupation", "city"))
    config = AuditConfig(knowledge=level, attacker=toy_attacker("tfidf"), confidences=(0.9,))
    needed = len(documents) * len(registry) * budget.BYTES_PER_CANDIDATE
    monkeypatch.setattr(budget, "available_memory", lambda: needed // 4)
    attacker = TfidfAttacker(temperature=0.1)
    monkeypatch.setattr(attacker, "attack", lambda *a, **k: pytest.fail("the attack ran"))
    with pytest.raises(ConfigError, match=f"ranking {len(documents):,} documents against {len(registry):,} "
                                          "candidates each .*--top-k"):
        run_audit(documents, registry, attacker, config)
    # a shortlist that fits runs
    fits = run_audit(documents, registry, TfidfAttacker(temperature=0.1, top_k=20), replace(config, top_k=20))
    assert fits.test_split.table.width == 20


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
    result = run_audit(documents, registry, TfidfAttacker(), config)
    everything, _ = attack_documents(documents, registry, TfidfAttacker(), level)  # file order, temperature learnt
    index = {doc: row for row, doc in enumerate(everything.doc_ids)}
    for split in (result.calibration_split, result.test_split):
        rows = [index[doc] for doc in split.table.doc_ids]
        assert np.array_equal(split.table.candidates, everything.candidates[rows])
        assert np.array_equal(split.table.weights, everything.weights[rows])


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
