"""Fused lexical retrieval attacker: three lexical rankers of the registry, each standardised per document and
averaged, then a temperature softmax over the pool.

A competent adversary does not bet on one similarity. For each released document this attacker scores every
profile three ways:

- **words**: TF-IDF cosine over word 1- and 2-grams (:class:`~cpa_core.attack.tfidf_index.TfidfIndex`, the
  TF-IDF attacker's index with ``ngram_max=2``);
- **characters**: TF-IDF cosine over character 3- to 5-grams within words (scikit-learn's ``char_wb`` analyser,
  :class:`CharIndex`): it matches inflections, compounds and misspellings that whole words miss;
- **BM25**: Okapi BM25 of the profile for the document's distinct words (:class:`Bm25Index`; the per-term scores
  of every profile are ``bm25s``'s sparse index, Lucene variant, ``k1`` and ``b`` declared), which saturates
  repeated words and normalises the profile's length.

The three scales are not comparable (cosines in [0, 1], BM25 unbounded), so each ranker's scores of a document
are **standardised over the whole registry**: ``z = (s - mean) / standard deviation`` of that document's scores of
every profile (a document that matches every profile alike, or none, gets ``z = 0`` from that ranker). The fused
score is the **equal-weight mean of the three z-scores**, a rule fixed in advance: nothing is fitted on the
labelled documents' identities, so every document stays exchangeable with the others (METHOD, section 5). The
weights are ``softmax(fused / T)`` over the pool; ``T`` is declared or ``auto`` (chosen on a tuning fold, as for
the TF-IDF attacker, :mod:`cpa_core.attack.temperature`). A z-score is in units of the registry's spread, so the
fused score is divided by :data:`Z_SCALE` before the softmax: the ``auto`` grid (0.002 to 2) then spans the same
range of peakedness as it does for cosines.

The engine is the TF-IDF attacker's: each block of documents is scored against every profile by the three sparse
products, each on every core with ``sparse_dot_topn``'s kernel (``kernel=False``: scipy's products, the same
values), standardised and averaged within the block, and only the top-K of each block is kept; memory stays at a
few ``chunk_size x registry`` arrays. The attacker keeps no state from one document to the next, so it runs on a
Dask cluster like the TF-IDF attacker (:mod:`cpa_core.attack.engine`). Evidence spans come from the word index
(:meth:`~cpa_core.attack.tfidf_index.TfidfIndex.explainer`): the words shared with the candidates that weigh most
in the word ranker.

Declared in TOML as ``[attacker.lexical_fusion]`` (every parameter optional)::

    [attacker]
    name = "lexical_fusion"

    [attacker.lexical_fusion]
    temperature = "auto"     # or a number
    max_features = 50000     # word 1-2-gram vocabulary
    ngram_max = 2            # longest word n-gram
    char_ngram_min = 3       # character n-grams within words, from ...
    char_ngram_max = 5       # ... to
    min_df = 1               # words and character n-grams found in fewer profiles are ignored
    k1 = 1.5                 # BM25 term-frequency saturation
    b = 0.75                 # BM25 length normalisation
    chunk_size = 512         # documents per similarity block
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from cpa_core.attack.attackers.tfidf import TEMPERATURE, check_word_settings
from cpa_core.attack.base import ClueExtractor, RetrievalAttacker
from cpa_core.attack.explainers import Explainer
from cpa_core.attack.spec import AttackerSpec
from cpa_core.attack.temperature import DEFAULT_TEMPERATURE
from cpa_core.attack.tfidf_index import KERNEL, SimilarityBlocks, TermProducts, TfidfIndex, kernel_threads
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Registry

RANKERS = ("words", "characters", "bm25")
"""The fused rankers, in the order of their blocks."""

Z_SCALE = 10.0
"""The fused score is the mean z-score divided by this: ``softmax(mean z / (Z_SCALE * T))``. A fixed unit, never
fitted: a z-score of 10 (a profile ten standard deviations above the registry) is worth what a cosine of 1 is to
the TF-IDF attacker, so that the temperature grid of ``auto`` covers both attackers alike."""


def char_wb_ngrams(word: str, low: int, high: int) -> list[str]:
    """The character n-grams of one word as scikit-learn's ``char_wb`` analyser cuts them: the word padded with a
    space on each side, every n-gram of ``low`` to ``high`` characters, and a padded word shorter than an n-gram
    once, whole (then no longer n-gram)."""
    padded = f" {word} "
    size = len(padded)
    grams = []
    for n in range(low, high + 1):
        if size <= n:
            grams.append(padded)
            break
        grams.extend(padded[i:i + n] for i in range(size - n + 1))
    return grams


class SplitWords:
    """A text's whitespace-separated words after ``preprocess`` (lower case, accents stripped): the words ``char_wb``
    cuts into n-grams (a class, not a lambda, so that a fitted index can be pickled)."""

    def __init__(self, preprocess):
        self.preprocess = preprocess

    def __call__(self, text: str) -> list[str]:
        return self.preprocess(text).split()


class CharIndex:
    """TF-IDF over character n-grams within words: scikit-learn's ``TfidfVectorizer(analyzer="char_wb")`` with the
    word TF-IDF's settings (lower case, accents stripped, sublinear tf, smoothed idf, L2 norm), computed faster.

    A text's ``char_wb`` n-grams are those of its words (whitespace-separated, after lower-casing and stripping
    accents) taken one by one, so the n-gram counts are the word counts times each word's n-gram counts: one sparse
    product, each distinct word cut into n-grams once (scikit-learn cuts every occurrence, in Python). The vocabulary
    is sorted as scikit-learn's is, so the vectors are the same (tested).
    """

    def __init__(self, ngram_min: int = 3, ngram_max: int = 5, min_df: int | float = 1):
        from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer, TfidfVectorizer

        self.ngram_range = (ngram_min, ngram_max)
        self.min_df = min_df
        self.words = CountVectorizer(analyzer=SplitWords(TfidfVectorizer(strip_accents="unicode").build_preprocessor()),
                                     dtype=np.float32)
        self.transformer = TfidfTransformer(sublinear_tf=True)

    def _grams(self, words: Sequence[str], vocabulary: dict[str, int] | None):
        """The ``words x n-grams`` count matrix of these words (n-grams outside ``vocabulary`` dropped; ``None``: a new
        vocabulary, its n-grams in first-seen order) and the vocabulary."""
        from scipy import sparse

        grow = vocabulary is None
        vocabulary = {} if grow else vocabulary
        rows, columns = [], []
        for row, word in enumerate(words):
            for gram in char_wb_ngrams(word, *self.ngram_range):
                column = vocabulary.setdefault(gram, len(vocabulary)) if grow else vocabulary.get(gram)
                if column is not None:
                    rows.append(row)
                    columns.append(column)
        matrix = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, columns)),
                                   shape=(len(words), len(vocabulary)))
        matrix.sum_duplicates()
        return matrix, vocabulary

    def fit(self, profiles: Sequence[str]) -> "CharIndex":
        try:
            counts_by_word = self.words.fit_transform(profiles).tocsr()
        except ValueError as error:  # no word at all
            raise ConfigError(f"the lexical fusion attacker cannot index the profile texts: {error}") from None
        words = self.words.get_feature_names_out().tolist()
        grams, vocabulary = self._grams(words, None)
        counts = (counts_by_word @ grams).tocsc()
        n = counts.shape[0]
        frequency = np.diff(counts.indptr)  # profiles holding each n-gram (canonical: no explicit zeros)
        least = self.min_df if isinstance(self.min_df, (int, np.integer)) else self.min_df * n
        names = list(vocabulary)
        keep = sorted(np.flatnonzero(frequency >= least).tolist(), key=names.__getitem__)  # scikit-learn's order
        if not keep:
            raise ConfigError("the lexical fusion attacker cannot index the profile texts: no character n-gram is "
                              f"found in at least min_df={self.min_df} profiles")
        self.vocabulary_ = {names[c]: i for i, c in enumerate(keep)}
        self.word_grams_ = (grams.tocsc()[:, keep]).tocsr()  # the profiles' words, cut once
        self.word_index_ = {word: i for i, word in enumerate(words)}
        self.profiles_ = self.transformer.fit_transform(counts[:, keep].tocsr()).astype(np.float32).tocsr()
        return self

    def counts(self, texts: Sequence[str]):
        """The texts' n-gram counts over the fitted vocabulary (float32, as scikit-learn counts them)."""
        from scipy import sparse
        from sklearn.feature_extraction.text import CountVectorizer

        words = CountVectorizer(analyzer=self.words.analyzer, dtype=np.float32)
        try:
            by_word = words.fit_transform(texts).tocsc()
        except ValueError:  # no text has a word
            return sparse.csr_matrix((len(texts), len(self.vocabulary_)), dtype=np.float32)
        names = words.get_feature_names_out().tolist()
        known = np.array([self.word_index_.get(word, -1) for word in names], dtype=np.int64)
        seen, new = np.flatnonzero(known >= 0), np.flatnonzero(known < 0)
        total = by_word[:, seen] @ self.word_grams_[known[seen]]
        if new.size:
            grams, _ = self._grams([names[i] for i in new], self.vocabulary_)
            total = total + by_word[:, new] @ grams
        return total.tocsr().astype(np.float32)

    def transform(self, texts: Sequence[str]):
        return self.transformer.transform(self.counts(texts)).astype(np.float32).tocsr()

    def similarities(self, queries, kernel: bool = KERNEL, threads: int | None = None) -> SimilarityBlocks:
        return SimilarityBlocks(queries.tocsr(), self.profiles_.T.tocsr(), kernel, threads)


class Bm25Index(TermProducts):
    """Okapi BM25 of every profile for a query's distinct words.

    ``score(q, p) = sum over the distinct words t of q of idf(t) * tf(t, p) / (tf(t, p) + k1 * (1 - b + b * |p| /
    avgdl))`` with ``idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))`` (Lucene's variant): ``N`` profiles,
    ``df(t)`` of them holding ``t``, ``|p|`` the profile's words, ``avgdl`` their mean. Words are the word TF-IDF's
    tokens (lower case, accents stripped, two or more word characters). The per-word scores of every profile are
    ``bm25s``'s eager index, a sparse ``profiles x words`` matrix; a block of queries is then one sparse product of
    their distinct-word indicators with it. A word counts once however often the document repeats it (Robertson's
    query-term saturation with ``k3 = 0``): a released document is a long query, and its repeated common words must
    not outweigh rarer evidence. A score is a sum of per-word products, so the index explains a match word by word
    (:class:`~cpa_core.attack.tfidf_index.TermProducts`: each shared word's BM25 contribution).
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75):
        from sklearn.feature_extraction.text import CountVectorizer

        self.k1, self.b = k1, b
        self.vectorizer = CountVectorizer(strip_accents="unicode", dtype=np.float32)

    def fit(self, profiles: Sequence[str]) -> "Bm25Index":
        import bm25s
        from scipy import sparse

        try:
            counts = self.vectorizer.fit_transform(profiles).tocsr()
        except ValueError as error:
            raise ConfigError(f"BM25 cannot index the profile texts: {error}") from None
        counts.sort_indices()
        tokens = [np.repeat(counts.indices[a:z], counts.data[a:z].astype(np.int64)).tolist()
                  for a, z in zip(counts.indptr[:-1], counts.indptr[1:])]
        model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        model.index((tokens, dict(self.vectorizer.vocabulary_)), create_empty_token=False, show_progress=False)
        scores = model.scores
        matrix = sparse.csc_matrix((scores["data"], scores["indices"], scores["indptr"]),
                                   shape=(counts.shape[0], counts.shape[1]))
        self.profiles_ = matrix.astype(np.float32).tocsr()
        self.profiles_.sort_indices()
        self.terms_ = self.vectorizer.get_feature_names_out()
        return self

    def transform(self, texts: Sequence[str]):
        """Each text's distinct words (indicators over the vocabulary)."""
        words = self.vectorizer.transform(texts).tocsr()
        words.data[:] = 1.0
        return words

    def similarities(self, queries, kernel: bool = KERNEL, threads: int | None = None) -> SimilarityBlocks:
        return SimilarityBlocks(queries.tocsr(), self.profiles_.T.tocsr(), kernel, threads)


def check_bm25_settings(k1: float, b: float) -> None:
    """BM25's ``k1`` and ``b``, checked alike by every attacker that declares them."""
    if not k1 >= 0 or not 0 <= b <= 1:
        raise ConfigError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, found k1={k1}, b={b}")


def standardised(block: np.ndarray) -> np.ndarray:
    """Each row's z-scores (``float64``): minus the row mean, over the row's standard deviation (population); a row
    whose entries are all equal is all zeros."""
    values = np.asarray(block, dtype=np.float64)
    z = values - values.mean(axis=1, keepdims=True)
    spread = np.sqrt(np.mean(z * z, axis=1, keepdims=True))
    flat = (values.max(axis=1) == values.min(axis=1)) if values.shape[1] else np.ones(values.shape[0], dtype=bool)
    np.divide(z, spread, out=z, where=~flat[:, None])
    z[flat] = 0.0
    return z


class FusedBlocks:
    """The block function of :func:`~cpa_core.attack.candidates.rank_by_similarity` for the fused score: each ranker's
    block (:class:`~cpa_core.attack.tfidf_index.SimilarityBlocks`), standardised per row (:func:`standardised`),
    averaged with equal weights and divided by :data:`Z_SCALE`, as ``float32``. ``into`` writes the same values into
    the ranking's reused array, so the kernel's path and scipy's rank the same numbers."""

    def __init__(self, parts: Sequence[SimilarityBlocks], threads: int | None = None):
        self.parts = tuple(parts)
        self.kernel = all(part.kernel for part in self.parts)
        self.threads = kernel_threads() if threads is None else max(1, int(threads))

    def fused(self, start: int, stop: int) -> np.ndarray:
        total = None
        for part in self.parts:
            z = standardised(part(start, stop))
            total = z if total is None else np.add(total, z, out=total)
        total /= len(self.parts) * Z_SCALE
        return total.astype(np.float32)

    def __call__(self, start: int, stop: int) -> np.ndarray:
        return self.fused(start, stop)

    def into(self, start: int, stop: int, out: np.ndarray) -> None:
        out[...] = self.fused(start, stop)


class FusionIndex:
    """The three rankers' indices of the profiles (:data:`RANKERS`)."""

    def __init__(self, max_features: int = 50_000, ngram_max: int = 2, char_ngram_min: int = 3,
                 char_ngram_max: int = 5, min_df: int | float = 1, k1: float = 1.5, b: float = 0.75):
        self.words = TfidfIndex(max_features, ngram_max, min_df)
        self.characters = CharIndex(char_ngram_min, char_ngram_max, min_df)
        self.bm25 = Bm25Index(k1, b)

    @property
    def indices(self) -> tuple:
        return self.words, self.characters, self.bm25

    def fit(self, profiles: Sequence[str]) -> "FusionIndex":
        profiles = list(profiles)
        for index in self.indices:
            index.fit(profiles)
        return self

    def transform(self, texts: Sequence[str]) -> tuple:
        return tuple(index.transform(texts) for index in self.indices)

    def similarities(self, queries: tuple, kernel: bool = KERNEL, threads: int | None = None) -> FusedBlocks:
        return FusedBlocks([index.similarities(q, kernel, threads) for index, q in zip(self.indices, queries)],
                           threads)


@dataclass
class LexicalFusionAttacker(RetrievalAttacker):
    """Retrieval by the equal-weight mean of three standardised lexical rankers (word 1-2-gram TF-IDF cosine,
    character n-gram TF-IDF cosine, BM25) and a temperature softmax.

    Parameters
    ----------
    max_features, ngram_max : the word TF-IDF's vocabulary size and longest word n-gram
    char_ngram_min, char_ngram_max : the character n-grams' lengths (within words)
    min_df : words and character n-grams found in fewer profiles are ignored (TF-IDF rankers)
    k1, b : BM25's term-frequency saturation and length normalisation
    temperature : softmax temperature ``T`` applied to the fused score (``auto``: chosen on a tuning fold)
    top_k : pool truncation (``None``: the whole registry)
    chunk_size : documents per similarity block
    kernel : multithreaded sparse products (``sparse_dot_topn``); ``False``: scipy's, the same results
    clue_extractor : query augmentation for the ``direct_plus_clues`` mode
    """

    max_features: int = 50_000
    ngram_max: int = 2
    char_ngram_min: int = 3
    char_ngram_max: int = 5
    min_df: int | float = 1
    k1: float = 1.5
    b: float = 0.75
    temperature: float | str = DEFAULT_TEMPERATURE
    top_k: int | None = None
    chunk_size: int = 512
    clue_extractor: ClueExtractor | None = field(default=None, repr=False)
    name: str = "lexical_fusion"
    kernel: bool = KERNEL

    def __post_init__(self):
        self._start()
        check_word_settings(self)
        if not 1 <= self.char_ngram_min <= self.char_ngram_max:
            raise ConfigError(f"character n-grams need 1 <= char_ngram_min <= char_ngram_max, found "
                              f"{self.char_ngram_min} and {self.char_ngram_max}")
        check_bm25_settings(self.k1, self.b)
        self.index_: FusionIndex | None = None  # the last attack's index

    def params(self) -> dict:
        return {"attacker": self.name, "rankers": list(RANKERS), "standardisation": "z-score over the registry",
                "combination": "equal-weight mean", "z_scale": Z_SCALE, "max_features": self.max_features,
                "ngram_max": self.ngram_max, "char_analyzer": "char_wb",
                "char_ngram_range": [self.char_ngram_min, self.char_ngram_max], "min_df": self.min_df,
                "bm25": {"variant": "lucene", "k1": self.k1, "b": self.b, "query_terms": "distinct"},
                "sublinear_tf": True, "temperature": self.temperature, "top_k": self.top_k, **self.clue_params()}

    def index(self, registry: Registry, level: KnowledgeLevel) -> FusionIndex:
        """The indices of the registry's profiles under the level, fitted once per (registry, level)."""
        settings = (self.max_features, self.ngram_max, self.char_ngram_min, self.char_ngram_max, self.min_df, self.k1,
                    self.b)
        return self.fitted("index_", settings, registry, level, lambda texts: FusionIndex(*settings).fit(texts))

    def similarities(self, doc_ids, texts, registry, level, progress=None):
        index = self.index(registry, level)
        queries = self.queries(doc_ids, texts, level, progress)
        return queries, index.similarities(index.transform(queries), kernel=self.kernel)

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> Explainer:
        """Evidence spans from the word ranker's index (fitted now when the attack has not indexed this level)."""
        return self.index(registry, level).words.explainer()


SPEC = AttackerSpec(
    name="lexical_fusion", label="Lexical fusion (words, characters, BM25)",
    description="ranks every registry profile (built from the fields the attacker knows) three ways (TF-IDF cosine "
                "over words and word pairs, TF-IDF cosine over character n-grams, BM25), standardises each ranking "
                "over the registry, averages the three and turns the result into weights with a temperature "
                "softmax; runs locally",
    params=(
        TEMPERATURE,
        Param("max_features", "int", 50_000, "Word vocabulary size",
              "Largest number of words and word pairs the word TF-IDF keeps.", min=1, step=1000),
        Param("ngram_max", "int", 2, "Longest word n-gram", "1: single words; 2: words and word pairs.", min=1, max=5),
        Param("char_ngram_min", "int", 3, "Shortest character n-gram",
              "Character n-grams are cut within words, padded with a space.", min=1, max=10),
        Param("char_ngram_max", "int", 5, "Longest character n-gram",
              "At least the shortest; longer n-grams match longer word pieces.", min=1, max=10),
        Param("min_df", "int", 1, "Minimum document frequency",
              "Ignore words and character n-grams found in fewer profiles than this.", min=1),
        Param("k1", "float", 1.5, "BM25 k1", "How fast repeated words of a profile stop adding to its BM25 score.",
              min=0.0, max=10.0, step=0.1),
        Param("b", "float", 0.75, "BM25 b", "How much BM25 discounts long profiles (0: not at all; 1: fully).",
              min=0.0, max=1.0, step=0.05),
        Param("chunk_size", "int", 512, "Documents per similarity block",
              "Memory grows with this block size times the registry size.", min=1, step=64),
    ),
    build=lambda params, context: LexicalFusionAttacker(**params, top_k=context.top_k,
                                                        clue_extractor=context.clue_extractor()),
    uses_clues=True,
    runs_on_cluster=True,
)
