"""TF-IDF retrieval attacker: cosine similarity between the query and each profile text, turned
into a pseudo-posterior by a temperature softmax over the pool.

Similarities are computed in chunks of documents and only the top-K of each chunk is kept, so memory
stays bounded as the registry grows (no dense documents x registry matrix). Each chunk's product runs on
every core with ``sparse_dot_topn``'s kernel (:class:`SimilarityBlocks`); ``kernel=False`` keeps scipy's
single-threaded product, the reference the kernel's results are tested against.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cpa_core.attack.base import ClueExtractor, RetrievalAttacker
from cpa_core.attack.explainers import Explainer
from cpa_core.attack.spec import AttackerSpec
from cpa_core.attack.temperature import AUTO, DEFAULT_TEMPERATURE
from cpa_core.attack.tfidf_index import KERNEL, TfidfIndex
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param
from cpa_core.io.knowledge import KnowledgeLevel
from cpa_core.io.tables import Registry



def check_word_settings(attacker) -> None:
    """The settings every attacker on a word TF-IDF index declares (``top_k``, ``ngram_max``, ``max_features``),
    checked alike."""
    if attacker.top_k is not None and attacker.top_k < 1:
        raise ConfigError(f"top-K must be at least 1, found {attacker.top_k}")
    if attacker.ngram_max < 1 or attacker.max_features < 1:
        raise ConfigError("ngram_max and max_features must be at least 1")


@dataclass
class TfidfAttacker(RetrievalAttacker):
    """Retrieval over profile texts with TF-IDF cosine similarity and a temperature softmax.

    Parameters
    ----------
    max_features, ngram_max, min_df : TF-IDF vocabulary settings
    temperature : softmax temperature ``T`` applied to cosine similarities
    top_k : pool truncation (``None``: the whole registry)
    chunk_size : documents per similarity block
    kernel : multithreaded similarity kernel (:class:`SimilarityBlocks`); ``False``: scipy's product, the
        reference (the same results)
    clue_extractor : query augmentation for the ``direct_plus_clues`` mode
    """

    max_features: int = 50_000
    ngram_max: int = 1
    min_df: int | float = 1
    temperature: float | str = DEFAULT_TEMPERATURE
    top_k: int | None = None
    chunk_size: int = 512
    clue_extractor: ClueExtractor | None = field(default=None, repr=False)
    name: str = "tfidf"
    kernel: bool = KERNEL

    def __post_init__(self):
        self._start()
        check_word_settings(self)
        self.index_: TfidfIndex | None = None  # the last attack's index

    def params(self) -> dict:
        return {"attacker": self.name, "max_features": self.max_features, "ngram_max": self.ngram_max,
                "min_df": self.min_df, "temperature": self.temperature, "top_k": self.top_k,
                "sublinear_tf": True, **self.clue_params()}

    def index(self, registry: Registry, level: KnowledgeLevel) -> TfidfIndex:
        """The index of the registry's profiles under the level, fitted once per (registry, level): attacking
        one edited document again, or explaining matches, reuses it."""
        settings = (self.max_features, self.ngram_max, self.min_df)
        return self.fitted("index_", settings, registry, level, lambda texts: TfidfIndex(*settings).fit(texts))

    def similarities(self, doc_ids, texts, registry, level, progress=None):
        index = self.index(registry, level)
        queries = self.queries(doc_ids, texts, level, progress)
        return queries, index.similarities(index.transform(queries), kernel=self.kernel)

    def explainer(self, registry: Registry, level: KnowledgeLevel) -> Explainer:
        """Evidence spans from the attack's own index (fitted now when it has not attacked this level)."""
        return self.index(registry, level).explainer()


TEMPERATURE = Param("temperature", "float", DEFAULT_TEMPERATURE, "Softmax temperature T",
                    "Weights are softmax(similarity / T). Smaller T concentrates the weight on the best matches. It "
                    "changes set sizes, never the validity of the guarantee. 'auto' (the default): the temperature "
                    "that best predicts the identities of all labelled documents, chosen before the attack.",
                    min=0.001, max=1000.0, special=(AUTO,), option="--temperature", step=0.01)

SPEC = AttackerSpec(
    name="tfidf", label="TF-IDF retrieval",
    description="ranks every registry profile (built from the fields the attacker knows) by TF-IDF cosine "
                "similarity to the released text and turns similarities into weights with a temperature softmax; "
                "runs locally",
    params=(
        TEMPERATURE,
        Param("max_features", "int", 50_000, "Vocabulary size", "Largest number of terms the TF-IDF vocabulary keeps.",
              min=1, step=1000),
        Param("ngram_max", "int", 1, "Longest n-gram", "1: single words; 2: words and word pairs.", min=1, max=5),
        Param("min_df", "int", 1, "Minimum document frequency", "Ignore terms found in fewer profiles than this.",
              min=1),
        Param("chunk_size", "int", 512, "Documents per similarity block",
              "Memory grows with this block size times the registry size.", min=1, step=64),
    ),
    build=lambda params, context: TfidfAttacker(**params, top_k=context.top_k,
                                                clue_extractor=context.clue_extractor()),
    uses_clues=True,
    runs_on_cluster=True,
)
