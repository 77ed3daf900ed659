"""The candidate table helpers: top-K selection, the temperature softmax and the shared ranking loop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.attack.candidates import rank_by_similarity, softmax_rows, top_candidates


def test_top_candidates_and_softmax():
    index, values = top_candidates(np.array([[0.1, 0.9, 0.5], [0.3, 0.2, 0.8]]), 2)
    assert index.tolist() == [[1, 2], [2, 0]] and values.tolist() == [[0.9, 0.5], [0.8, 0.3]]
    w = softmax_rows(np.array([[0.0, np.log(3.0)]]), temperature=1.0)
    assert np.allclose(w, [[0.25, 0.75]])
    w = softmax_rows(np.array([[0.0, np.log(3.0)]]), temperature=0.5)  # sharper: 1 : 9
    assert np.allclose(w, [[0.1, 0.9]])


def test_ranking_loop_matches_one_block_and_reports_progress():
    rng = np.random.default_rng(4)
    similarities = rng.random((23, 9))
    seen = []
    blocks = rank_by_similarity(lambda a, b: similarities[a:b], 23, 9, 4, 0.5, chunk_size=5,
                                progress=lambda done, total, step: seen.append((done, total)))
    whole = rank_by_similarity(lambda a, b: similarities[a:b], 23, 9, 4, 0.5, chunk_size=100)
    assert (blocks[0] == whole[0]).all() and np.allclose(blocks[1], whole[1]) and np.allclose(blocks[2], whole[2])
    assert seen == [(5, 23), (10, 23), (15, 23), (20, 23), (23, 23)]
    expected = np.argsort(-similarities, axis=1)[:, :4]
    assert (np.sort(blocks[0], axis=1) == np.sort(expected, axis=1)).all()
    # the softmax runs over the whole pool: the kept weights are unchanged and the rest is the tail
    full = softmax_rows(similarities, 0.5)
    assert np.allclose(blocks[1], np.take_along_axis(full, blocks[0].astype(int), axis=1))
    assert np.allclose(blocks[2], 1 - blocks[1].sum(axis=1)) and (blocks[2] > 0).all()


def test_a_tiny_tail_keeps_its_relative_precision():
    similarities = np.array([[1.0, 0.0, 0.0, 0.0]])
    candidates, weights, tail = rank_by_similarity(lambda a, b: similarities[a:b], 1, 4, 1, 0.02, chunk_size=8)
    assert candidates.tolist() == [[0]]
    assert tail[0] == pytest.approx(3 * np.exp(-50.0), rel=1e-12)  # 1 - weights[0] would be 0 or noise


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


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 30), st.integers(1, 60), st.integers(0, 2**32 - 1), st.sampled_from([0.005, 0.05, 0.3, 2.0]))
def test_sorting_the_similarities_once_sorts_the_weights_at_every_temperature(n, m, seed, temperature):
    """What fit_temperature relies on: the softmax keeps the order of the similarities (ties and zeros included)."""
    rng = np.random.default_rng(seed)
    block = np.round(rng.random((n, m)), int(rng.integers(1, 4))).astype(np.float32).astype(np.float64)
    block[rng.random(n) < 0.2] = 0.0
    weights = softmax_rows(block, temperature)
    ascending = np.take_along_axis(weights, np.argsort(block, axis=1), axis=1)
    assert np.array_equal(ascending, np.sort(weights, axis=1))


def test_a_pool_the_machine_cannot_hold_is_refused_with_the_shortlist_that_fits():
    from cpa_core.attack.budget import BYTES_PER_CANDIDATE, check_pool_fits
    from cpa_core.common.errors import ConfigError

    gigabyte = 2**30
    check_pool_fits(10_000, 10_000, None, available=4 * gigabyte)  # 3.0 GB: fits
    check_pool_fits(30_000, 30_000, 100, available=4 * gigabyte)   # a shortlist: 96 MB
    check_pool_fits(0, 10**6, None, available=1)                   # nothing to rank
    with pytest.raises(ConfigError) as refused:
        check_pool_fits(30_000, 30_000, None, available=4 * gigabyte)
    message = str(refused.value)
    assert "30,000 documents against 30,000 candidates" in message and "26.8 GB" in message and "4.0 GB" in message
    # the advice fits in half the available memory, rounded down to one significant digit
    assert "--top-k 2000" in message and 30_000 * 2000 * BYTES_PER_CANDIDATE <= 2 * gigabyte
    with pytest.raises(ConfigError, match="Audit fewer documents"):
        check_pool_fits(10**9, 10, None, available=gigabyte)
