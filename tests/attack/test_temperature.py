"""The softmax temperature ``auto``: the grid temperature with the smallest mean certified set (brute force over the
grid) on a tuning fold fixed by the documents' ids, which the audit then leaves out of calibration; through an
audit, the choice is recorded and used, and the split protocol's test labels are never read."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from tables import LEVEL, toy_attacker

from cpa_core.attack.candidates import softmax_rows
from cpa_core.attack.temperature import (
    AUTO,
    DEFAULT_TEMPERATURE,
    FIT_BLOCK_ENTRIES,
    TEMPERATURE_GRID,
    TUNING_MAX,
    fit_block_rows,
    fit_temperature,
    tuning_fold,
    tuning_size,
)
from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.pipeline import run_audit
from cpa_core.common.errors import ConfigError


def test_the_grid_and_the_default():
    assert DEFAULT_TEMPERATURE == AUTO == "auto"
    assert len(TEMPERATURE_GRID) == 11 and TEMPERATURE_GRID[0] == pytest.approx(0.002)
    assert TEMPERATURE_GRID[-1] == pytest.approx(2.0)
    ratios = np.array(TEMPERATURE_GRID[1:]) / np.array(TEMPERATURE_GRID[:-1])
    assert ratios == pytest.approx(np.full(10, 1000 ** (1 / 10)))  # geometric: a constant ratio (about 2)


@pytest.mark.parametrize("chunk_size, n_registry, rows", [
    (512, 400, 512), (512, 10**6, 4), (512, 2**22, 1), (512, 2**23, 1), (512, 0, 512), (3, 2**20, 3)])
def test_a_block_holds_at_most_the_fit_block_entries(chunk_size, n_registry, rows):
    assert FIT_BLOCK_ENTRIES == 2**22
    assert fit_block_rows(chunk_size, n_registry) == rows


def test_the_temperature_gives_the_smallest_mean_certified_set_over_the_grid():
    from cpa_core.attack.temperature import FIT_CONFIDENCE
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
    order = rng.permutation(150)  # the order of the documents does not matter
    assert fit_temperature(lambda a, b: similarities[order][a:b], 150, truth[order], chunk_size=7) == chosen
    assert fit_temperature(lambda a, b: similarities[a:b], 150, np.full(150, -1), chunk_size=50) is None


def test_when_every_temperature_gives_the_same_sets_the_largest_wins():
    similarities = np.random.default_rng(0).random((30, 1))  # one candidate: every set has one member
    assert fit_temperature(lambda a, b: similarities[a:b], 30, np.zeros(30, dtype=int), chunk_size=7,
                           grid=(0.1, 0.5, 2.0)) == 2.0


@pytest.mark.parametrize("n, size", [(0, 0), (1, 0), (2, 1), (9, 2), (10, 2), (100, 20), (1000, 200), (5000, 200)])
def test_the_tuning_fold_is_a_fifth_of_the_labelled_documents_at_most_two_hundred(n, size):
    assert TUNING_MAX == 200 and tuning_size(n) == size


def test_the_tuning_fold_depends_on_the_ids_of_the_labelled_documents_only():
    ids = [f"D{i:04d}" for i in range(400)]
    labelled = np.arange(400) % 3 != 0
    fold = tuning_fold(ids, labelled)
    assert len(fold) == tuning_size(int(labelled.sum())) and labelled[fold].all()
    draws = {i: int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8, person=b"cpa-tuning").digest(), "big")
             for i in ids}
    lowest = sorted((draws[ids[r]], ids[r]) for r in np.flatnonzero(labelled))[:len(fold)]
    assert sorted(ids[r] for r in fold) == sorted(i for _, i in lowest)
    order = np.random.default_rng(5).permutation(400)  # a set of ids: the same documents in any order
    shuffled = tuning_fold([ids[i] for i in order], labelled[order])
    assert sorted(ids[order[r]] for r in shuffled) == sorted(ids[r] for r in fold)


def test_auto_fits_on_the_tuning_fold_records_it_and_leaves_it_out_of_calibration(sample_paths):
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(sample_paths["documents"]), load_registry(sample_paths["registry"])
    level = LEVEL.__class__("K2", ("age_band", "gender", "occupation", "city", "keywords", "events"))
    attacker = TfidfAttacker()  # the default temperature: auto
    config = AuditConfig(knowledge=level, attacker=toy_attacker("tfidf"), confidences=(0.9,))
    result = run_audit(documents, registry, attacker, config)
    learned = result.inputs["learned"]
    frame = documents.frame
    labelled = frame["identity_id"].notna().to_numpy()
    fold = tuning_fold(frame["doc_id"].tolist(), labelled)
    assert learned["tuning_documents"] == [frame["doc_id"].iloc[i] for i in fold] and len(fold) == 200
    assert learned["temperature"] in TEMPERATURE_GRID and attacker.effective_temperature == learned["temperature"]
    # the fold's documents are audited but never calibrate: the members are the other labelled documents
    tuned = np.isin(result.test_split.table.doc_ids.astype(str), learned["tuning_documents"])
    assert not (result.members & tuned).any() and result.members.sum() == labelled.sum() - 200
    assert len(result.calibration_split) == labelled.sum() - 200
    # the choice is what fit_temperature makes on the fold alone
    reference = TfidfAttacker()
    _, similarities = reference.similarities([frame["doc_id"].iloc[i] for i in fold],
                                             [frame["text"].iloc[i] for i in fold], registry, level)
    column = {ident: i for i, ident in enumerate(registry.ids.tolist())}
    truth = np.array([column.get(frame["identity_id"].iloc[i], -1) for i in fold])
    assert learned["temperature"] == fit_temperature(similarities, len(fold), truth, reference.chunk_size)
    with pytest.raises(ConfigError, match="temperature 'auto'"):
        TfidfAttacker().attack(["d"], ["text"], registry, level)  # outside an audit: nothing to learn from


def test_under_the_split_protocol_auto_tunes_on_calibration_documents_only(sample_paths):
    from cpa_core.attack.attackers.tfidf import TfidfAttacker
    from cpa_core.io.tables import load_documents, load_registry

    documents, registry = load_documents(sample_paths["documents"]), load_registry(sample_paths["registry"])
    level = LEVEL.__class__("K2", ("age_band", "gender", "occupation", "city", "keywords", "events"))
    config = AuditConfig(knowledge=level, attacker=toy_attacker("tfidf"), confidences=(0.9,), protocol="split",
                         n_cal=300, n_test=300, seed=3)
    result = run_audit(documents, registry, TfidfAttacker(), config)
    tuning = set(result.inputs["learned"]["tuning_documents"])
    assert len(tuning) == 60  # a fifth of the 300 calibration documents
    assert not tuning & set(result.test_split.table.doc_ids.tolist())  # test labels are never read
    assert not tuning & set(result.calibration_split.table.doc_ids.tolist())
    assert len(result.calibration_split) == 240


def test_a_fold_too_small_for_a_threshold_takes_the_likeliest_temperature():
    from cpa_core.attack.temperature import likeliest_temperature

    rng = np.random.default_rng(5)
    similarities = rng.random((8, 12))
    truth = similarities.argmax(axis=1)
    truth[:3] = rng.integers(0, 12, 3)
    chosen = fit_temperature(lambda a, b: similarities[a:b], 8, truth, chunk_size=3)  # 8 documents: none at 90 %
    assert chosen == likeliest_temperature(lambda a, b: similarities[a:b], 8, truth, chunk_size=3)

    def loss(t):  # brute force: minus the log of the truth's softmax weight
        return -np.log(softmax_rows(similarities, t)[np.arange(8), truth]).sum()

    losses = {t: loss(t) for t in TEMPERATURE_GRID}
    assert losses[chosen] == pytest.approx(min(losses.values()), rel=1e-9)


@pytest.mark.parametrize("prefix", [1, 2, 4, 7])
def test_scoring_a_prefix_gives_the_choice_of_the_whole_rows(prefix, monkeypatch):
    """Rows scored on their first candidates (the mass of the others below them, their ties at the cut counted,
    deep truths and sets reaching the cut scored whole) choose what the whole rows choose, with ties and fully tied
    rows in the data."""
    from cpa_core.attack import temperature

    rng = np.random.default_rng(prefix)
    similarities = np.round(rng.random((160, 12)), 1)  # many ties, across every cut
    similarities[:10] = 0.5  # fully tied rows
    truth = np.where(rng.random(160) < 0.6, similarities.argmax(axis=1), rng.integers(0, 12, 160))
    truth[::17] = -1
    grid = TEMPERATURE_GRID[::2]
    whole = fit_temperature(lambda a, b: similarities[a:b], 160, truth, chunk_size=40, grid=grid)
    monkeypatch.setattr(temperature, "SCORED_PREFIX", prefix)
    calls = []

    def blocks(a, b):
        calls.append((a, b))
        return similarities[a:b]

    assert fit_temperature(blocks, 160, truth, chunk_size=40, grid=grid) == whole
    assert len(calls) >= 4  # every block read once, and again only where a set reaches the cut
