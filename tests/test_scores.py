"""Nonconformity scores: hand-computed cases, ties, padding and monotonicity."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cpa_core.errors import ConfigError
from cpa_core.scores import SCORES, get_score


def scores(name, weights, pools=None):
    w = np.atleast_2d(np.array(weights, dtype=float))
    pools = np.full(w.shape[0], w.shape[1]) if pools is None else np.array(pools)
    return get_score(name).sorted_scores(w, pools)


def test_aps_hand_computed_with_ties():
    # s(y) = mass of every candidate at least as likely as y: ties enter together
    assert np.allclose(scores("aps", [0.5, 0.2, 0.2, 0.1]), [[0.5, 0.9, 0.9, 1.0]])
    assert np.allclose(scores("aps", [0.25, 0.25, 0.25, 0.25]), [[1.0, 1.0, 1.0, 1.0]])
    assert np.allclose(scores("aps", [0.4, 0.4, 0.1, 0.1]), [[0.8, 0.8, 1.0, 1.0]])


def test_rank_hand_computed_with_ties():
    assert scores("rank", [0.5, 0.2, 0.2, 0.1]).tolist() == [[1, 3, 3, 4]]
    assert scores("rank", [0.3, 0.3, 0.3, 0.1]).tolist() == [[3, 3, 3, 4]]
    # a ranking only: weights are minus the rank
    assert scores("rank", [-1, -2, -2, -4]).tolist() == [[1, 3, 3, 4]]


def test_probability_hand_computed():
    assert np.allclose(scores("probability", [0.5, 0.2, 0.2, 0.1]), [[0.5, 0.8, 0.8, 0.9]])


def test_padding_is_infinite_and_does_not_tie_with_zero_weights():
    out = scores("aps", [[0.7, 0.3, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]], pools=[2, 3])
    assert np.allclose(out[0], [0.7, 1.0, np.inf, np.inf])
    assert np.allclose(out[1], [1.0, 1.0, 1.0, np.inf])


def test_unknown_score_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown score 'foo'"):
        get_score("foo")


@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=30), st.sampled_from(sorted(SCORES)))
def test_scores_are_non_decreasing_and_tie_consistent(raw, name):
    w = np.sort(np.array(raw))[::-1]
    w = w / w.sum() if w.sum() > 0 else w
    out = scores(name, w)[0]
    assert (np.diff(out) >= -1e-12).all()
    for i in range(len(w) - 1):
        if w[i] == w[i + 1]:
            assert out[i] == out[i + 1]


@given(st.lists(st.floats(0.001, 1), min_size=2, max_size=30))
def test_aps_brute_force(raw):
    w = np.sort(np.array(raw))[::-1]
    w = w / w.sum()
    expected = [w[w >= w[j]].sum() for j in range(len(w))]
    assert np.allclose(scores("aps", w)[0], expected)


@given(st.lists(st.lists(st.sampled_from([0.0, 0.05, 0.1, 0.2, 0.25, 0.4]), min_size=3, max_size=3), min_size=1,
                max_size=8), st.sampled_from(sorted(SCORES)), st.data())
def test_truth_scores_from_the_unsorted_matrix_equal_the_sorted_path(rows, name, data):
    from cpa_core.candidates import top_candidates

    weights = np.array(rows, dtype=float)
    truth = np.array([data.draw(st.integers(0, 2)) for _ in rows])
    index, ranked = top_candidates(weights, None)
    sorted_scores = get_score(name).sorted_scores(ranked, np.full(len(rows), 3))
    position = np.argmax(index == truth[:, None], axis=1)
    expected = sorted_scores[np.arange(len(rows)), position]
    assert np.allclose(get_score(name).truth_scores(weights, truth), expected, atol=1e-12)
