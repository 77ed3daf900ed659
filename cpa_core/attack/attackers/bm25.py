"""BM25 retrieval attacker: Okapi BM25 of each registry profile for the released document's words, standardised per
document over the registry, then a temperature softmax over the pool.

For each released document the attacker scores every profile (the fields the knowledge level gives it) by Okapi BM25
(:class:`~cpa_core.attack.attackers.lexical_fusion.Bm25Index`, the lexical fusion attacker's BM25 ranker: Lucene's
variant with ``k1`` and ``b`` declared, the document's distinct words as the query). BM25 saturates a profile's
repeated words and discounts long profiles, where TF-IDF cosine normalises both vectors: the two rank differently,
and this attacker is one that a redaction tuned against TF-IDF has not seen.

**The scale of the softmax.** BM25 scores are unbounded and grow with the query: a document's score for a profile is
a sum over its distinct words, so a post of a few hundred words scores profiles in the tens or hundreds where a short
description scores them below ten. One temperature over raw scores would then be all-or-nothing for long documents
and flat for short ones, and no point of the ``auto`` grid (0.002 to 2, made for cosines in [0, 1]) would suit a
release of both. So each document's scores are **standardised over the whole registry**, ``z = (s - mean) /
standard deviation`` of its scores of every profile (a document that matches every profile alike, or none, gets
``z = 0``: uniform weights), and divided by the lexical fusion attacker's
:data:`~cpa_core.attack.attackers.lexical_fusion.Z_SCALE`: the weights are ``softmax(z / (Z_SCALE * T))``. The shift
changes no softmax; the division puts every document's scores in units of its own spread over the registry, whatever
its length, so the ``auto`` grid spans the same range of peakedness for every document, and the same as for the
fusion attacker (this is its BM25 ranker alone: :class:`~cpa_core.attack.attackers.lexical_fusion.FusedBlocks` of one
block). Dividing by each document's top score instead would hang the whole scale on one profile. The standardisation
is monotone within a document, so the ranking is BM25's own; it is fixed in advance and reads no label, so documents
stay exchangeable. ``T`` is declared or ``auto`` (chosen on a tuning fold, :mod:`cpa_core.attack.temperature`).

The engine is the TF-IDF attacker's: blocks of ``chunk_size`` documents, each scored against every profile by one
sparse product (``sparse_dot_topn``'s kernel on every core, or scipy's with ``kernel=False``: the same values), only
the top-K kept; LLM clues are appended to the query at a ``direct_plus_clues`` level. The attacker keeps no state from
one document to the next, so it runs on a Dask cluster (:mod:`cpa_core.attack.engine`). Evidence spans are the TF-IDF
attacker's term explainer fed with BM25's own per-word contributions
(:class:`~cpa_core.attack.tfidf_index.TermProducts`): a document's BM25 score is a sum over its distinct words, so
each word shared with the candidates weighs exactly what it adds to their summed score (English stop words are left
out of the evidence, not of the attack).

Declared in TOML as ``[attacker.bm25]`` (every parameter optional)::

    [attacker]
    name = "bm25"

    [attacker.bm25]
    temperature = "auto"     # or a number
    k1 = 1.5                 # term-frequency saturation
    b = 0.75                 # length normalisation
    chunk_size = 512         # documents per similarity block
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpa_core.attack.attackers import lexical_fusion, tfidf
from cpa_core.attack.attackers.lexical_fusion import Z_SCALE, Bm25Index, FusedBlocks, check_bm25_settings
from cpa_core.attack.base import ClueExtractor, RetrievalAttacker
from cpa_core.attack.explainers import Explainer
from cpa_core.attack.spec import AttackerSpec
from cpa_core.attack.temperature import DEFAULT_TEMPERATURE
from cpa_core.attack.tfidf_index import KERNEL
from cpa_core.common.errors import ConfigError
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Registry


@dataclass
class Bm25Attacker(RetrievalAttacker):
    """Retrieval by Okapi BM25, standardised over the registry per document, and a temperature softmax.

    Parameters
    ----------
    k1, b : BM25's term-frequency saturation and length normalisation
    temperature : softmax temperature ``T`` applied to the standardised score (``auto``: chosen on a tuning fold)
    top_k : pool truncation (``None``: the whole registry)
    chunk_size : documents per similarity block
    kernel : multithreaded sparse products (``sparse_dot_topn``); ``False``: scipy's, the same results
    clue_extractor : query augmentation for the ``direct_plus_clues`` mode
    """

    k1: float = 1.5
    b: float = 0.75
    temperature: float | str = DEFAULT_TEMPERATURE
    top_k: int | None = None
    chunk_size: int = 512
    clue_extractor: ClueExtractor | None = field(default=None, repr=False)
    name: str = "bm25"
    kernel: bool = KERNEL

    def __post_init__(self):
        self._start()
        if self.top_k is not None and self.top_k < 1:
            raise ConfigError(f"top-K must be at least 1, found {self.top_k}")
        if self.chunk_size < 1:
            raise ConfigError(f"chunk_size must be at least 1, found {self.chunk_size}")
        check_bm25_settings(self.k1, self.b)
        self.index_: Bm25Index | None = None  # the last attack's index

    def params(self) -> dict:
        return {"attacker": self.name, "variant": "lucene", "k1": self.k1, "b": self.b, "query_terms": "distinct",
                "standardisation": "z-score over the registry", "z_scale": Z_SCALE, "temperature": self.temperature,
                "top_k": self.top_k, **self.clue_params()}

    def index(self, registry: Registry, level: KnowledgeLevel) -> Bm25Index:
        """The BM25 index of the registry's profiles under the level, fitted once per (registry, level)."""
        return self.fitted("index_", (self.k1, self.b), registry, level,
                           lambda texts: Bm25Index(self.k1, self.b).fit(texts))

    def similarities(self, doc_ids, texts, registry, level, progress=None):
        index = self.index(registry, level)
        queries = self.queries(doc_ids, texts, level, progress)
        return queries, FusedBlocks([index.similarities(index.transform(queries), kernel=self.kernel)])

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> Explainer:
        """Evidence spans weighted by each shared word's BM25 contribution (the index fitted now when the attack has
        not indexed this level)."""
        return self.index(registry, level).explainer()


SPEC = AttackerSpec(
    name="bm25", label="BM25 retrieval",
    description="ranks every registry profile (built from the fields the attacker knows) by Okapi BM25 for the "
                "released text's words, standardises the scores over the registry and turns them into weights with "
                "a temperature softmax; runs locally",
    params=(tfidf.TEMPERATURE, lexical_fusion.SPEC.param("k1"), lexical_fusion.SPEC.param("b"),
            tfidf.SPEC.param("chunk_size")),
    build=lambda params, context: Bm25Attacker(**params, top_k=context.top_k, clue_extractor=context.clue_extractor()),
    uses_clues=True,
    runs_on_cluster=True,
)
