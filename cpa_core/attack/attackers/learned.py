"""Learned re-identifier: a linear classifier trained on the registry alone, one class per identity, scoring each
released document (the text re-identification attack, TRI, of Manzanares-Salor et al., with a linear model in place
of a fine-tuned language model).

A retrieval attacker compares a document with each profile as a whole. This attacker *learns* from the registry what
tells its people apart: which words and word pieces one person writes and the others do not, and how much a person's
own texts vary. It never reads a released document's identity; what it trains on is:

1. **Examples.** Each profile (the fields the knowledge level gives the attacker) is cut into ``k = max(1,
   round(w / L))`` chunks of equal length (``w`` its words, ``L`` the chunk length, consecutive words, the first
   pieces one word shorter when ``w`` does not divide): every chunk is an example of its identity. ``L`` is
   ``chunk_words``, longer when the registry would give more than ``max_chunks`` chunks (then the shortest length
   that gives at most ``max(max_chunks, profiles)``), so that training stays within the machine.
2. **Features.** TF-IDF over word 1- and 2-grams and TF-IDF over character 3- to 5-grams within words (the lexical
   fusion attacker's :class:`~cpa_core.attack.attackers.lexical_fusion.CharIndex`), sublinear term frequencies, the
   vocabulary and the inverse document frequencies taken over the *profiles* (a word only one person uses is as rare
   however many chunks they have), each part L2-normalised, side by side with equal weight (chunks of norm 1). Every
   word, word pair and character n-gram is kept: a name found in one profile is a feature.
3. **Classifier.** Ridge regression of every identity's indicator on the features (one-vs-rest least squares: the
   linear classifier of scikit-learn's ``RidgeClassifier``), with every identity weighing the same whatever its
   number of chunks (a chunk of an identity of ``n`` chunks weighs ``1 / n``). It is solved in the dual, over the
   chunks: with ``K = X Xᵀ`` the chunks' linear kernel, the classifier is ``W = Xᵀ A``, ``A = (K + λ N)⁻¹ Y`` (``N``
   the diagonal of each chunk's identity's number of chunks, ``Y`` the chunks' identity indicators), so the weights
   of every word for every identity are never written out. ``K`` is computed in row blocks, its upper triangle only
   (the features found in at least :data:`DENSE_SHARE` of the chunks, at most :data:`DENSE_MAX` of them, as a dense
   matrix product, the others as a sparse product), and ``K + λ N`` is factored once (float32 Cholesky, in place).
4. **The penalty** ``λ`` (``ridge``) is declared, or ``auto``: chosen from the registry alone by leave-one-out over
   chunks. On up to :data:`LOO_CHUNKS` chunks of identities with two chunks or more (whole identities, in the order
   of a hash of their ids), each chunk is predicted by the classifier trained on the others (the exact leave-one-out
   of ridge regression, in closed form), for every ``λ`` of :data:`RIDGE_GRID`; the largest ``λ`` whose share of
   held-out chunks named first is within one standard error of the best share wins (the one-standard-error rule: a
   held-out chunk is closer to the rest of its profile than a released document is, so the most regularised
   classifier the chunks cannot tell from the best is preferred). A registry with fewer than
   :data:`LOO_MIN_IDENTITIES` such identities has nothing to hold out: ``λ`` is then :data:`FALLBACK_RIDGE`, where
   the classifier is close to matching each document with its nearest profile.
5. **Attack.** A document's score of identity ``c`` is ``x · W_c = (x Xᵀ) A_c``: its features' products with every
   chunk, solved against the factor, summed over ``c``'s chunks, times ``1 + λ`` (:func:`score_scale`: a fixed unit
   that keeps scores on the scale of cosines whatever ``λ``). The weights are ``softmax(score / T)`` over the pool,
   ``T`` declared or ``auto`` (a tuning fold of the labelled documents, as for every retrieval attacker,
   :mod:`cpa_core.attack.temperature`), with top-K and LLM clues as for them.

Training needs about ``4 x chunks²`` bytes (the kernel); a registry this machine cannot hold is refused when the
attacker is built, before any work, in one line saying what it needs, what there is and what to declare instead
(:func:`check_training_fits`). The model is trained once per registry and knowledge level and kept for the run
(re-scoring an edited document trains nothing); the same registry gives the same model. Evidence spans are the
TF-IDF explainer's (the words shared with the candidates' profiles that weigh most). The attack runs in this process
(a cluster worker would train the model again).

Declared in TOML as ``[attacker.learned]`` (every parameter optional)::

    [attacker]
    name = "learned"

    [attacker.learned]
    temperature = "auto"     # or a number
    ridge = "auto"           # or a number: the ridge penalty per identity
    chunk_words = 300        # words per training chunk (longer when the registry would give too many)
    max_chunks = 5000        # chunks at most (one per profile at least)
    chunk_size = 512         # documents per scoring block
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from cpa_core.attack.attackers.lexical_fusion import CharIndex
from cpa_core.attack.attackers.tfidf import TEMPERATURE
from cpa_core.attack.base import ClueExtractor, RetrievalAttacker
from cpa_core.attack.budget import available_memory
from cpa_core.attack.spec import AttackerSpec
from cpa_core.attack.temperature import AUTO, DEFAULT_TEMPERATURE
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param
from cpa_core.common.progress import Progress
from cpa_core.io.knowledge import KnowledgeLevel, profile_texts
from cpa_core.io.tables import Registry

RIDGE_GRID = tuple(float(10.0 ** e) for e in np.arange(-3.0, 1.01, 0.5))
"""The penalties ``ridge = "auto"`` compares, 0.001 to 10, each about three times the last."""
FALLBACK_RIDGE = 100.0
"""The penalty of a registry with nothing to hold out (fewer than :data:`LOO_MIN_IDENTITIES` identities of two chunks
or more): the classifier is then close to matching a document with its nearest profile."""
LOO_CHUNKS = 2000
"""Chunks the leave-one-out choice of the penalty reads at most (whole identities)."""
LOO_MIN_IDENTITIES = 10
"""Identities of two chunks or more the leave-one-out choice needs."""
DENSE_SHARE = 0.03
"""Features found in at least this share of the chunks are multiplied as a dense matrix (BLAS), the rarer ones as a
sparse product: a common feature pairs nearly every chunk with every other, a rare one few."""
DENSE_MAX = 4096
"""Dense features at most (the most frequent): bounds the dense matrix at ``4 x DENSE_MAX`` bytes per chunk."""
ROW_BLOCK = 1024
"""Chunks per row block of the kernel matrix."""
BYTES_PER_WORD = 200
"""Memory per profile word of training, about: its word, word-pair and character n-gram features in the profiles and
in the chunks (value and column), and their copies while they are built."""


def score_scale(ridge: float) -> float:
    """The factor of the classifier's scores, ``1 + λ``: when chunks share no feature, an identity of one chunk scores
    that chunk ``1 / (1 + λ)``, so scores keep the scale of cosines (about 1 at most) for a small and a large ``λ``
    alike, and the temperature grid of ``auto`` covers this attacker as it covers the others."""
    return 1.0 + float(ridge)


# ---------------------------------------------------------------------------------------------- chunks


def chunk_count(words: int, length: int) -> int:
    """Chunks of a profile of ``words`` words at chunk length ``length``: ``round(words / length)`` (halves up), at
    least one."""
    return max(1, (2 * int(words) + length) // (2 * length))


def chunk_length(word_counts: Sequence[int], chunk_words: int, max_chunks: int) -> int:
    """The chunk length: ``chunk_words``, or the shortest longer length at which the profiles of ``word_counts`` give
    at most ``max(max_chunks, number of profiles)`` chunks."""
    counts = np.asarray(word_counts, dtype=np.int64)
    limit = max(max_chunks, counts.size)

    def total(length: int) -> int:
        return int(np.maximum(1, (2 * counts + length) // (2 * length)).sum()) if counts.size else 0

    if total(chunk_words) <= limit:
        return chunk_words
    low, high = chunk_words, 2 * int(counts.max()) + 1  # at ``high`` every profile is one chunk
    while high - low > 1:  # total(low) > limit >= total(high)
        middle = (low + high) // 2
        low, high = (low, middle) if total(middle) <= limit else (middle, high)
    return high


def cut(text: str, pieces: int) -> list[str]:
    """A text cut into ``pieces`` runs of consecutive whitespace-separated words, as equal as can be (piece ``j`` ends
    at word ``(j + 1) * words // pieces``)."""
    words = text.split()
    bounds = [j * len(words) // pieces for j in range(pieces + 1)]
    return [" ".join(words[a:z]) for a, z in zip(bounds[:-1], bounds[1:])]


# ---------------------------------------------------------------------------------------------- memory


def training_bytes(n_chunks: int, n_identities: int, n_words: int, chunk_size: int) -> int:
    """The memory training and scoring need, about: the kernel matrix (float32, factored in place), the chunks' dense
    features, the sparse features of every word, one block of documents' products and scores."""
    return (4 * n_chunks ** 2 + 4 * n_chunks * DENSE_MAX + BYTES_PER_WORD * n_words
            + chunk_size * (3 * 4 * n_chunks + 4 * 8 * n_identities))


def _size(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:,.1f} GB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:,.1f} MB"


def check_training_fits(n_chunks: int, n_identities: int, n_words: int, chunk_size: int,
                        available: int | None = None) -> None:
    """Refuse, before any work, a training this machine cannot hold: one line saying what it needs, what there is and
    what to declare instead (fewer chunks, when fewer chunks but one per profile would fit; else another attacker)."""
    available = available_memory() if available is None else available
    needed = training_bytes(n_chunks, n_identities, n_words, chunk_size)
    if available is None or needed <= available:
        return
    fits = next((n for n in range(n_chunks, 0, -max(1, n_chunks // 1000))
                 if training_bytes(n, n_identities, n_words, chunk_size) <= available), 0)
    advice = (f"declare [attacker.learned] max_chunks = {fits} or fewer (chunks then get longer)"
              if n_identities <= fits < n_chunks else
              "declare another attacker for this registry (tfidf or lexical_fusion): the learned one trains on one "
              "chunk per profile at least")
    raise ConfigError(f"the learned attacker would train on {n_chunks:,} chunks of {n_identities:,} profiles, which "
                      f"needs about {_size(needed)} of memory (a {n_chunks:,} x {n_chunks:,} kernel matrix); this "
                      f"machine has {_size(available)} available: {advice}")


# ---------------------------------------------------------------------------------------------- the classifier


def one_blas_thread():
    """A context in which BLAS and LAPACK run on one thread, for the factorisations: OpenBLAS's threaded Cholesky and
    triangular inverse wait on their threads, and on a busy machine they ran 8 to 30 times slower than one thread
    (4,000 x 4,000: 2.8 s against 0.35 s at load 7 on 2 cores). Products and solves keep every core."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1, user_api="blas")


def cholesky(matrix: np.ndarray, lower: bool):
    """``scipy.linalg.cho_factor`` of ``matrix`` in place (the triangle ``lower`` says), on one BLAS thread."""
    from scipy import linalg

    with one_blas_thread():
        return linalg.cho_factor(matrix, lower=lower, overwrite_a=True, check_finite=False)


def _identity_order(ids: Sequence[str]) -> np.ndarray:
    """Identities in the order of a hash of their ids (BLAKE2b): which ones the leave-one-out reads depends on the ids
    alone, not on the registry's row order."""
    keys = [hashlib.blake2b(str(i).encode("utf-8"), digest_size=8, person=b"cpa-learned").digest() for i in ids]
    return np.array(sorted(range(len(ids)), key=lambda row: (keys[row], str(ids[row]))), dtype=np.int64)


def leave_one_out_scores(kernel: np.ndarray, owners: np.ndarray, ridge: float) -> np.ndarray:
    """Each chunk's scores of every identity by the classifier trained on the *other* chunks (``chunks x identities``):
    the exact leave-one-out of weighted ridge regression, ``(fitted - h Y) / (1 - h)`` row by row, ``h`` the chunk's
    leverage, the other chunks' weights unchanged. ``kernel``'s upper triangle is read; ``owners`` are identity
    numbers ``0 .. m - 1``."""
    from scipy import linalg

    n = owners.size
    per_chunk = ridge * np.bincount(owners)[owners].astype(np.float64)
    system = np.triu(kernel).T.astype(np.float64)  # the lower triangle, the upper one left as zeros
    system[np.diag_indices(n)] += per_chunk
    factor = cholesky(system, lower=True)  # K + λN = L Lᵀ
    with one_blas_thread():
        inverse_factor = np.tril(linalg.lapack.dtrtri(factor[0], lower=1)[0])
    left_out = per_chunk * np.einsum("ij,ij->j", inverse_factor, inverse_factor)  # λN (K + λN)⁻¹: 1 - leverage
    indicator = np.zeros((n, int(owners.max()) + 1))
    indicator[np.arange(n), owners] = 1.0
    fitted = indicator - per_chunk[:, None] * linalg.cho_solve(factor, indicator, check_finite=False)
    return (fitted - (1.0 - left_out)[:, None] * indicator) / left_out[:, None]


def first_guess_share(scores: np.ndarray, owners: np.ndarray) -> float:
    """The share of rows whose own identity (``owners``) scores above every other."""
    rows = np.arange(owners.size)
    own = scores[rows, owners].copy()
    others = scores.copy()
    others[rows, owners] = -np.inf
    return float(np.mean(own > others.max(axis=1)))


class LearnedModel:
    """The features and the ridge classifier of :class:`LearnedAttacker`, trained on the registry's profiles (module
    docstring). Learned attributes end in ``_``: ``chunk_length_``, ``owners_`` (each chunk's profile row),
    ``ridge_``, ``loo_`` (the leave-one-out first-guess share of each grid penalty, when ``auto`` chose)."""

    def __init__(self, chunk_words: int = 300, max_chunks: int = 5000, ridge: float | str = AUTO):
        self.chunk_words, self.max_chunks, self.ridge = chunk_words, max_chunks, ridge

    def features(self, texts: Sequence[str]):
        """Word and character TF-IDF side by side, each L2-normalised and weighed ``1 / √2`` (float32 CSR rows)."""
        from scipy import sparse

        parts = (self.words_.transform(texts), self.characters_.transform(texts))
        return (sparse.hstack(parts, format="csr", dtype=np.float32) * np.float32(np.sqrt(0.5))).tocsr()

    def _split(self, rows):
        """The rows' dense features (an array) and their sparse ones (CSR)."""
        return rows[:, self.dense_].toarray(), rows[:, self.sparse_].tocsr()

    def fit(self, profiles: Sequence[str], ids: Sequence[str], progress: Progress | None = None) -> "LearnedModel":
        """Train on the profiles (rows of the registry, ``ids`` their identities)."""
        from scipy import sparse
        from sklearn.feature_extraction.text import TfidfVectorizer

        profiles = list(profiles)
        words = [len(text.split()) for text in profiles]
        self.chunk_length_ = chunk_length(words, self.chunk_words, self.max_chunks)
        chunks, owners = [], []
        for row, text in enumerate(profiles):
            pieces = cut(text, chunk_count(words[row], self.chunk_length_))
            chunks += pieces
            owners += [row] * len(pieces)
        self.owners_ = np.asarray(owners, dtype=np.int64)
        self.words_ = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, strip_accents="unicode", dtype=np.float32)
        try:
            self.words_.fit(profiles)
        except ValueError as error:  # no word in any profile
            raise ConfigError(f"the learned attacker cannot train on the profile texts: {error}") from None
        self.characters_ = CharIndex(3, 5).fit(profiles)

        chunk_features = self.features(chunks)
        n = len(chunks)
        frequency = np.bincount(chunk_features.indices, minlength=chunk_features.shape[1])
        frequent = np.flatnonzero(frequency >= DENSE_SHARE * n)
        frequent = frequent[np.argsort(-frequency[frequent], kind="stable")[:DENSE_MAX]]
        dense = np.zeros(chunk_features.shape[1], dtype=bool)
        dense[frequent] = True
        self.dense_, self.sparse_ = np.flatnonzero(dense), np.flatnonzero(~dense)
        self.chunks_dense_, chunks_sparse = self._split(chunk_features)
        self.chunks_sparse_t_ = chunks_sparse.T.tocsr()
        self.summing_ = sparse.csr_matrix((np.ones(n, dtype=np.float32), (self.owners_, np.arange(n))),
                                          shape=(len(profiles), n))  # identities x chunks: sums a profile's chunks

        kernel = np.empty((n, n), dtype=np.float32)  # upper triangle only: the factorisation reads no other
        for start in range(0, n, ROW_BLOCK):
            stop = min(start + ROW_BLOCK, n)
            kernel[start:stop, start:] = (self.chunks_dense_[start:stop] @ self.chunks_dense_[start:].T
                                          + (chunks_sparse[start:stop] @ self.chunks_sparse_t_[:, start:]).toarray())
            if progress:
                progress(stop, n, "training the learned attacker")
        self.ridge_ = self._choose_ridge(kernel, ids, progress) if self.ridge == AUTO else float(self.ridge)
        kernel[np.diag_indices(n)] += np.float32(self.ridge_) * np.bincount(self.owners_)[self.owners_]
        # Fortran order without a copy: the transpose of a C-ordered array, lower triangle = our upper one
        self.factor_ = cholesky(kernel.T, lower=True)
        return self

    def _choose_ridge(self, kernel: np.ndarray, ids: Sequence[str], progress: Progress | None = None) -> float:
        """``ridge = "auto"``: the largest grid penalty whose leave-one-out first guess over a sample of the chunks is
        within one standard error of the best (module docstring)."""
        sizes = np.bincount(self.owners_, minlength=len(ids))
        taken, total = [], 0
        for row in _identity_order(ids):
            if sizes[row] >= 2 and total + sizes[row] <= LOO_CHUNKS:
                taken.append(row)
                total += sizes[row]
        self.loo_ = {}
        if len(taken) < LOO_MIN_IDENTITIES:
            return FALLBACK_RIDGE
        rows = np.flatnonzero(np.isin(self.owners_, taken))  # increasing: the sample's upper triangle is the kernel's
        owners = np.unique(self.owners_[rows], return_inverse=True)[1]
        sample = kernel[np.ix_(rows, rows)]
        for done, ridge in enumerate(RIDGE_GRID, 1):
            self.loo_[ridge] = first_guess_share(leave_one_out_scores(sample, owners, ridge), owners)
            if progress:
                progress(done, len(RIDGE_GRID), "choosing the ridge penalty")
        best = max(self.loo_.values())
        tolerance = np.sqrt(best * (1.0 - best) / rows.size)  # one standard error of the best share
        return max(ridge for ridge, share in self.loo_.items() if share >= best - tolerance)

    def scores(self, features) -> np.ndarray:
        """Each document's score of every identity (``documents x identities``, float32), from its feature rows."""
        from scipy import linalg

        dense, rare = self._split(features)
        products = dense @ self.chunks_dense_.T + (rare @ self.chunks_sparse_t_).toarray()
        solved = linalg.cho_solve(self.factor_, products.T, check_finite=False)  # chunks x documents
        return (np.asarray(self.summing_ @ solved).T * np.float32(score_scale(self.ridge_))).astype(np.float32)


class LearnedBlocks:
    """The block function of :func:`~cpa_core.attack.candidates.rank_by_similarity`: the classifier's scores of
    documents ``start`` to ``stop`` (features computed once for all blocks)."""

    kernel = False

    def __init__(self, model: LearnedModel, features):
        self.model, self.features = model, features

    def __call__(self, start: int, stop: int) -> np.ndarray:
        return self.model.scores(self.features[start:stop])


@dataclass
class LearnedAttacker(RetrievalAttacker):
    """A ridge classifier trained on the registry's profiles, one class per identity (module docstring).

    Parameters
    ----------
    ridge : the ridge penalty per identity, or ``auto`` (leave-one-out over the registry's chunks)
    chunk_words : words per training chunk (longer when the registry would give more than ``max_chunks``)
    max_chunks : training chunks at most (one per profile at least)
    temperature : softmax temperature ``T`` (``auto``: chosen on a tuning fold)
    top_k : pool truncation (``None``: the whole registry)
    chunk_size : documents per scoring block
    clue_extractor : query augmentation for the ``direct_plus_clues`` mode
    """

    ridge: float | str = AUTO
    chunk_words: int = 300
    max_chunks: int = 5000
    temperature: float | str = DEFAULT_TEMPERATURE
    top_k: int | None = None
    chunk_size: int = 512
    clue_extractor: ClueExtractor | None = field(default=None, repr=False)
    name: str = "learned"

    def __post_init__(self):
        self._start()
        if self.top_k is not None and self.top_k < 1:
            raise ConfigError(f"top-K must be at least 1, found {self.top_k}")
        if self.chunk_words < 1 or self.max_chunks < 1 or self.chunk_size < 1:
            raise ConfigError(f"chunk_words, max_chunks and chunk_size must be at least 1, found {self.chunk_words}, "
                              f"{self.max_chunks} and {self.chunk_size}")
        if self.ridge != AUTO and (isinstance(self.ridge, bool) or not isinstance(self.ridge, (int, float))
                                   or not self.ridge > 0):
            raise ConfigError(f"ridge must be a number above 0 or '{AUTO}', found {self.ridge!r}")
        self.model_: LearnedModel | None = None  # the last attack's model

    def params(self) -> dict:
        return {"attacker": self.name, "classifier": "ridge regression, one class per identity, identities weighed "
                "equally, solved over the chunks", "training": "registry profiles cut into chunks",
                "chunk_words": self.chunk_words, "max_chunks": self.max_chunks,
                "features": "word 1-2-gram and character 3-5-gram (char_wb) TF-IDF, idf over the profiles, sublinear, "
                            "equal weight", "ridge": self.ridge,
                "ridge_rule": {"grid": list(RIDGE_GRID), "leave_one_out_chunks": LOO_CHUNKS,
                               "choice": "largest within one standard error of the best first guess",
                               "min_identities": LOO_MIN_IDENTITIES, "fallback": FALLBACK_RIDGE},
                "score_scale": "1 + ridge", "temperature": self.temperature, "top_k": self.top_k,
                **self.clue_params()}

    def plan(self, registry: Registry, level: KnowledgeLevel) -> tuple[int, int, int]:
        """What training would read, without training: its chunks, profiles and words."""
        words = [len(text.split()) for text in profile_texts(registry, level)]
        length = chunk_length(words, self.chunk_words, self.max_chunks)
        return sum(chunk_count(w, length) for w in words), len(words), sum(words)

    def check_fits(self, registry: Registry, level: KnowledgeLevel, available: int | None = None) -> None:
        """Before any work: refuse a training this machine cannot hold (:func:`check_training_fits`)."""
        chunks, profiles, words = self.plan(registry, level)
        check_training_fits(chunks, profiles, words, self.chunk_size, available)

    def model(self, registry: Registry, level: KnowledgeLevel, progress: Progress | None = None) -> LearnedModel:
        """The classifier of the registry's profiles under the level, trained once per (registry, level)."""
        settings = (self.chunk_words, self.max_chunks, self.ridge)
        return self.fitted("model_", settings, registry, level,
                           lambda texts: LearnedModel(*settings).fit(texts, registry.ids.tolist(), progress))

    def trained(self) -> dict:
        """The model of the last attack: its chunks, their length, the ridge penalty and, when ``auto`` chose it, each
        grid penalty's leave-one-out first-guess share over the registry's chunks."""
        model = self.model_
        if model is None:
            return {}
        loo = getattr(model, "loo_", {})
        return {"chunks": int(model.owners_.size), "chunk_words": int(model.chunk_length_),
                "ridge": float(model.ridge_), "ridge_chosen": "leave-one-out over the registry's chunks"
                if self.ridge == AUTO and loo else ("fallback" if self.ridge == AUTO else "declared"),
                **({"ridge_leave_one_out_first_guess": {f"{ridge:g}": share for ridge, share in loo.items()}}
                   if self.ridge == AUTO and loo else {})}

    def similarities(self, doc_ids, texts, registry, level, progress=None):
        model = self.model(registry, level, progress)
        queries = self.queries(doc_ids, texts, level, progress)
        return queries, LearnedBlocks(model, model.features(queries))


def _checked(attacker: LearnedAttacker, context) -> LearnedAttacker:
    """The attacker, once this machine is known to hold its training (said before any work)."""
    attacker.check_fits(context.registry, context.level)
    return attacker


SPEC = AttackerSpec(
    name="learned", label="Learned re-identifier (ridge classifier on the registry)",
    description="learns from the registry alone what tells its people apart: every profile (the fields the attacker "
                "knows) is cut into chunks, a linear classifier over word and character n-grams is trained with one "
                "class per identity, and each released text is scored by it; a temperature softmax turns the scores "
                "into weights; runs locally",
    params=(
        TEMPERATURE,
        Param("ridge", "float", AUTO, "Ridge penalty",
              "How strongly the classifier is held back (per identity): small values fit what tells each person "
              "apart, large ones come close to matching the nearest profile. 'auto' (the default): the value whose "
              "classifier best names held-out chunks of the registry's own profiles.",
              above=0.0, max=1e6, special=(AUTO,), step=0.01),
        Param("chunk_words", "int", 300, "Words per training chunk",
              "Each profile is cut into chunks of about this many words, each one example of its identity; longer "
              "when the registry would give more than the chunks at most.", min=1, step=50),
        Param("max_chunks", "int", 5000, "Training chunks at most",
              "Training holds a chunks x chunks matrix (4 bytes each) and its time grows with its cube; a profile is "
              "one chunk at least.", min=1, step=500),
        Param("chunk_size", "int", 512, "Documents per scoring block",
              "Memory grows with this block size times the number of chunks.", min=1, step=64),
    ),
    build=lambda params, context: _checked(LearnedAttacker(**params, top_k=context.top_k,
                                                           clue_extractor=context.clue_extractor()), context),
    uses_clues=True,
)
