"""The attacker's output: for each document, its candidate pool ranked by decreasing weight.

Every attacker produces a :class:`CandidateTable`; the calibration layer reads nothing else, so any
attacker is interchangeable. Rows are padded to a common width with candidate ``-1``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from cpa_core.common.progress import Progress

PADDING = -1


def softmax_rows(similarities: np.ndarray, temperature: float) -> np.ndarray:
    """Temperature softmax over each row, ``exp(s / T) / sum exp(s / T)`` (stable; ``-inf`` -> 0)."""
    scaled = similarities / temperature
    top = np.max(scaled, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    weights = np.exp(scaled - top)
    total = weights.sum(axis=1, keepdims=True)
    return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)


def top_candidates(values: np.ndarray, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Indices and values of the ``k`` largest entries of each row, by decreasing value.

    Tied entries come in an arbitrary (deterministic) order: every score gives tied candidates the
    same value, so sets and metrics do not depend on it. ``k=None`` keeps every column.

    Parameters
    ----------
    values : ndarray of shape (n, M)

    Returns
    -------
    (indices, values), each of shape (n, min(k, M))
    """
    n, m = values.shape
    if k is None or k >= m:
        order = np.argsort(-values, axis=1)
        return order, np.take_along_axis(values, order, axis=1)
    columns = np.sort(np.argpartition(values, m - k, axis=1)[:, m - k:], axis=1)
    picked = np.take_along_axis(values, columns, axis=1)
    order = np.argsort(-picked, axis=1)
    return np.take_along_axis(columns, order, axis=1), np.take_along_axis(picked, order, axis=1)


def canonical_order(values: np.ndarray) -> np.ndarray:
    """Each row's columns by decreasing value, ties by increasing column: ``np.argsort(-values, axis=1,
    kind="stable")``, computed as one unstable sort of 64-bit keys (about three times faster on a 10,000-column row).

    A ``float32`` value's bits are mapped to an unsigned word that orders as the value does, reversed (``-0`` read as
    ``0``, so that the two tie as they compare); the key is that word above the column number, so the sort of the keys
    is the stable order. Rows holding a NaN, and other dtypes, take the stable argsort."""
    values = np.asarray(values)
    n, m = values.shape
    if values.dtype != np.float32 or m >= 2**32 or np.isnan(values).any():
        return np.argsort(-values, axis=1, kind="stable")
    bits = (values + np.float32(0.0)).view(np.uint32)  # -0 + 0 is +0
    keys = np.empty((n, m), dtype=np.uint64)
    words = keys.view(np.uint32).reshape(n, m, 2)
    high, low = (1, 0) if np.little_endian else (0, 1)
    # a positive value's bits grow with it: 0x7fffffff - bits; a negative one's grow as it falls: bits (above them)
    mask = bits >> np.uint32(31)
    mask -= np.uint32(1)
    mask &= np.uint32(0x7FFFFFFF)
    np.bitwise_xor(bits, mask, out=words[:, :, high])
    words[:, :, low] = np.arange(m, dtype=np.uint32)
    keys.sort(axis=1)
    return words[:, :, low].astype(np.int64)


def ranked_columns(similarities: np.ndarray, k: int | None) -> np.ndarray:
    """The columns of the ``k`` largest entries of each row (all when ``None``), in the canonical order:
    decreasing value, ties by increasing column.

    The order is a function of the values alone, so any way of computing the same similarities (a dense block,
    a multithreaded kernel) gives the same shortlist: among tied entries at the cut, the lowest columns stay.

    Returns
    -------
    int64 ndarray of shape (n, min(k, M))
    """
    n, m = similarities.shape
    if k is None or k >= m:
        return canonical_order(similarities)
    columns = np.argpartition(similarities, m - k, axis=1)[:, m - k:]  # some k largest: ties at the cut arbitrary
    picked = np.take_along_axis(similarities, columns, axis=1)
    cut = picked.min(axis=1)
    tied = np.count_nonzero(similarities == cut[:, None], axis=1)
    for row in np.flatnonzero(tied > np.count_nonzero(picked == cut[:, None], axis=1)):
        values = similarities[row]  # ties at the cut left out: keep those of the lowest columns
        above = np.flatnonzero(values > cut[row])
        columns[row] = np.concatenate([above, np.flatnonzero(values == cut[row])[: k - above.size]])
    columns = np.sort(columns, axis=1)
    order = np.argsort(-np.take_along_axis(similarities, columns, axis=1), axis=1, kind="stable")
    return np.take_along_axis(columns, order, axis=1)


class BlockBuffers:
    """Blocks of similarities written into reused arrays (:func:`rank_by_similarity`'s kernel path).

    A block function may offer ``into(start, stop, out)``, writing the ``float32`` similarities of queries
    ``start`` to ``stop`` into ``out`` (a multithreaded product, :class:`~cpa_core.attack.attackers.tfidf.SimilarityBlocks`);
    the ranking then works in place on one ``float32`` and one ``float64`` array of ``chunk_size x m``, allocated
    once, instead of a handful of new temporaries per block.
    """

    def __init__(self, rows: int, m: int):
        self.similarities = np.empty((rows, m), dtype=np.float32)
        self.exponentials = np.empty((rows, m), dtype=np.float64)


def cut_ties_of(weights: np.ndarray, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the entries whose weight equals the last kept one's (a mask over ``weights``), and how many of them
    ``columns`` leaves out: the cut candidates tied with the last listed one. Ties are read on the weights, not on the
    similarities: distinct similarities whose exponentials underflow give one weight, 0, and tie (as without the
    shortlist). ``columns`` keeps at least one column and cuts some."""
    rows = np.arange(weights.shape[0])
    last = weights[rows, columns[:, -1]][:, None]
    tied = weights == last
    kept = np.count_nonzero(np.take_along_axis(weights, columns, axis=1) == last, axis=1)
    return tied, (np.count_nonzero(tied, axis=1) - kept).astype(np.int64)


def _rank_block_in_place(similarities: np.ndarray, scratch: np.ndarray, top_k: int | None, temperature: float
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Candidates, weights, tail and cut ties of one block, computed in place; the same numbers as the dense path.

    The weights are bitwise those of :func:`softmax_rows` (the same operations on the same values: float64
    similarities over ``T``, minus the row maximum, exponentials, over their row sum), and so are the cut ties (read on
    them); the tail is the row sum of the left-out weights below the last kept one, the dense path's sorted sum of
    them up to rounding (a sum of positive terms: relative difference of a few ``1e-16`` times ``log2 m``).
    """
    rows = np.arange(similarities.shape[0])[:, None]
    columns = ranked_columns(similarities, top_k)
    cut = 0 < columns.shape[1] < similarities.shape[1]
    np.copyto(scratch, similarities)  # float64, as the dense path's astype
    np.divide(scratch, temperature, out=scratch)
    top = np.max(scratch, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    np.subtract(scratch, top, out=scratch)
    np.exp(scratch, out=scratch)
    total = scratch.sum(axis=1, keepdims=True)
    np.divide(scratch, total, out=scratch, where=total > 0)  # the weights (a row of no finite similarity: all 0)
    weights = scratch[rows, columns]
    tail = ties = None
    if cut:
        tied, ties = cut_ties_of(scratch, columns)
        scratch[rows, columns] = 0.0
        scratch[tied] = 0.0  # the cut candidates tied with the last kept one are its tie group, not the tail
        tail = scratch.sum(axis=1)
    return columns, weights, tail, ties


class Ranking(NamedTuple):
    """What :func:`rank_by_similarity` returns: the kept candidates, their weights over the whole pool, the mass of
    the cut ones below each row's last kept candidate, how many cut ones tie with it and how many lie below it
    (``m - width - cut_ties``: every row's pool is the whole registry)."""

    candidates: np.ndarray
    weights: np.ndarray
    tail_mass: np.ndarray
    cut_ties: np.ndarray
    cut_below: np.ndarray


def rank_by_similarity(similarities: Callable[[int, int], np.ndarray], n: int, m: int, top_k: int | None,
                       temperature: float, chunk_size: int, progress: Progress | None = None,
                       kernel: bool | None = None) -> Ranking:
    """Top-``top_k`` candidates of ``n`` queries among ``m`` (all when ``None``), their softmax weights over
    the *whole* pool, and the mass of the candidates left out.

    The softmax is taken over all ``m`` candidates, so a shortlist keeps its candidates' weights unchanged
    (no renormalisation); the mass of the others is summed directly (not as one minus the kept mass, which
    would lose a tiny tail). ``similarities(start, stop)`` returns the dense ``(stop - start, m)`` block of
    queries ``start`` to ``stop``; blocks of ``chunk_size`` queries keep memory at ``chunk_size x m``.
    Candidates are ranked by decreasing similarity, ties by increasing column (:func:`ranked_columns`).

    ``kernel`` (default: the block function's own ``kernel`` attribute, else off): when the block function
    writes blocks in place (``into``, see :class:`BlockBuffers`), rank them in reused arrays, the rows of a block
    split among the block function's ``threads`` (numpy releases the interpreter lock; rows are independent); the
    results are those of the dense path (same candidates, bitwise weights, tails to rounding).

    Returns
    -------
    :class:`Ranking` (candidates, weights, tail_mass, cut_ties, cut_below): int32 (n, width), float64 (n, width),
    float64 (n,), int64 (n,) and int64 (n,), width ``min(top_k, m)``
    """
    width = m if top_k is None else min(top_k, m)
    candidates = np.empty((n, width), dtype=np.int32)
    weights = np.empty((n, width), dtype=np.float64)
    tail = np.zeros(n)
    ties = np.zeros(n, dtype=np.int64)
    if kernel is None:
        kernel = bool(getattr(similarities, "kernel", False))
    into = getattr(similarities, "into", None) if kernel else None
    buffers = BlockBuffers(min(chunk_size, n), m) if into is not None and n > 0 else None
    threads = max(1, int(getattr(similarities, "threads", 1))) if buffers is not None else 1
    pool = ThreadPoolExecutor(threads) if threads > 1 else None
    try:
        for start in range(0, n, chunk_size):
            stop = min(start + chunk_size, n)
            if buffers is not None:
                into(start, stop, buffers.similarities[: stop - start])

                def rank(part: slice) -> None:  # rows are independent: each thread ranks its own rows
                    rows = slice(start + part.start, start + part.stop)
                    index, values, left, tied = _rank_block_in_place(buffers.similarities[part],
                                                                     buffers.exponentials[part], top_k, temperature)
                    candidates[rows], weights[rows] = index, values
                    if left is not None:
                        tail[rows], ties[rows] = left, tied

                parts = [slice(int(a[0]), int(a[-1]) + 1) for a in np.array_split(np.arange(stop - start), threads)
                         if a.size]
                if pool is not None:
                    list(pool.map(rank, parts))
                else:
                    rank(parts[0])
            else:
                given = np.asarray(similarities(start, stop))
                raw = given.astype(np.float64)
                block = softmax_rows(raw, temperature)
                index = ranked_columns(given, top_k)  # a float32 block orders as its float64 copy, and faster
                candidates[start:stop] = index
                weights[start:stop] = np.take_along_axis(block, index, axis=1)
                if 0 < width < m:
                    tied, ties[start:stop] = cut_ties_of(block, index)
                    np.put_along_axis(block, index, 0.0, axis=1)  # what is left: the cut candidates
                    block[tied] = 0.0  # those tied with the last kept one are its tie group, not the tail
                    tail[start:stop] = np.sort(block, axis=1).sum(axis=1)
            if progress:
                progress(stop, n, "ranking the registry")
    finally:
        if pool is not None:
            pool.shutdown()
    below = m - width - ties if 0 < width < m else np.zeros(n, dtype=np.int64)
    return Ranking(candidates, weights, tail, ties, below)


def as_rows(index) -> np.ndarray | slice:
    """Row positions as an index: a slice when they are consecutive and ascending (numpy then gives views, which
    share the table's memory), else an integer array (copies). A slice is kept as it is."""
    if isinstance(index, slice):
        return index
    index = np.asarray(index, dtype=np.int64)
    if index.ndim == 1 and index.size and index[0] >= 0 and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0]) + index.size)
    return index


@dataclass(frozen=True)
class CandidateTable:
    """Ranked candidate pools of ``n`` documents.

    Attributes
    ----------
    doc_ids : ndarray of shape (n,)
    candidates : ndarray of shape (n, K), int
        Index into ``candidate_ids`` of each ranked candidate; ``-1`` is padding.
    weights : ndarray of shape (n, K), float
        Non-increasing along each row. Probabilities (or pseudo-posteriors) when ``weight_kind`` is
        ``"probability"``; minus the rank when the attacker gave only a ranking (``"rank"``).
    pool_sizes : ndarray of shape (n,), int
    candidate_ids : ndarray of shape (M,)
        Identity ids the indices refer to (the registry's, plus any extra the attacker named).
    queries : tuple of str, optional
        The query string each document was attacked with.
    weight_kind : str
    tail_mass : ndarray of shape (n,), optional
        Probability mass of each pool outside the table below its last listed candidate: candidates cut by a
        shortlist, invalid LLM picks. The APS score counts it below every listed candidate (``None``: none).
    cut_ties : ndarray of shape (n,), int, optional
        Candidates outside the table tied with each row's last listed candidate (cut by a shortlist at a tie): each
        weighs what it weighs (their mass is *not* in ``tail_mass``), and the scores count them in its tie group
        (:mod:`cpa_core.conformal.scores`).
    cut_below : ndarray of shape (n,), int, optional
        Candidates outside the table strictly below each row's last listed candidate (cut by a shortlist); their mass
        is in ``tail_mass``, and may be 0 (weights that underflow). A row with any is not a pool whose candidates all
        tie, whatever its mass below (``None``: none recorded; mass in ``tail_mass`` is then the only sign of them).
    clues : tuple of tuples of str, optional
        The LLM clues each query carried (``direct_plus_clues``: the query is the released text followed by
        them, :func:`~cpa_core.attack.explainers.clue_query`); ``None`` when the queries are the released texts.
    """

    doc_ids: np.ndarray
    candidates: np.ndarray
    weights: np.ndarray
    pool_sizes: np.ndarray
    candidate_ids: np.ndarray
    queries: tuple[str, ...] | None = None
    weight_kind: str = "probability"
    tail_mass: np.ndarray | None = None
    clues: tuple[tuple[str, ...], ...] | None = None
    cut_ties: np.ndarray | None = None
    cut_below: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.doc_ids.shape[0])

    @property
    def width(self) -> int:
        return int(self.candidates.shape[1])

    def rows(self, index: np.ndarray) -> CandidateTable:
        """The table restricted to the given rows (in that order); consecutive rows are views, not copies."""
        index = as_rows(index)
        return replace(self, doc_ids=self.doc_ids[index], candidates=self.candidates[index],
                       weights=self.weights[index], pool_sizes=self.pool_sizes[index],
                       queries=None if self.queries is None else tuple(np.asarray(self.queries, dtype=object)[index]),
                       tail_mass=None if self.tail_mass is None else self.tail_mass[index],
                       clues=None if self.clues is None else tuple(self.clues[i] for i in np.arange(len(self))[index]),
                       cut_ties=None if self.cut_ties is None else self.cut_ties[index],
                       cut_below=None if self.cut_below is None else self.cut_below[index])

    def truncate(self, k: int) -> CandidateTable:
        """The top-``k`` shortlist of each pool; the weights of the kept candidates are unchanged and the
        mass of the cut ones below the last kept candidate joins ``tail_mass`` (no renormalisation over the
        shortlist), and the cut ones are counted: tied with it (``cut_ties``) or below it (``cut_below``)."""
        if k < 1:
            raise ValueError(f"top-K must be at least 1, found {k}")
        if k >= self.width:
            return self
        real = np.arange(k, self.width)[None, :] < self.pool_sizes[:, None]
        pools = np.minimum(self.pool_sizes, k)
        rows = np.arange(len(self))
        last = self.weights[rows, np.maximum(pools - 1, 0)]
        tied = real & (self.weights[:, k:] == last[:, None])
        ties = np.count_nonzero(tied, axis=1).astype(np.int64)
        below = np.count_nonzero(real & ~tied, axis=1).astype(np.int64)
        if self.cut_below is not None:  # cut before, below the old last listed one: below the new one too
            below += self.cut_below
        tail = (np.zeros(len(self)) if self.tail_mass is None else self.tail_mass)
        if self.weight_kind == "probability":
            cut = np.where(real & ~tied, self.weights[:, k:], 0.0)
            tail = tail + np.sort(np.where(np.isfinite(cut), cut, 0.0), axis=1).sum(axis=1)
        if self.cut_ties is not None:  # ties cut before: the new last's tie group when they tie with it, else below
            old_last = self.weights[rows, np.maximum(np.minimum(self.pool_sizes, self.width) - 1, 0)]
            same = old_last == last
            ties += np.where(same, self.cut_ties, 0)
            below += np.where(same, 0, self.cut_ties)
            if self.weight_kind == "probability":
                tail = tail + np.where(same, 0.0, self.cut_ties * np.where(np.isfinite(old_last), old_last, 0.0))
        ties, below = np.where(pools > 0, ties, 0), np.where(pools > 0, below, 0)
        return replace(self, candidates=self.candidates[:, :k].copy(), weights=self.weights[:, :k].copy(),
                       pool_sizes=pools, tail_mass=tail, cut_ties=ties, cut_below=below)

    def truth_positions(self, identity_ids) -> np.ndarray:
        """0-based position of each document's true identity in its ranked pool, ``-1`` if absent."""
        index = {ident: i for i, ident in enumerate(self.candidate_ids.tolist())}
        truth = np.array([index.get(ident, -2) for ident in identity_ids], dtype=np.int64)
        if self.width == 0 or len(truth) == 0:
            return np.full(len(truth), -1)
        position = (self.candidates == truth[:, None]).argmax(axis=1)
        found = self.candidates[np.arange(len(truth)), position] == truth
        return np.where(found, position, -1)
