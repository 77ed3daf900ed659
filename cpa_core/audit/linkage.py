"""The linkage probability: how likely the attacker's first guess is a document's subject, from a label-free
description of the attack on that document, calibrated on the labelled documents (METHOD, "Linkage probability").

The description (:func:`attack_features`) reads the document's ranked candidates and what the whole release says
about its first candidate, never a label:

- the attacker's certainty (top-1 margin), its first weight, the log ratio of its first two weights, the gap between
  its second and third, the entropy of its listed weights;
- how many documents of the release the first candidate is the first guess of, and how many list it among their first
  :data:`SHORTLIST` (a candidate every document falls on is a hub, not a match);
- how many documents claim the first candidate more strongly than this one, how far this claim is below the
  strongest, and the claim against the candidate's usual strongest claims (the cross-domain similarity local scaling
  of Conneau et al. 2018): the claims are each document's weights of its first :data:`CLAIMS` candidates;
- the length of the text the attacker read (a short post leaves little to match);
- what the document's :data:`NEIGHBOURS` nearest documents of the release make of its first candidate (their texts'
  TF-IDF cosine, the document itself never among them): how many of them guess it first, weighted by their
  similarity too, their mean weight on it, and how close they are. Documents by one person tend to resemble each other
  and to fall on the same candidate; a first guess no similar document shares is more often wrong;
- over an attacker panel, what each of the member's *peers* (the panel's other members whose attack of one text is
  cheap, :attr:`~cpa_core.attack.base.AttackerBase.costly_rescoring`) makes of the same document
  (:func:`peer_features`): where it ranks this member's first candidate, its weight on it and how far that is below
  its own first weight, and its certainty. A document every attacker places on the same person is linked far more
  often than one only this attacker places there.

With enough labelled documents of both outcomes (:data:`MIN_CALIBRATING`, :data:`MIN_EACH`), a gradient-boosted
model turns the description into one statistic, cross-fitted: the calibrating documents are cut into :data:`FOLDS`
folds at random (the audit's seed), fold ``k``'s statistic is learned from the other folds' labels, and cross
Venn-Abers (:func:`~cpa_core.conformal.venn_abers.cross_venn_abers`) calibrates it, so that no probability reads its
own document's label. It is learned in two stages: a first stage from the description, then fold ``k``'s scorer
from the description and what fold ``k``'s first stage says of the release's other documents that guess the
document's first candidate first, its nearest ones and all of them (:data:`NEIGHBOUR_STATISTICS`): two posts of one
author that fall on the same candidate are linked or not together, and one of them may show it where the other
cannot. Both stages of fold ``k`` are learned without fold ``k``'s labels, so fold ``k``'s calibration documents and
any other document get their statistic alike, and the calibration holds. Each stage is learned from two thirds of
the fold's training documents and checked on the third held out of its fit (:data:`HELD_OUT`): it keeps the
certainty when the learned one does no better. With fewer labelled documents, the statistic is the certainty alone,
calibrated by one inductive Venn-Abers fit.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import entr, expit
from threadpoolctl import threadpool_limits

from cpa_core.attack.candidates import CandidateTable
from cpa_core.attack.tfidf_index import TfidfIndex, kernel_threads
from cpa_core.audit.stratification import certainty
from cpa_core.common.errors import ConfigError
from cpa_core.conformal.venn_abers import (
    CrossVennAbersModel,
    VennAbers,
    VennAbersModel,
    cross_venn_abers,
    level_of,
)

FOLDS = 5
"""The folds the calibrating documents are cut into, each calibrating a statistic learned from the others."""
MIN_CALIBRATING = 500
"""The fewest calibrating documents for a learned statistic (below, the certainty alone)."""
MIN_EACH = 50
"""The fewest calibrating documents of each outcome (linked at first guess or not) for a learned statistic."""
SHORTLIST = 5
"""A candidate is on a document's shortlist when it is among its first five."""
CLAIMS = 10
"""A document claims its first ten candidates (their weights), for the reciprocal features."""
NEIGHBOURS = 10
"""A document's neighbours are its ten most similar documents of the release (:class:`ReleaseTexts`)."""
FEATURES = ("certainty", "first_weight", "log_ratio", "second_gap", "entropy", "first_guess_of", "shortlisted_by",
            "stronger_claims", "below_strongest", "local_scaling", "characters", "neighbours_agreeing",
            "agreeing_similarity", "neighbours_weight", "nearest_similarity", "neighbour_similarity")
"""The label-free description of the attack on a document, in :func:`attack_features`' column order."""
NEIGHBOUR_STATISTICS = ("nearest_first_stage_highest", "nearest_first_stage_weighted", "claimants_first_stage_highest",
                        "claimants_first_stage_sum")
"""What the first stage says of a document's nearest documents that guess its first candidate first, and of its
claimants (the release's other documents with the same first guess) (:meth:`Neighbourhood.statistics`), the last
columns the scorers read."""
PEER_FEATURES = ("rank_of_first_guess", "weight_on_first_guess", "below_its_first", "certainty")
"""What a peer makes of a document, per peer (:func:`peer_features`' column order)."""
PEER_DEPTH = 20
"""A peer's first twenty candidates are searched for this member's first guess (beyond: rank ``PEER_DEPTH + 1``)."""
HELD_OUT = 1 / 3
"""The share of a fold's training documents held out to check its scorer against the certainty."""
SCORER = {"max_iter": 150, "learning_rate": 0.1, "max_leaf_nodes": 16, "min_samples_leaf": 40,
          "early_stopping": False, "random_state": 0}
"""The gradient-boosted scorer's settings (scikit-learn ``HistGradientBoostingClassifier``; deterministic)."""


@dataclass(frozen=True)
class ReleaseTexts:
    """The texts of the release as the attacker read them (``texts``, rows in the release's order, and their document
    ids ``doc_ids``), indexed by TF-IDF (``index``; its vectors are unit length), for a document's nearest documents
    of the release (:meth:`nearest`). Built once per release (:meth:`of`): a panel's members read the same texts."""

    texts: tuple[str, ...]
    doc_ids: tuple[str, ...]
    index: TfidfIndex

    @staticmethod
    @functools.lru_cache(maxsize=2)
    def of(texts: tuple[str, ...], doc_ids: tuple[str, ...]) -> ReleaseTexts | None:
        """``None`` when the texts leave no vocabulary (every word in one text only, say)."""
        try:
            index = TfidfIndex(min_df=2).fit(texts)
        except ConfigError:
            return None
        return ReleaseTexts(texts, doc_ids, index)

    @functools.cached_property
    def _columns(self):
        return self.index.profiles_.T.tocsr()

    @functools.cached_property
    def _release_ids(self) -> np.ndarray:
        return np.asarray(self.doc_ids, dtype=str)

    @functools.cached_property
    def _own(self) -> tuple[np.ndarray, np.ndarray]:
        return self._nearest(self.texts, self.doc_ids)

    def nearest(self, texts: Sequence[str], doc_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Each text's :data:`NEIGHBOURS` most similar rows of the release that share a word with it, never a row of
        the text's own document, and their similarities (``-1``, ``nan``: fewer such rows). Cosine, descending, a tie
        to the lower row: ``sparse_dot_topn``'s top-n product on every core, which breaks a tie at the last place
        kept by its own rule, the same for a text searched alone or with others and on any number of cores (tested).
        The release's own texts are searched once."""
        if tuple(doc_ids) == self.doc_ids and tuple(texts) == self.texts:
            return self._own
        return self._nearest(texts, doc_ids)

    def _nearest(self, texts: Sequence[str], doc_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        from sparse_dot_topn import sp_matmul_topn

        n = len(texts)
        rows, similarities = np.full((n, NEIGHBOURS), -1, dtype=np.int64), np.full((n, NEIGHBOURS), np.nan)
        if n == 0 or not self.doc_ids:
            return rows, similarities
        own, release = np.asarray(doc_ids).astype(str), self._release_ids
        product = sp_matmul_topn(self.index.transform(texts), self._columns, top_n=NEIGHBOURS + 1,
                                 n_threads=kernel_threads()).tocsr()
        for i in range(n):
            found = slice(product.indptr[i], product.indptr[i + 1])
            columns, values = product.indices[found], product.data[found].astype(float)
            keep = (release[columns] != own[i]) & (values > 0)
            columns, values = columns[keep], values[keep]
            order = np.lexsort((columns, -values))[:NEIGHBOURS]
            rows[i, :order.size], similarities[i, :order.size] = columns[order], values[order]
        return rows, similarities


@dataclass(frozen=True)
class Neighbourhood:
    """Per document, the documents of the release it is read beside: its :data:`NEIGHBOURS` nearest (their rows,
    ``-1``: fewer or no texts; their similarities; whether each guesses the document's first candidate first,
    ``agreeing``), and its *claimants*, the release's other documents whose first guess is its first guess
    (``guesses``: each document's first guess as a position in the context's ids, ``-1``: none; ``own``: the
    release row of the document's own id, ``-1``: none; ``release_guesses``: each release row's first guess)."""

    rows: np.ndarray
    similarities: np.ndarray
    agreeing: np.ndarray
    guesses: np.ndarray
    own: np.ndarray
    release_guesses: np.ndarray

    @staticmethod
    def stacked(parts: Sequence[Neighbourhood]) -> Neighbourhood:
        """The neighbourhoods of tables read one after the other (rows concatenated in order)."""
        return Neighbourhood(*(np.concatenate([getattr(n, name) for n in parts]) for name in
                               ("rows", "similarities", "agreeing", "guesses", "own")), parts[0].release_guesses)

    def statistics(self, statistic: np.ndarray) -> np.ndarray:
        """What a statistic of the release's documents (``statistic``, by release row: log odds, as a scorer's) says
        of each document's neighbours, the columns :data:`NEIGHBOUR_STATISTICS`, each statistic turned into a
        probability (its logistic): the highest among the agreeing nearest documents, their sum weighted by their
        similarities, the highest among the claimants and their sum (each 0: none)."""
        odds = expit(np.asarray(statistic, dtype=float))
        near = np.where(self.agreeing, odds[np.maximum(self.rows, 0)], 0.0)
        out = np.zeros((self.rows.shape[0], len(NEIGHBOUR_STATISTICS)))
        out[:, 0] = near.max(axis=1, initial=0.0)
        out[:, 1] = (near * np.nan_to_num(self.similarities)).sum(axis=1)
        out[:, 2:] = self._claimants(odds)
        return out

    def _claimants(self, odds: np.ndarray) -> np.ndarray:
        """The highest of the claimants' ``odds`` (by release row) and their sum, per document (0: none)."""
        out = np.zeros((self.guesses.shape[0], 2))
        guessed = np.flatnonzero(self.release_guesses >= 0)
        if guessed.size == 0:
            return out
        width = int(self.release_guesses.max()) + 1
        sums = np.bincount(self.release_guesses[guessed], weights=odds[guessed], minlength=width)
        ranked = guessed[np.lexsort((-odds[guessed], self.release_guesses[guessed]))]  # by guess, the highest first
        starts = np.searchsorted(self.release_guesses[ranked], np.arange(width + 1))
        counts = np.diff(starts)
        top, runner = np.full(width + 1, -1), np.full(width + 1, -1)  # the last: a guess no release row has
        top[:width][counts > 0] = ranked[starts[:-1][counts > 0]]
        runner[:width][counts > 1] = ranked[starts[:-1][counts > 1] + 1]
        guess = np.where((self.guesses >= 0) & (self.guesses < width), self.guesses, width)
        own = np.maximum(self.own, 0)
        mine = (self.own >= 0) & (self.release_guesses[own] == guess)  # its own original is never a claimant
        best = np.where(mine & (top[guess] == self.own), runner[guess], top[guess])
        out[:, 0] = np.where(best >= 0, odds[np.maximum(best, 0)], 0.0)
        out[:, 1] = np.append(sums, 0.0)[guess] - np.where(mine, odds[own], 0.0)
        return out


@dataclass(frozen=True)
class ReleaseContext:
    """What the attacked release as a whole says about each candidate, label-free: ``ids`` (sorted) and, per id, the
    documents whose first guess it is (``firsts``), that list it among their first :data:`SHORTLIST`
    (``shortlists``), and the claims on it (``claims[starts[i]:starts[i + 1]]``, descending: the weights it has
    among documents' first :data:`CLAIMS` candidates); per document of the release (rows in order), its first
    :data:`CLAIMS` candidates as positions in ``ids`` (``listed``, ``-1``: none) and their weights
    (``listed_weights``), and its text (``texts``; ``None`` when the tables carry no texts or they leave no
    vocabulary)."""

    ids: np.ndarray
    firsts: np.ndarray
    shortlists: np.ndarray
    claims: np.ndarray
    starts: np.ndarray
    listed: np.ndarray
    listed_weights: np.ndarray
    texts: ReleaseTexts | None
    doc_ids: np.ndarray

    @functools.cached_property
    def by_id(self) -> np.ndarray:
        """The release's rows in the order of their document ids."""
        return np.argsort(self.doc_ids, kind="stable")

    @classmethod
    def of(cls, tables: Sequence[CandidateTable]) -> ReleaseContext:
        ids = np.unique(np.concatenate([np.asarray(t.candidate_ids).astype(str) for t in tables]))
        firsts, shortlists = np.zeros(ids.size, dtype=np.int64), np.zeros(ids.size, dtype=np.int64)
        owners, weights, listed_rows, listed_weights = [], [], [], []
        for table in tables:
            listed = _positions(table, ids, max(SHORTLIST, CLAIMS))
            claimed = np.full((listed.shape[0], CLAIMS), -1, dtype=np.int64)
            claimed[:, :min(CLAIMS, listed.shape[1])] = listed[:, :CLAIMS]
            claim_weights = np.zeros(claimed.shape)
            claim_weights[:, :min(CLAIMS, listed.shape[1])] = np.asarray(table.weights[:, :CLAIMS], dtype=float)
            claim_weights[claimed < 0] = 0.0
            listed_rows.append(claimed)
            listed_weights.append(claim_weights)
            if listed.shape[1] == 0:
                continue
            firsts += np.bincount(listed[:, 0][listed[:, 0] >= 0], minlength=ids.size)
            short = listed[:, :SHORTLIST]
            shortlists += np.bincount(short[short >= 0], minlength=ids.size)
            owners.append(claimed[claimed >= 0])
            weights.append(claim_weights[claimed >= 0])
        owners = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
        weights = np.concatenate(weights) if weights else np.zeros(0)
        order = np.lexsort((-weights, owners))
        starts = np.searchsorted(owners[order], np.arange(ids.size + 1))
        texts = None
        if tables and all(t.queries is not None for t in tables):
            texts = ReleaseTexts.of(tuple(q for t in tables for q in t.queries),
                                    tuple(str(d) for t in tables for d in t.doc_ids))
        doc_ids = np.concatenate([np.asarray(t.doc_ids).astype(str) for t in tables]) if tables else \
            np.zeros(0, dtype=str)
        return cls(ids, firsts, shortlists, weights[order], starts, np.concatenate(listed_rows),
                   np.concatenate(listed_weights), texts, doc_ids)

    def neighbourhood(self, table: CandidateTable) -> Neighbourhood:
        """Each document's nearest documents of the release (:meth:`ReleaseTexts.nearest`; none without texts) and
        which of them guess its first candidate first, and its claimants."""
        n = len(table.doc_ids)
        positions = _positions(table, self.ids, 1)[:, 0] if table.candidates.shape[1] else np.full(n, -1)
        if self.texts is None or table.queries is None:
            rows, similarities = np.full((n, NEIGHBOURS), -1, dtype=np.int64), np.full((n, NEIGHBOURS), np.nan)
        else:
            rows, similarities = self.texts.nearest(table.queries, table.doc_ids)
        found = rows >= 0
        agreeing = found & (self.listed[np.maximum(rows, 0), 0] == positions[:, None]) & (positions >= 0)[:, None]
        ids, own = np.asarray(table.doc_ids).astype(str), np.full(n, -1, dtype=np.int64)
        if self.doc_ids.size:
            where = self.by_id[np.clip(np.searchsorted(self.doc_ids[self.by_id], ids), 0, self.doc_ids.size - 1)]
            own = np.where(self.doc_ids[where] == ids, where, -1)
        return Neighbourhood(rows, similarities, agreeing, positions, own, self.listed[:, 0])

    def neighbours(self, near: Neighbourhood) -> np.ndarray:
        """What each document's nearest documents of the release (``near``) make of its first candidate, the last five
        columns of :data:`FEATURES` (``nan`` without nearest documents)."""
        positions, rows, similarities, agreeing = near.guesses, near.rows, near.similarities, near.agreeing
        out = np.full((positions.shape[0], 5), np.nan)
        found = rows >= 0
        safe = np.maximum(rows, 0)
        on_it = np.where(found & (positions >= 0)[:, None],
                         np.where(self.listed[safe] == positions[:, None, None], self.listed_weights[safe], 0.0
                                  ).sum(axis=2), 0.0)
        counted = found.sum(axis=1)
        with np.errstate(invalid="ignore"):
            out[:, 0] = agreeing.sum(axis=1) / counted
            out[:, 1] = np.where(agreeing, similarities, 0.0).sum(axis=1)
            out[:, 2] = on_it.sum(axis=1) / counted
            out[:, 3] = similarities[:, 0]
            out[:, 4] = np.where(found, similarities, 0.0).sum(axis=1) / counted
        out[counted == 0] = np.nan
        return out

    def stronger_claims(self, positions: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Per (candidate position, weight): the claims on the candidate strictly above the weight."""
        out = np.zeros(positions.shape[0])
        for position in np.unique(positions[positions >= 0]).tolist():
            rows = positions == position
            segment = self.claims[self.starts[position]:self.starts[position + 1]]
            out[rows] = np.searchsorted(-segment, -weights[rows], side="left")
        return out

    def strongest(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate position: its strongest claim and the mean of its :data:`CLAIMS` strongest (``nan``: none)."""
        best, usual = np.full(positions.shape[0], np.nan), np.full(positions.shape[0], np.nan)
        for position in np.unique(positions[positions >= 0]).tolist():
            segment = self.claims[self.starts[position]:self.starts[position + 1]]
            if segment.size:
                rows = positions == position
                best[rows], usual[rows] = segment[0], segment[:CLAIMS].mean()
        return best, usual


def _positions(table: CandidateTable, ids: np.ndarray, columns: int) -> np.ndarray:
    """The table's first ``columns`` ranked candidates as positions in the sorted ``ids`` (``-1``: padding or an id
    not there)."""
    names = np.asarray(table.candidate_ids).astype(str)
    candidates = np.asarray(table.candidates)[:, :columns]
    if names.size == 0 or ids.size == 0:
        return np.full(candidates.shape, -1, dtype=np.int64)
    where = np.clip(np.searchsorted(ids, names), 0, ids.size - 1)
    lookup = np.where(ids[where] == names, where, -1)
    return np.where(candidates >= 0, lookup[np.maximum(candidates, 0)], -1)


def _entropy(weights: np.ndarray, pools: np.ndarray, block: int = 1024) -> np.ndarray:
    """The entropy of each row's listed weights (its first ``pools`` columns), a block of rows at a time (a table
    without a shortlist is as wide as the registry)."""
    out = np.empty(weights.shape[0])
    columns = np.arange(weights.shape[1])[None, :]
    for start in range(0, weights.shape[0], block):
        rows = slice(start, start + block)
        listed = np.where(columns < pools[rows, None], np.asarray(weights[rows], dtype=float), 0.0)
        out[rows] = entr(listed).sum(axis=1)
    return out


def feature_names(peers: Sequence[str] = ()) -> list[str]:
    """The columns of :func:`attack_features` with these peers (by attacker name)."""
    return [*FEATURES, *(f"{peer}:{feature}" for peer in peers for feature in PEER_FEATURES)]


def peer_features(table: CandidateTable, peers: Sequence[CandidateTable]) -> np.ndarray:
    """What each peer's attack of the same documents (rows in the same order) makes of this attack's first guess
    (per peer, the columns :data:`PEER_FEATURES`): the log of the rank it gives it among its first
    :data:`PEER_DEPTH` (``log(PEER_DEPTH + 1)`` beyond), its weight on it (0 beyond), its first weight minus that
    (``nan`` beyond), and its certainty."""
    n = table.weights.shape[0]
    out = np.full((n, len(PEER_FEATURES) * len(peers)), np.nan)
    for j, peer in enumerate(peers):
        if peer.weights.shape[0] != n:
            raise ValueError(f"a peer's attack has {peer.weights.shape[0]} documents, this one {n}")
        columns = slice(j * len(PEER_FEATURES), (j + 1) * len(PEER_FEATURES))
        ids = np.unique(np.concatenate([np.asarray(t.candidate_ids).astype(str) for t in (table, peer)]))
        guesses = _positions(table, ids, 1)[:, 0] if table.candidates.shape[1] else np.full(n, -1)
        listed = _positions(peer, ids, PEER_DEPTH)
        depth = listed.shape[1]
        hit = (listed == guesses[:, None]) & (guesses >= 0)[:, None]
        found = hit.any(axis=1)
        weights = np.asarray(peer.weights[:, :depth], dtype=float)
        on_it = np.where(hit, weights, 0.0).sum(axis=1)
        block = out[:, columns]
        block[:, 0] = np.log(np.where(found, hit.argmax(axis=1) + 1, PEER_DEPTH + 1))
        block[:, 1] = np.where(found, on_it, 0.0)
        block[:, 2] = np.where(found, weights[:, 0] - on_it, np.nan) if depth else np.nan
        block[:, 3] = certainty(peer)
    return out


def attack_features(table: CandidateTable, context: ReleaseContext,
                    peers: Sequence[CandidateTable] = (), near: Neighbourhood | None = None) -> np.ndarray:
    """The description of the attack on each document of the table (columns :func:`feature_names`: :data:`FEATURES`,
    then :func:`peer_features` of each peer's attack of the same documents; ``nan`` where a feature does not apply,
    e.g. ratios of weights that are ranks). ``near``: the table's :meth:`ReleaseContext.neighbourhood`, when known."""
    if near is None:
        near = context.neighbourhood(table)
    if peers:
        own = attack_features(table, context, near=near)
        out = np.concatenate([own, peer_features(table, peers)], axis=1)
        out[~np.isfinite(out)] = np.nan
        return out
    n = table.weights.shape[0]
    out = np.full((n, len(FEATURES)), np.nan)
    if n == 0:
        return out
    out[:, 0] = certainty(table)
    width = table.weights.shape[1]
    if width == 0:
        return out
    weights = np.asarray(table.weights[:, :3], dtype=float)  # the whole width only for the entropy, in blocks
    pools = np.minimum(table.pool_sizes, width)
    first = np.where(pools > 0, weights[:, 0], np.nan)
    second = np.where(pools > 1, weights[:, 1], np.nan) if width > 1 else np.full(n, np.nan)
    third = np.where(pools > 2, weights[:, 2], np.nan) if width > 2 else np.full(n, np.nan)
    probability = table.weight_kind == "probability"
    with np.errstate(divide="ignore", invalid="ignore"):
        out[:, 1] = first
        if probability:
            out[:, 2] = np.log(first) - np.log(second)
            out[:, 4] = _entropy(table.weights, pools)
        out[:, 3] = second - third
    positions = near.guesses
    known = positions >= 0
    out[known, 5] = context.firsts[positions[known]]
    out[known, 6] = context.shortlists[positions[known]]
    claims = np.where(np.isfinite(first), first, -np.inf)
    out[:, 7] = np.where(known, context.stronger_claims(positions, claims), np.nan)
    best, usual = context.strongest(positions)
    out[:, 8] = first - best
    out[:, 9] = 2 * first - usual
    if table.queries is not None:
        out[:, 10] = np.log1p([len(query) for query in table.queries])
    out[:, 11:16] = context.neighbours(near)
    out[~np.isfinite(out)] = np.nan
    return out


@dataclass(frozen=True)
class LinkageModel:
    """A stored linkage fit, for any document attacked as the release was (an edited text, say): the release's
    context and one scorer per fold (none: the statistic is the certainty), the cross Venn-Abers calibration of
    each fold's statistic, the peers whose attacks of the same documents the scorers read (attacker names, in
    column order; none without scorers), and per fold the first stage's statistic of every document of the release
    (by release row), which the fold's scorer reads of a document's neighbours (none without scorers)."""

    context: ReleaseContext | None
    scorers: tuple
    empty: tuple[int, ...]
    calibration: CrossVennAbersModel
    peers: tuple[str, ...] = ()
    first_stage: tuple[np.ndarray, ...] = ()

    def statistics(self, table: CandidateTable, peers: Sequence[CandidateTable] = ()) -> list[np.ndarray]:
        """Each fold's statistic of the table's documents (``peers``: each of :attr:`peers`' attacks of them, in
        order)."""
        if not self.scorers:
            return [certainty(table)]
        if len(peers) != len(self.peers):
            raise ValueError(f"the linkage fit reads the attacks of {len(self.peers)} peers "
                             f"({', '.join(self.peers) or 'none'}), {len(peers)} given")
        near = self.context.neighbourhood(table)
        features = attack_features(table, self.context, peers, near)
        features[:, list(self.empty)] = 0.0
        with threadpool_limits(1):
            return [_statistic(scorer, _with_neighbours(features, near, first))
                    for scorer, first in zip(self.scorers, self.first_stage)]

    def predict(self, table: CandidateTable, peers: Sequence[CandidateTable] = ()) -> VennAbers:
        """The linkage probability of the table's documents (each attacked as the release was, and by each of
        :attr:`peers` in ``peers``) among the stored calibration documents."""
        return self.calibration.predict(self.statistics(table, peers))

    @property
    def floor(self) -> float:
        """The lowest linkage probability the fit gives a new document: what the stored calibration can show of the
        least identifiable documents of the release."""
        return self.calibration.floor

    def describe(self) -> dict:
        """How the probability is estimated, for the manifest and the report."""
        calibrating = [int(model.totals.sum()) for model in self.calibration.folds]
        if not self.scorers:
            return {"method": "inductive Venn-Abers", "statistic": "certainty", "calibrating": sum(calibrating)}
        return {"method": "cross Venn-Abers", "statistic": "gradient-boosted, cross-fitted",
                "features": [*feature_names(self.peers), *NEIGHBOUR_STATISTICS], "peers": list(self.peers),
                "folds": len(self.scorers),
                "calibrating": sum(calibrating),
                "folds_on_certainty": sum(scorer is None for scorer in self.scorers), "scorer": dict(SCORER)}


def fit_linkage(tables: Sequence[CandidateTable], events: np.ndarray, calibrating: np.ndarray,
                seed: int, peers: Sequence[tuple[str, Sequence[CandidateTable]]] = ()
                ) -> tuple[VennAbers, LinkageModel]:
    """The linkage probability of every document of the tables (rows concatenated in order), each without its own
    label, and the stored fit.

    Parameters
    ----------
    peers : ``(attacker name, its tables)`` of each peer, its tables the same documents as ``tables``, in order
    events : ndarray of shape (N,), bool: the attacker's first guess is the document's subject (read only where
        ``calibrating``)
    calibrating : ndarray of shape (N,), bool: the documents whose label calibrates
    seed : the folds' random cut
    """
    events = np.asarray(events, dtype=bool)
    calibrating = np.asarray(calibrating, dtype=bool)
    folds = np.full(events.shape[0], -1, dtype=np.int64)
    members = np.flatnonzero(calibrating)
    hits = int(events[members].sum())
    if members.size < MIN_CALIBRATING or min(hits, members.size - hits) < MIN_EACH:
        return _on_certainty(tables, events, calibrating)
    context = ReleaseContext.of(tables)
    nears = [context.neighbourhood(t) for t in tables]
    features = np.concatenate([attack_features(t, context, [theirs[i] for _, theirs in peers], nears[i])
                               for i, t in enumerate(tables)])
    empty = tuple(np.flatnonzero(np.isnan(features).all(axis=0)).tolist())
    features[:, list(empty)] = 0.0  # a feature no document has (ranks, say): one constant value
    folds[np.random.default_rng(seed).permutation(members)] = np.arange(members.size) % FOLDS
    near = Neighbourhood.stacked(nears)
    with threadpool_limits(1):  # threaded boosting is many times slower on a busy machine, at this size
        scorers, models, levels, first_stage = [], [], [], []
        for k in range(FOLDS):
            training = (folds >= 0) & (folds != k)
            # the neighbours' first stage, learned as the scorer is: without fold k's labels
            first_stage.append(_statistic(_scorer(features, events, training, seed + k), features))
            described = _with_neighbours(features, near, first_stage[-1])
            scorer = _scorer(described, events, training, seed + k)
            statistic = _statistic(scorer, described)
            model = VennAbersModel.fit(statistic, events, folds == k)
            scorers.append(scorer)
            models.append(model)
            levels.append(level_of(model.cuts, statistic))
    if all(scorer is None for scorer in scorers):  # the certainty in every fold: one fit over every fold is finer
        return _on_certainty(tables, events, calibrating)
    return cross_venn_abers(levels, events, folds), LinkageModel(context, tuple(scorers), empty,
                                                                 CrossVennAbersModel(tuple(models)),
                                                                 tuple(name for name, _ in peers), tuple(first_stage))


def _with_neighbours(features: np.ndarray, near: Neighbourhood, first_stage: np.ndarray) -> np.ndarray:
    """The description with what a first stage says of each document's neighbours (:meth:`Neighbourhood.statistics`)."""
    return np.concatenate([features, near.statistics(first_stage)], axis=1)


def _statistic(scorer, features: np.ndarray) -> np.ndarray:
    """A scorer's statistic of the documents, or their certainty (the first column) where there is no scorer."""
    return features[:, 0] if scorer is None else scorer.decision_function(features)


def _on_certainty(tables: Sequence[CandidateTable], events: np.ndarray, calibrating: np.ndarray
                  ) -> tuple[VennAbers, LinkageModel]:
    """One inductive Venn-Abers fit of the certainty over every calibrating document."""
    statistic = np.concatenate([certainty(t) for t in tables]) if tables else np.zeros(0)
    model = VennAbersModel.fit(statistic, events, calibrating)
    fit = cross_venn_abers([level_of(model.cuts, statistic)], events, np.where(calibrating, 0, -1))
    return fit, LinkageModel(None, (), (), CrossVennAbersModel((model,)))


def _scorer(features: np.ndarray, events: np.ndarray, train: np.ndarray, seed: int):
    """A fold's scorer learned from two thirds of the training documents, or ``None`` (the certainty) when, on the
    third held out of its fit (:data:`HELD_OUT`), it tells linked from unlinked documents no better than the certainty
    does: a small release, or an attacker whose margin says all there is. (Where the held-out third or the rest has
    one outcome only, the scorer is learned from every training document, unchecked.)"""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score

    rows = np.flatnonzero(train)
    held = np.zeros(rows.size, dtype=bool)
    held[np.random.default_rng(seed).permutation(rows.size)[:int(rows.size * HELD_OUT)]] = True
    fit_rows, check_rows = rows[~held], rows[held]
    if np.unique(events[check_rows]).size < 2 or np.unique(events[fit_rows]).size < 2:
        return HistGradientBoostingClassifier(**SCORER).fit(features[rows], events[rows])
    scorer = HistGradientBoostingClassifier(**SCORER).fit(features[fit_rows], events[fit_rows])
    learned = roc_auc_score(events[check_rows], scorer.decision_function(features[check_rows]))
    return scorer if learned > roc_auc_score(events[check_rows], features[check_rows, 0]) else None
