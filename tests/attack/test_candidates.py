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
    candidates, weights, tail, *_ = rank_by_similarity(lambda a, b: similarities[a:b], 1, 4, 1, 0.02, chunk_size=8)
    assert candidates.tolist() == [[0]]
    assert tail[0] == pytest.approx(3 * np.exp(-50.0), rel=1e-12)  # 1 - weights[0] would be 0 or noise


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


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(2, 12), st.integers(1, 11), st.integers(0, 2**32 - 1))
def test_the_ranking_counts_the_cut_candidates_tied_with_the_last_kept_one(n, m, k, seed):
    """Similarities with many ties (and whole rows tied): the ranking's cut ties and tail are those of cutting the
    full ranking, on the dense path and on the in-place path."""
    from cpa_core.attack.candidates import CandidateTable

    rng = np.random.default_rng(seed)
    similarities = rng.integers(0, 3, (n, m)).astype(np.float32).astype(np.float64)
    similarities[rng.random(n) < 0.3] = 1.0
    k = min(k, m)
    whole = rank_by_similarity(lambda a, b: similarities[a:b], n, m, None, 0.5, chunk_size=4)
    full = CandidateTable(np.arange(n).astype(str).astype(object), whole.candidates, whole.weights, np.full(n, m),
                          np.arange(m).astype(str).astype(object)).truncate(k)

    class Kernel:  # the in-place path: blocks written into the ranking's own buffers
        kernel, threads = True, 1

        def __call__(self, a, b):
            return similarities[a:b]

        def into(self, a, b, out):
            out[:] = similarities[a:b]

    for blocks in (lambda a, b: similarities[a:b], Kernel()):
        short = rank_by_similarity(blocks, n, m, k, 0.5, chunk_size=4)
        expected = full.cut_ties if k < m else np.zeros(n)
        assert short.cut_ties.tolist() == expected.tolist()
        assert short.cut_below.tolist() == (full.cut_below if k < m else np.zeros(n)).tolist()
        assert (short.cut_below + short.cut_ties == (m - k if k < m else 0)).all()
        assert np.allclose(short.tail_mass, full.tail_mass if k < m else 0.0)


def test_a_shortlist_of_a_shortlist_counts_the_candidates_cut_below_by_hand():
    """Weights (.4, .3, .3, .3): top-2 keeps .4, .3 and cuts two tied with the last kept (none below); top-1 of that
    cuts the listed .3 and the two cut ties, all now below .4 (3 below, mass .9); weights (.4, .3, .2, .1): top-3
    cuts one below (.1), top-1 of that three (.3, .2 and .1)."""
    from cpa_core.attack.candidates import CandidateTable

    table = CandidateTable(np.array(["a", "b"], dtype=object), np.tile(np.arange(4), (2, 1)),
                           np.array([[0.4, 0.3, 0.3, 0.3], [0.4, 0.3, 0.2, 0.1]]), np.array([4, 4]),
                           np.array(["p0", "p1", "p2", "p3"], dtype=object))
    two = table.truncate(2)
    assert two.cut_ties.tolist() == [2, 0] and two.cut_below.tolist() == [0, 2]
    assert two.tail_mass.tolist() == pytest.approx([0.0, 0.3])
    one = two.truncate(1)
    assert one.cut_ties.tolist() == [0, 0] and one.cut_below.tolist() == [3, 3]
    assert one.tail_mass.tolist() == pytest.approx([0.9, 0.6])
    three = table.truncate(3)
    assert three.cut_ties.tolist() == [1, 0] and three.cut_below.tolist() == [0, 1]
    assert three.truncate(1).cut_below.tolist() == [3, 3]
