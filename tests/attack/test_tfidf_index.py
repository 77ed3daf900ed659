"""The multithreaded similarity kernel gives exactly the results of the dense reference path: the same
shortlists (ties by increasing column, zero similarities included), bitwise weights, tails to rounding, and
the same certificates (a whole audit: tests/integration/test_tfidf_kernel_audit.py)."""


import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_release import sample_k2_fixture  # noqa: F401 (the fixture sample_k2)

from cpa_core.attack.attackers.tfidf import TfidfAttacker
from cpa_core.attack.candidates import canonical_order, rank_by_similarity, ranked_columns, softmax_rows
from cpa_core.attack.tfidf_index import SimilarityBlocks

TAIL_RTOL = 1e-12  # a sum of positive terms in another order: a few 1e-16 times log2(M), far below this


def tied_matrices(rng, n, m, vocabulary=12, density=0.15, empty_rows=3):
    """TF-IDF-like float32 queries and profiles with few distinct values (many tied similarities), duplicated
    profiles, and all-zero query and profile rows."""
    def matrix(rows):
        dense = (rng.random((rows, vocabulary)) < density) * rng.integers(1, 3, (rows, vocabulary))
        return sp.csr_matrix(dense.astype(np.float32))

    queries, profiles = matrix(n), matrix(m)
    queries = sp.csr_matrix(np.vstack([queries.toarray()[: n - empty_rows], np.zeros((empty_rows, vocabulary))])
                            .astype(np.float32))
    profiles = profiles.toarray()
    profiles[m // 2: m // 2 + 5] = profiles[1]  # exact duplicates
    profiles[-2:] = 0  # profiles with no word
    return queries, sp.csr_matrix(profiles)


def canonical(similarities, k):
    """The reference order, by brute force: stable sort by decreasing similarity."""
    order = np.array([sorted(range(len(row)), key=lambda j: (-row[j], j)) for row in similarities])
    return order if k is None else order[:, :k]


def both_paths(queries, profiles, k, temperature, chunk_size):
    kernel = SimilarityBlocks(queries, profiles.T.tocsr(), kernel=True, threads=2)
    dense = SimilarityBlocks(queries, profiles.T.tocsr(), kernel=False)
    assert kernel.kernel and not dense.kernel
    n, m = queries.shape[0], profiles.shape[0]
    return (rank_by_similarity(kernel, n, m, k, temperature, chunk_size),
            rank_by_similarity(dense, n, m, k, temperature, chunk_size), dense(0, n))


def assert_same(fast, reference):
    np.testing.assert_array_equal(fast[0], reference[0])
    np.testing.assert_array_equal(fast[1], reference[1])  # the same operations on the same values
    np.testing.assert_allclose(fast[2], reference[2], rtol=TAIL_RTOL, atol=0)
    np.testing.assert_array_equal(fast[3], reference[3])


@pytest.mark.parametrize("n, m, chunk_size", [(9, 13, 4), (57, 211, 16), (130, 700, 64)])
@pytest.mark.parametrize("temperature", [0.005, 0.1, 1.0])
def test_the_kernel_gives_the_dense_path_results(n, m, chunk_size, temperature):
    rng = np.random.default_rng(n * m)
    queries, profiles = tied_matrices(rng, n, m)
    for k in (1, 3, 20, m - 1, m, m + 5, None):  # 20 > the nonzeros of sparse rows; K = M; no cut
        fast, reference, similarities = both_paths(queries, profiles, k, temperature, chunk_size)
        assert_same(fast, reference)
        expected = canonical(similarities, k)
        np.testing.assert_array_equal(reference[0], expected)
        full = softmax_rows(similarities.astype(np.float64), temperature)
        np.testing.assert_array_equal(reference[1], np.take_along_axis(full, expected, axis=1))
        if k is not None and k < m:  # the tail: the cut mass below the last kept candidate; its ties (equal weights,
            left = full.copy()       # 0 for similarities whose exponentials underflow) are counted
            np.put_along_axis(left, expected, 0.0, axis=1)
            last = np.take_along_axis(full, expected[:, -1:], axis=1)
            tied = full == last
            np.testing.assert_array_equal(fast[3], tied.sum(axis=1) - np.take_along_axis(tied, expected, 1).sum(1))
            left[tied] = 0.0
            np.testing.assert_allclose(fast[2], np.sort(left, axis=1).sum(axis=1), rtol=TAIL_RTOL)
        else:
            assert not fast[2].any()


def test_the_kernel_product_is_scipy_product_bitwise():
    rng = np.random.default_rng(1)
    queries = sp.random(200, 300, density=0.05, format="csr", dtype=np.float32, random_state=rng)
    profiles = sp.random(900, 300, density=0.05, format="csr", dtype=np.float32, random_state=rng)
    kernel = SimilarityBlocks(queries, profiles.T.tocsr(), kernel=True, threads=2)
    reference = SimilarityBlocks(queries, profiles.T.tocsr(), kernel=False)
    for start, stop in ((0, 200), (17, 64), (199, 200)):
        block = np.full((stop - start, 900), 7.0, dtype=np.float32)  # ``into`` overwrites what was there
        kernel.into(start, stop, block)
        np.testing.assert_array_equal(block, reference(start, stop))
        np.testing.assert_array_equal(kernel(start, stop), reference(start, stop))


def test_all_zero_rows_keep_the_lowest_columns_with_uniform_weights():
    queries = sp.csr_matrix((3, 4), dtype=np.float32)  # no word in common with anything
    profiles = sp.csr_matrix(np.eye(5, 4, dtype=np.float32))
    fast, reference, _ = both_paths(queries, profiles, 3, 0.1, 2)
    assert_same(fast, reference)
    assert fast[0].tolist() == [[0, 1, 2]] * 3
    np.testing.assert_allclose(fast[1], 0.2)
    assert fast[2].tolist() == [0.0] * 3 and fast[3].tolist() == [2] * 3  # the two cut ones tie with the kept


def test_ranked_columns_breaks_ties_by_column_when_the_cut_splits_them():
    values = np.array([[0.5, 0.2, 0.5, 0.2, 0.2, 0.9], [0, 0, 0, 0, 0, 0.0]], dtype=np.float32)
    assert ranked_columns(values, 4).tolist() == [[5, 0, 2, 1], [0, 1, 2, 3]]
    assert ranked_columns(values, None).tolist() == [[5, 0, 2, 1, 3, 4], [0, 1, 2, 3, 4, 5]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, -0.0, 0.25, -0.25, 1.0, 3e-39, -3e-39, np.inf, -np.inf, 0.5, 1e30,
                                          -1e30, float(np.float32(0.1))]), min_size=1, max_size=12),
                min_size=1, max_size=4).filter(lambda rows: len({len(r) for r in rows}) == 1))
def test_the_canonical_order_is_the_stable_sort_of_the_values_reversed(rows):
    values = np.array(rows, dtype=np.float32)
    expected = np.argsort(-values, axis=1, kind="stable")
    assert canonical_order(values).tolist() == expected.tolist()
    assert canonical_order(values.astype(np.float64)).tolist() == expected.tolist()  # float64: the stable sort
    with_nan = values.copy()
    with_nan[0, 0] = np.nan
    assert canonical_order(with_nan).tolist() == np.argsort(-with_nan, axis=1, kind="stable").tolist()


def test_the_canonical_order_of_a_wide_block_of_ties_is_by_column():
    values = np.random.default_rng(3).integers(0, 4, size=(50, 10_000)).astype(np.float32) / 4
    np.testing.assert_array_equal(canonical_order(values), np.argsort(-values, axis=1, kind="stable"))


@pytest.mark.parametrize("top_k", [1, 10, None])
def test_the_attack_table_is_the_same_with_and_without_the_kernel(sample_k2, top_k):
    documents, registry, level = sample_k2
    ids, texts = documents.frame["doc_id"].tolist(), documents.frame["text"].tolist()
    tables = [TfidfAttacker(top_k=top_k, temperature=0.05, chunk_size=97, kernel=kernel)
              .attack(ids, texts, registry, level) for kernel in (True, False)]
    fast, reference = tables
    np.testing.assert_array_equal(fast.candidates, reference.candidates)
    np.testing.assert_array_equal(fast.weights, reference.weights)
    np.testing.assert_array_equal(fast.pool_sizes, reference.pool_sizes)
    np.testing.assert_allclose(fast.tail_mass, reference.tail_mass, rtol=TAIL_RTOL, atol=0)
    assert fast.queries == reference.queries
