"""The softmax temperature ``auto``: the grid temperature with the smallest mean certified set (brute force over
the grid), a symmetric function of the labelled documents (their order does not matter; ties go to the larger
temperature), the blocks it reads, and the sample of a large release chosen by the documents' ids; through an
audit, the choice is recorded and used."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pytest
from tables import LEVEL, toy_attacker

from cpa_core.attack.candidates import softmax_rows
from cpa_core.attack.temperature import (
    AUTO,
    DEFAULT_TEMPERATURE,
    FIT_BLOCK_ENTRIES,
    TEMPERATURE_GRID,
    fit_block_rows,
    fit_sample,
    fit_temperature,
)
from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.common.errors import ConfigError


def test_the_grid_and_the_default():
    assert DEFAULT_TEMPERATURE == AUTO == "auto"
    assert len(TEMPERATURE_GRID) == 12 and TEMPERATURE_GRID[0] == pytest.approx(0.005)
    assert TEMPERATURE_GRID[-1] == pytest.approx(2.0)
    ratios = np.array(TEMPERATURE_GRID[1:]) / np.array(TEMPERATURE_GRID[:-1])
    assert ratios == pytest.approx(np.full(11, (2.0 / 0.005) ** (1 / 11)))  # geometric: a constant ratio


@pytest.mark.parametrize("chunk_size, n_registry, rows", [
    (512, 400, 512),                          # 2**22 // 400 = 10,485 rows would fit: the chunk is the limit
    (512, 10**6, 4),                          # 2**22 // 10**6 = 4
    (512, 2**22, 1),                          # one row per block
    (512, 2**23, 1),                          # never fewer than one
    (512, 0, 512),                            # an empty registry counts as one column
    (3, 2**20, 3),                            # 2**22 // 2**20 = 4, but the chunk is 3
])
def test_a_block_holds_at_most_the_fit_block_entries(chunk_size, n_registry, rows):
    assert FIT_BLOCK_ENTRIES == 2**22
    assert fit_block_rows(chunk_size, n_registry) == rows


def test_when_every_temperature_gives_the_same_sets_the_largest_wins():
    # one candidate per document: every set has one member whatever the temperature
    similarities = np.random.default_rng(0).random((30, 1))
    chosen = fit_temperature(lambda a, b: similarities[a:b], 30, np.zeros(30, dtype=int), chunk_size=7,
                             grid=(0.1, 0.5, 2.0))
    assert chosen == 2.0


def test_only_documents_whose_identity_is_in_the_pool_count():
    rng = np.random.default_rng(1)
    similarities = rng.random((40, 6))
    truth = np.where(np.arange(40) % 4 == 0, -1, similarities.argmax(axis=1))
    chosen = fit_temperature(lambda a, b: similarities[a:b], 40, truth, chunk_size=16)
    members = truth >= 0  # the same choice from the members alone, read in other blocks
    kept = similarities[members]
    assert fit_temperature(lambda a, b: kept[a:b], int(members.sum()), truth[members], chunk_size=5) == chosen


def test_the_sample_is_all_documents_within_the_budget():
    ids = [f"D{i}" for i in range(10)]
    assert fit_sample(ids, 5, budget=50) is None  # 10 x 5 = 50 similarities: within
    assert fit_sample(ids, 5, budget=49) is not None


def test_a_document_is_in_the_sample_when_its_own_id_hashes_below_the_share():
    ids = [f"D{i:04d}" for i in range(400)]
    sample = fit_sample(ids, 100, budget=10_000)  # share 10,000 / (400 x 100) = 1/4
    draws = [int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8).digest(), "big") / 2**64 for i in ids]
    assert sample.tolist() == [row for row, draw in enumerate(draws) if draw < 0.25]
    assert 60 < len(sample) < 140  # about a quarter
    # twice the documents and twice the budget: the same share, the same documents of the first half
    more = fit_sample(ids + [f"E{i:04d}" for i in range(400)], 100, budget=20_000)
    assert [ids[row] for row in sample] == [ids[row] for row in more if row < 400]
    assert fit_sample(ids, 100, budget=0).tolist() == []


def test_the_auto_temperature_gives_the_smallest_mean_certified_set_over_the_grid():
    from cpa_core.attack.temperature import FIT_CONFIDENCE, TEMPERATURE_GRID, fit_temperature
    from cpa_core.conformal.calibration import leave_one_out_thresholds, set_sizes
    from cpa_core.conformal.scores import get_score

    rng = np.random.default_rng(3)
    similarities = rng.random((150, 12))
    truth = np.where(rng.random(150) < 0.6, similarities.argmax(axis=1), rng.integers(0, 12, 150))
    truth[:10] = -1  # unknown identities never calibrate
    chosen = fit_temperature(lambda a, b: similarities[a:b], 150, truth, chunk_size=64)

    def mean_set(t):  # the audit's own functions: sorted APS scores, leave-one-out thresholds, set sizes
        weights = softmax_rows(similarities, t)
        ranked = -np.sort(-weights, axis=1)
        stored = get_score("aps").sorted_scores(ranked, np.full(150, 12))
        position = np.argsort(np.argsort(-weights, axis=1, kind="stable"), axis=1)
        members = truth >= 0
        own = np.where(members, stored[np.arange(150), position[np.arange(150), np.maximum(truth, 0)]], np.inf)
        q = leave_one_out_thresholds(own, members, FIT_CONFIDENCE)
        return set_sizes(stored, np.full(150, 12), q).mean()

    sizes = {t: mean_set(t) for t in TEMPERATURE_GRID}
    assert sizes[chosen] == pytest.approx(min(sizes.values()), abs=0.02)
    order = rng.permutation(150)  # symmetric: the order of the documents does not matter
    assert fit_temperature(lambda a, b: similarities[order][a:b], 150, truth[order], chunk_size=7) == chosen
    assert fit_temperature(lambda a, b: similarities[a:b], 150, np.full(150, -1), chunk_size=50) is None


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


@pytest.mark.parametrize("seed", range(6))
def test_aps_set_sizes_are_those_of_the_whole_rows_scored(seed):
    """Scoring the first candidates with the others' mass below them gives the sets of the whole rows, ties across
    the cut and sets reaching it included."""
    from cpa_core.attack.temperature import SCORED_PREFIX, aps_set_sizes
    from cpa_core.conformal.calibration import set_sizes
    from cpa_core.conformal.scores import SCORES

    rng = np.random.default_rng(seed)
    n, m = 300, 3 * SCORED_PREFIX
    weights = rng.dirichlet(np.full(m, rng.choice([0.02, 0.3, 5.0])), size=n)
    weights[: n // 3, SCORED_PREFIX - 2: SCORED_PREFIX + 2] = weights[: n // 3, SCORED_PREFIX - 2: SCORED_PREFIX - 1]
    weights[n // 3: n // 2, :] = 1.0 / m  # flat rows: every candidate ties
    ranked = -np.sort(-weights, axis=1)
    ranked /= ranked.sum(axis=1, keepdims=True)
    pool = np.full(n, m)
    whole = SCORES["aps"].sorted_scores(ranked, pool)
    # thresholds at scores of the rows themselves (membership hinges on equality) and in between
    q_hat = np.where(rng.random(n) < 0.5, whole[np.arange(n), rng.integers(0, m, n)], -rng.random(n))
    expected = set_sizes(whole, pool, q_hat)
    assert (aps_set_sizes(ranked, q_hat) == expected).all()
    assert (expected >= SCORED_PREFIX).any() and (expected < SCORED_PREFIX).any()
