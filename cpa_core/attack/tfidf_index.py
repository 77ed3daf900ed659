"""The TF-IDF index of the profiles: their sparse vectors, the similarity of queries to them in blocks, and the
explainer of a term match.

Each block's product runs on every core with ``sparse_dot_topn``'s kernel (:class:`SimilarityBlocks`);
``kernel=False`` keeps scipy's single-threaded product, the reference the kernel's results are tested against.
The TF-IDF attacker (:mod:`cpa_core.attack.attackers.tfidf`) ranks by it; any retrieval attacker that cannot
explain its matches otherwise is explained by it (:meth:`cpa_core.attack.base.RetrievalAttacker.explainer`). Its term
explanations (:class:`TermProducts`) serve every index whose score is a sum of per-term products, BM25's too.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Sequence

import numpy as np

from cpa_core.attack.explainers import TermExplainer
from cpa_core.common.errors import ConfigError

KERNEL = True
"""Whether the TF-IDF attacker computes similarities with ``sparse_dot_topn``'s multithreaded kernel (the
default of :class:`TfidfAttacker` and :meth:`TfidfIndex.similarities`; ``False``: scipy's product)."""


def kernel_threads() -> int:
    """The threads of the similarity kernel: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class SimilarityBlocks:
    """The block function of :func:`~cpa_core.attack.candidates.rank_by_similarity`: cosine similarities of query rows
    ``start`` to ``stop`` with every profile, as a dense ``float32`` block.

    With ``kernel`` the product runs on ``threads`` cores (``sparse_dot_topn.sp_matmul``) and the block is written
    into the ranking's reused array (``into``); without it, scipy's single-threaded product. Both give the same
    values bitwise (the same sums of products, in the same order; tested).

    Why the full product and not ``sp_matmul_topn``: the weights are a softmax over *every* profile and the tail
    mass is the sum over the profiles left out, so each row's every similarity is needed (TF-IDF rows share
    common words with nearly every profile: the product is dense); a top-n product would have to be followed by
    a second full one. The exact top-K, with its canonical ties, is then taken from the block
    (:func:`~cpa_core.attack.candidates.ranked_columns`).
    """

    def __init__(self, queries, profiles_t, kernel: bool = KERNEL, threads: int | None = None):
        self.queries, self.profiles_t = queries, profiles_t
        self.threads = kernel_threads() if threads is None else max(1, int(threads))
        if kernel:
            try:
                import sparse_dot_topn  # noqa: F401
            except ImportError:  # an installation without it: scipy's product, the same results
                kernel = False
        self.kernel = kernel

    def product(self, start: int, stop: int):
        rows = self.queries[start:stop]
        if not self.kernel:
            return rows @ self.profiles_t
        from sparse_dot_topn import sp_matmul

        wide = (stop - start) * self.profiles_t.shape[1] >= np.iinfo(np.int32).max  # indices of the product
        return sp_matmul(rows, self.profiles_t, n_threads=self.threads, idx_dtype=np.int64 if wide else None)

    def __call__(self, start: int, stop: int) -> np.ndarray:
        return self.product(start, stop).toarray()

    def into(self, start: int, stop: int, out: np.ndarray) -> None:
        out.fill(0)
        self.product(start, stop).toarray(out=out)  # adds into ``out``


class TermProducts:
    """Term explanations of an index whose score of a query for a profile is a sum over terms, the query's weight of
    each term times the profile's (``transform(queries) @ profiles_.T``): TF-IDF cosine (:class:`TfidfIndex`), BM25
    (:class:`~cpa_core.attack.attackers.lexical_fusion.Bm25Index`). A term's contribution to a match is then exactly
    its product, and the contributions add up to the score.

    Subclasses define ``transform`` and set ``vectorizer`` (scikit-learn's: its preprocessor and token pattern turn a
    text's tokens into terms) and, when fitted, ``profiles_`` (``profiles x terms``, CSR) and ``terms_``.
    """

    vectorizer: Any
    profiles_: Any
    terms_: np.ndarray

    def transform(self, texts: Sequence[str]):
        raise NotImplementedError

    def term_weights(self, query: str, candidate_rows: Sequence[int]) -> dict[str, float]:
        """Each term's contribution to the score of the query for the candidates (summed over them), for the
        terms they share; English stop words are left out (they still count in the attack)."""
        return self.term_weights_batch([query], [candidate_rows])[0]

    def term_weights_batch(self, queries: Sequence[str], candidate_rows: Sequence[Sequence[int]]
                           ) -> list[dict[str, float]]:
        """:meth:`term_weights` of many queries: one transform and two sparse products for all of them."""
        from scipy import sparse
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        n_profiles = self.profiles_.shape[0]
        pairs = [(i, r) for i, rows in enumerate(candidate_rows) for r in rows if 0 <= r < n_profiles]
        if not queries:
            return []
        picks = sparse.csr_matrix((np.ones(len(pairs), dtype=np.float32),
                                   ([i for i, _ in pairs], [r for _, r in pairs])), shape=(len(queries), n_profiles))
        contributions = self.transform(queries).multiply(picks @ self.profiles_).tocsr()
        out = []
        for i in range(len(queries)):
            start, stop = contributions.indptr[i], contributions.indptr[i + 1]
            terms = self.terms_[contributions.indices[start:stop]]
            out.append({str(term): float(value) for term, value in zip(terms, contributions.data[start:stop])
                        if value > 0 and str(term) not in ENGLISH_STOP_WORDS})
        return out

    def summed_similarity(self, texts: Sequence[str], candidate_rows: Sequence[int]) -> np.ndarray:
        """Each text's score for the candidates' profiles, summed over them (what the term weights add up to)."""
        n_profiles = self.profiles_.shape[0]
        rows = [r for r in candidate_rows if 0 <= r < n_profiles]
        if not rows or not len(texts):
            return np.zeros(len(texts))
        return np.asarray(self.transform(texts) @ self.profiles_[rows].sum(axis=0).T, dtype=np.float64).reshape(-1)

    def explainer(self) -> TermExplainer:
        """Evidence spans of a query: its tokens as this index normalises them (lower case, accents stripped),
        weighted by :meth:`term_weights`; the clues of a ``direct_plus_clues`` query weigh what leaving each out
        of the query takes from :meth:`summed_similarity`."""
        normalize = functools.lru_cache(maxsize=1 << 16)(self.vectorizer.build_preprocessor())  # tokens repeat
        return TermExplainer(self.term_weights, normalize, self.vectorizer.token_pattern,
                             similarity=self.summed_similarity, batch_weights=self.term_weights_batch)


class TfidfIndex(TermProducts):
    """A TF-IDF index over profile texts: search and term explanations."""

    def __init__(self, max_features: int = 50_000, ngram_max: int = 1, min_df: int | float = 1):
        from sklearn.feature_extraction.text import TfidfVectorizer  # imported on use: keeps the CLI quick

        self.vectorizer = TfidfVectorizer(max_features=max_features, ngram_range=(1, ngram_max), min_df=min_df,
                                          sublinear_tf=True, strip_accents="unicode", dtype=np.float32)

    def fit(self, profiles: Sequence[str]) -> "TfidfIndex":
        try:
            self.profiles_ = self.vectorizer.fit_transform(profiles).tocsr()
        except ValueError as error:  # empty vocabulary, min_df above the number of profiles, ...
            raise ConfigError(f"the TF-IDF attacker cannot index the profile texts: {error}") from None
        self.terms_ = self.vectorizer.get_feature_names_out()
        return self

    def transform(self, texts: Sequence[str]):
        return self.vectorizer.transform(texts).tocsr()

    def similarities(self, queries, kernel: bool = KERNEL, threads: int | None = None) -> SimilarityBlocks:
        """The block function of :func:`~cpa_core.attack.candidates.rank_by_similarity` over these query rows."""
        return SimilarityBlocks(queries.tocsr(), self.profiles_.T.tocsr(), kernel, threads)
