"""TF-IDF retrieval attacker: cosine similarity between the query and each profile text, turned
into a pseudo-posterior by a temperature softmax over the pool.

Similarities are computed in chunks of documents and only the top-K of each chunk is kept, so memory
stays bounded as the registry grows (no dense documents x registry matrix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..candidates import CandidateTable, Progress, softmax_rows, top_candidates
from ..data import Registry
from ..errors import ConfigError
from ..knowledge import KnowledgeLevel, profile_texts
from .base import ClueExtractor, build_queries
from .llm_clues import extractor_params, retrieval_estimate_calls


class TfidfIndex:
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

    def search(self, queries, top_k: int | None, temperature: float, chunk_size: int,
               progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-``top_k`` profiles of each query row (all when ``None``) and their softmax weights."""
        n, m = queries.shape[0], self.profiles_.shape[0]
        width = m if top_k is None else min(top_k, m)
        candidates = np.empty((n, width), dtype=np.int32)
        weights = np.empty((n, width), dtype=np.float64)
        profiles_t = self.profiles_.T.tocsr()
        for start in range(0, n, chunk_size):
            stop = min(start + chunk_size, n)
            similarities = (queries[start:stop] @ profiles_t).toarray()
            index, values = top_candidates(similarities, top_k)
            candidates[start:stop] = index
            weights[start:stop] = softmax_rows(values.astype(np.float64), temperature)
            if progress:
                progress(stop, n, "ranking the registry")
        return candidates, weights

    def shared_terms(self, query: str, candidate_rows: Sequence[int], n_terms: int = 5) -> list[str]:
        """The terms with the largest TF-IDF contributions shared by the query and the candidates.

        English stop words are left out of the explanation (they still count in the attack).
        """
        if len(candidate_rows) == 0:
            return []
        q = self.transform([query])
        contributions = q.multiply(self.profiles_[list(candidate_rows)].sum(axis=0)).tocoo()
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        order = np.argsort(-contributions.data, kind="stable")
        terms = [str(self.terms_[contributions.col[i]]) for i in order if contributions.data[i] > 0]
        return [t for t in terms if t not in ENGLISH_STOP_WORDS][:n_terms]


@dataclass
class TfidfAttacker:
    """Retrieval over profile texts with TF-IDF cosine similarity and a temperature softmax.

    Parameters
    ----------
    max_features, ngram_max, min_df : TF-IDF vocabulary settings
    temperature : softmax temperature ``T`` applied to cosine similarities
    top_k : pool truncation (``None``: the whole registry)
    chunk_size : documents per similarity block
    clue_extractor : query augmentation for the ``direct_plus_clues`` mode
    """

    max_features: int = 50_000
    ngram_max: int = 1
    min_df: int | float = 1
    temperature: float = 1.0
    top_k: int | None = None
    chunk_size: int = 512
    clue_extractor: ClueExtractor | None = field(default=None, repr=False)
    name: str = "tfidf"

    def __post_init__(self):
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be positive, found {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise ConfigError(f"top-K must be at least 1, found {self.top_k}")
        if self.ngram_max < 1 or self.max_features < 1:
            raise ConfigError("ngram_max and max_features must be at least 1")

    def params(self) -> dict:
        return {"attacker": self.name, "max_features": self.max_features, "ngram_max": self.ngram_max,
                "min_df": self.min_df, "temperature": self.temperature, "top_k": self.top_k,
                "sublinear_tf": True,
                **({"clue_extractor": extractor_params(self.clue_extractor)} if self.clue_extractor else {})}

    def estimate_calls(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry | None = None,
                       level: KnowledgeLevel | None = None) -> int:
        """LLM calls of an attack (a dry run): its clue extraction's at a ``direct_plus_clues`` level, else 0."""
        if level is None:
            level = KnowledgeLevel("any", ("any",), "direct_plus_clues")
        return retrieval_estimate_calls(self, doc_ids, texts, level)

    def attack(self, doc_ids: Sequence[str], texts: Sequence[str], registry: Registry, level: KnowledgeLevel,
               progress: Progress | None = None) -> CandidateTable:
        self.index_ = TfidfIndex(self.max_features, self.ngram_max, self.min_df).fit(profile_texts(registry, level))
        queries = build_queries(doc_ids, texts, level, self.clue_extractor, progress)
        candidates, weights = self.index_.search(self.index_.transform(queries), self.top_k, self.temperature,
                                                 self.chunk_size, progress)
        return CandidateTable(
            doc_ids=np.asarray(doc_ids, dtype=object), candidates=candidates, weights=weights,
            pool_sizes=np.full(len(doc_ids), candidates.shape[1], dtype=np.int64),
            candidate_ids=registry.ids, queries=tuple(queries))
