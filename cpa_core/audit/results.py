"""What an audit computed: the scored splits, the certificates at each level and the result that
holds them (data only: reports and records read it)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property

import numpy as np

from cpa_core.attack.candidates import CandidateTable, as_rows
from cpa_core.audit.configuration import AuditConfig
from cpa_core.audit.linkage import LinkageModel, fit_linkage
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.common.errors import ConfigError
from cpa_core.conformal.calibration import (
    ALL,
    Calibration,
    CalibrationScores,
    LeaveOneOutRanking,
    confidence_label,
    exact_fraction,
    set_size_table,
    set_sizes,
)
from cpa_core.conformal.scores import Score, get_score, tie_pessimistic_ranks
from cpa_core.conformal.venn_abers import VennAbers


@dataclass(frozen=True)
class ScoredSplit:
    """One split (calibration or test), attacked and scored.

    Attributes
    ----------
    table : CandidateTable with n rows
    truth_ids : ndarray (n,)
    groups : ndarray (n,) or None
    sorted_scores : ndarray (n, K), each row non-decreasing (stored scale, see :mod:`cpa_core.conformal.scores`)
    truth_positions : ndarray (n,), -1 where the truth is outside the pool
    truth_scores : ndarray (n,), +inf where the truth is outside the pool
    truth_ranks : ndarray (n,), tie-pessimistic rank of the truth (1 = top), 0 outside the pool
    score_name : the nonconformity score (``score.to_method`` gives the METHOD's scale for display)
    with_candidates : ``False`` for the documents' own facts without their ranked candidates (the table and the
        scores have no columns; :meth:`documents`): such a split calibrates but certifies nothing
    strata : ndarray (n,) of stratum labels, or None: the strata calibration runs in (declared groups crossed with
        certainty bins, :mod:`cpa_core.audit.stratification`); ``None``: the groups, if any, else one stratum
    """

    table: CandidateTable
    truth_ids: np.ndarray
    groups: np.ndarray | None
    sorted_scores: np.ndarray = field(repr=False)
    truth_positions: np.ndarray = field(repr=False)
    truth_scores: np.ndarray = field(repr=False)
    truth_ranks: np.ndarray = field(repr=False)
    score_name: str = "aps"
    with_candidates: bool = True
    strata: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def build(cls, table: CandidateTable, truth_ids, groups, score: str) -> ScoredSplit:
        positions = table.truth_positions(truth_ids)
        scores = get_score(score).sorted_scores(table.weights, table.pool_sizes, table.tail_mass, table.cut_ties,
                                                table.cut_below)
        rows = np.arange(len(table))
        hit = positions >= 0
        if len(table) and table.width:
            truth_scores = np.where(hit, scores[rows, np.maximum(positions, 0)], np.inf)
            ranks = tie_pessimistic_ranks(table.weights, table.pool_sizes, np.maximum(positions, 0), table.cut_ties)
            truth_ranks = np.where(hit, ranks, 0).astype(np.int64)
        else:  # no document has a candidate: every truth is a miss
            truth_scores, truth_ranks = np.full(len(table), np.inf), np.zeros(len(table), dtype=np.int64)
        return cls(table, np.asarray(truth_ids, dtype=object), None if groups is None else np.asarray(groups, dtype=object),
                   scores, positions, truth_scores, truth_ranks, get_score(score).name)

    def __len__(self) -> int:
        return len(self.table)

    @property
    def score(self) -> Score:
        return get_score(self.score_name)

    @cached_property
    def group_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, codes)`` with ``groups == keys[codes]``, computed once per split."""
        return np.unique(self.groups.astype(str), return_inverse=True)

    @property
    def stratum_labels(self) -> np.ndarray | None:
        """The label of each document's calibration stratum (its group without certainty strata), or ``None``."""
        return self.strata if self.strata is not None else self.groups

    @cached_property
    def stratum_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, codes)`` with ``stratum_labels == keys[codes]``, computed once per split."""
        return np.unique(self.stratum_labels.astype(str), return_inverse=True)

    @cached_property
    def uninformative(self) -> np.ndarray:
        """Documents whose whole pool ties: the attacker tells their candidates apart in no way (their scores are
        ``-inf`` throughout, :mod:`cpa_core.conformal.scores`)."""
        if not self.sorted_scores.shape[1]:
            return np.zeros(len(self), dtype=bool)
        return np.isneginf(self.sorted_scores[:, 0])

    def among(self, other: ScoredSplit) -> np.ndarray:
        """Mask of this split's documents that are documents of ``other`` too (by doc id)."""
        return np.isin(self.table.doc_ids.astype(str), other.table.doc_ids.astype(str))

    @property
    def in_pool(self) -> np.ndarray:
        return self.truth_positions >= 0

    @cached_property
    def labelled(self) -> np.ndarray:
        """Documents whose true identity is known (a blank identity_id: unlabelled); computed once."""
        return np.array([t is not None for t in self.truth_ids], dtype=bool)

    def calibration_scores(self, miss_policy: str) -> tuple[np.ndarray, np.ndarray | None]:
        """Scores (and strata) used for calibration under the miss policy."""
        keep = self.in_pool if miss_policy == "exclude" else np.ones(len(self), dtype=bool)
        labels = self.stratum_labels
        return self.truth_scores[keep], None if labels is None else labels[keep]

    def rows(self, index) -> ScoredSplit:
        """The split restricted to the given rows (in that order); consecutive rows are views, not copies."""
        index = as_rows(index)
        return ScoredSplit(self.table.rows(index), self.truth_ids[index],
                           None if self.groups is None else self.groups[index], self.sorted_scores[index],
                           self.truth_positions[index], self.truth_scores[index], self.truth_ranks[index],
                           self.score_name, self.with_candidates, None if self.strata is None else self.strata[index])

    def documents(self, index) -> ScoredSplit:
        """The documents at the given rows with their own facts (ids, groups, the truth's position, score and rank)
        but not their ranked candidates: what calibration reads, without a copy of the candidates of rows that are
        not consecutive (the release protocol's calibration documents, whose candidates are this split's rows)."""
        index = as_rows(index)
        table = self.table
        facts = replace(table, candidates=table.candidates[:, :0], weights=table.weights[:, :0], queries=None,
                        clues=None).rows(index)
        return ScoredSplit(facts, self.truth_ids[index], None if self.groups is None else self.groups[index],
                           self.sorted_scores[:, :0][index], self.truth_positions[index], self.truth_scores[index],
                           self.truth_ranks[index], self.score_name, with_candidates=False,
                           strata=None if self.strata is None else self.strata[index])

    def thresholds(self, calibration: Calibration, confidence) -> np.ndarray:
        """Each document's threshold under ``calibration`` at ``confidence``: its stratum's (``+inf`` for a stratum
        never calibrated), the pooled one when the calibration has a single stratum."""
        if self.stratum_labels is None or set(calibration.strata) == {ALL}:
            return calibration.thresholds_for(confidence, None, len(self))
        return calibration.thresholds_by_code(confidence, *self.stratum_codes)

    def check_candidates(self) -> None:
        """Refuse to certify a split that holds no ranked candidates (:meth:`documents`)."""
        if not self.with_candidates:
            raise ValueError("these documents' candidates are not kept here: certify them in the split that ranks "
                             "them (under the release protocol, the audited documents)")


@dataclass(frozen=True)
class Certificate:
    """Certified sets of the test documents at one confidence level."""

    confidence: Fraction
    q_hat: np.ndarray       # (n,) the threshold applied to each document (its stratum's)
    set_sizes: np.ndarray   # (n,)
    covered: np.ndarray     # (n,) bool: the truth is in the set
    split: ScoredSplit = field(repr=False)
    left_out: np.ndarray | None = field(default=None, repr=False)  # (n,) bool: calibrated without its own score
    linkage: np.ndarray | None = field(default=None, repr=False)  # (n,) the linkage probability (Venn-Abers)
    linkage_interval: VennAbers | None = field(default=None, repr=False)  # its interval [low, high] per document

    @cached_property
    def leakage(self) -> np.ndarray:
        """Leakage proxy ``1 / max(1, |C|)``: not a re-identification probability (computed once)."""
        return 1.0 / np.maximum(1, self.set_sizes)

    def flags(self, policy: ReleasePolicy) -> np.ndarray:
        """The documents ``policy`` flags: a set smaller than ``k`` or a linkage probability above the acceptable
        rate (:meth:`~cpa_core.audit.policy.ReleasePolicy.flags`)."""
        return policy.flags(self.set_sizes, self.linkage)

    def flag_reasons(self, policy: ReleasePolicy) -> np.ndarray:
        """Which rule flagged each document (``""``: none; :meth:`~cpa_core.audit.policy.ReleasePolicy.reasons`)."""
        return policy.reasons(self.set_sizes, self.linkage)

    def members(self, row: int) -> np.ndarray:
        """Identity ids in the certified set of test document ``row``, in ranked order."""
        index = self.split.table.candidates[row, : self.set_sizes[row]]
        return self.split.table.candidate_ids[index]


def release_ranking(split: ScoredSplit, members: np.ndarray) -> LeaveOneOutRanking:
    """The members' scores sorted once (per stratum when the split has strata or groups): what
    :func:`certify_release` reads."""
    codes = split.stratum_codes[1] if split.stratum_labels is not None else None
    return LeaveOneOutRanking(split.truth_scores, members, codes)


def certify_release(split: ScoredSplit, ranking: LeaveOneOutRanking, confidence,
                    linkage: VennAbers | None = None) -> Certificate:
    """Every document's set: members with the threshold of the other members (leave-one-out), the others
    with the threshold of all members; per group when the ranking is (:func:`release_ranking`)."""
    split.check_candidates()
    q_hat = ranking.thresholds([confidence])[0]
    sizes = set_sizes(split.sorted_scores, split.table.pool_sizes, q_hat)
    covered = split.in_pool & (split.truth_positions < sizes)
    return Certificate(exact_fraction(confidence), q_hat, sizes, covered, split, ranking.members,
                       *_linkage_fields(linkage))


def certify(split: ScoredSplit, calibration: Calibration, confidence, linkage: VennAbers | None = None
            ) -> Certificate:
    """Apply the calibrated thresholds to a scored split at one confidence level."""
    split.check_candidates()
    q_hat = split.thresholds(calibration, confidence)
    sizes = set_sizes(split.sorted_scores, split.table.pool_sizes, q_hat)
    covered = split.in_pool & (split.truth_positions < sizes)
    return Certificate(exact_fraction(confidence), q_hat, sizes, covered, split, None, *_linkage_fields(linkage))


def _linkage_fields(linkage: VennAbers | None) -> tuple:
    """A certificate's ``linkage`` and ``linkage_interval`` from a linkage fit."""
    return (None, None) if linkage is None else (linkage.p, linkage)


KEPT_CERTIFICATES = 16
"""Certificates an :class:`AuditResult` keeps, the levels asked most recently."""


@dataclass(frozen=True)
class AuditResult:
    """Everything an audit computed; certificates at any confidence level are derived from it."""

    config: AuditConfig
    calibration_split: ScoredSplit
    test_split: ScoredSplit
    calibration: Calibration
    inputs: dict = field(default_factory=dict)
    _extra_levels: dict = field(default_factory=dict, repr=False, compare=False)  # calibrations of other levels
    peers: tuple[AuditResult, ...] = field(default=(), repr=False, compare=False)
    """The audits of the same documents by this one's peers in an attacker panel, whose attacks its linkage
    probability also reads (:meth:`with_peers`; none outside a panel)."""
    _certificates: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # by level, the latest

    @cached_property
    def calibration_scores(self) -> CalibrationScores:
        """The calibration split's scores under the miss policy, by stratum: thresholds at any level."""
        scores, strata = self.calibration_split.calibration_scores(self.config.miss_policy)
        return CalibrationScores(scores, strata)

    def calibrate_at(self, confidences) -> Calibration:
        return self.calibration_scores.calibrate(confidences)

    def calibration_for(self, confidence) -> Calibration:
        """The stored calibration when it holds ``confidence``, else a fresh one from the stored scores."""
        label = confidence_label(confidence)
        if label in self.calibration.q_hat_:
            return self.calibration
        if label not in self._extra_levels:
            self._extra_levels[label] = self.calibrate_at([confidence])
        return self._extra_levels[label]

    @cached_property
    def members(self) -> np.ndarray:
        """Release protocol: the audited documents that calibrate (the calibration split's: labelled, not in a tuning
        fold; in the pool under 'exclude')."""
        split = self.test_split
        return self.calibrating & (split.in_pool if self.config.miss_policy == "exclude" else True)

    @cached_property
    def calibrating(self) -> np.ndarray:
        """Release protocol: the audited documents of the calibration split (labelled, not in a tuning fold)."""
        return self.test_split.labelled & self.test_split.among(self.calibration_split)

    @cached_property
    def release_ranking(self) -> LeaveOneOutRanking:
        """Release protocol: the members' scores sorted once, for the thresholds at every level."""
        return release_ranking(self.test_split, self.members)

    @property
    def strata(self) -> tuple[dict, ...]:
        """The strata the audit calibrated in (:class:`~cpa_core.audit.stratification.Stratum` as dicts; empty:
        one stratum)."""
        return tuple(self.inputs.get("strata", ()))

    @cached_property
    def first_guess_right(self) -> np.ndarray:
        """Per audited document: its subject is the attacker's first guess (the unique top candidate)."""
        return self.test_split.labelled & (self.test_split.truth_ranks == 1)

    @cached_property
    def _linkage(self) -> tuple[VennAbers, VennAbers | None, LinkageModel]:
        """The linkage fits of the audited documents and (split protocol) of the calibration documents, and the stored
        fit (:func:`~cpa_core.audit.linkage.fit_linkage`): the release protocol's calibrating documents each
        without its own label; the split protocol's calibration documents, the test documents never read."""
        test = self.test_split
        if self.config.protocol == "release":
            peers = [(peer.config.attacker.name, [peer.test_split.table]) for peer in self.peers]
            fit, model = fit_linkage([test.table], self.first_guess_right, self.calibrating, self.config.seed, peers)
            return fit, None, model
        cal = self.calibration_split
        events = np.concatenate([cal.labelled & (cal.truth_ranks == 1), np.zeros(len(test), dtype=bool)])
        calibrating = np.concatenate([cal.labelled, np.zeros(len(test), dtype=bool)])
        peers = [(peer.config.attacker.name, [peer.calibration_split.table, peer.test_split.table])
                 for peer in self.peers]
        fit, model = fit_linkage([cal.table, test.table], events, calibrating, self.config.seed, peers)
        n = len(cal)
        return VennAbers(fit.low[n:], fit.high[n:]), VennAbers(fit.low[:n], fit.high[:n]), model

    @property
    def linkage_model(self) -> LinkageModel:
        """The stored fit of :attr:`linkage_fit` for a new document (an edited text): the same release context, the
        same scorers and calibration documents."""
        return self._linkage[2]

    @property
    def linkage_fit(self) -> VennAbers:
        """Per audited document, the Venn-Abers probability that the attacker's first guess is its subject, given
        the description of the attack on it (:mod:`cpa_core.audit.linkage`), with its interval ``[low, high]``."""
        return self._linkage[0]

    @property
    def linkage(self) -> np.ndarray:
        """Per audited document, the linkage probability (:attr:`linkage_fit`'s single probability)."""
        return self.linkage_fit.p

    def certificate(self, confidence) -> Certificate:
        """Certified sets of the audited documents at ``confidence`` (any level: no re-attack).

        Release protocol: every document, leave-one-out (:func:`certify_release`); split protocol: the test
        split, with the calibration split's thresholds. The latest :data:`KEPT_CERTIFICATES` levels asked are kept
        (a certificate is immutable): a page, its summary and its figures share one.
        """
        label = confidence_label(confidence)
        found = self._certificates.pop(label, None)
        if found is None:
            if self.config.protocol == "release":
                found = certify_release(self.test_split, self.release_ranking, confidence, self.linkage_fit)
            else:
                found = certify(self.test_split, self.calibration_for(confidence), confidence, self.linkage_fit)
        self._certificates[label] = found  # the most recent last
        for stale in list(self._certificates)[:-KEPT_CERTIFICATES]:  # list(): one step, safe across sessions
            self._certificates.pop(stale, None)
        return found

    def certificates(self, confidences) -> list[Certificate]:
        """:meth:`certificate` at many levels at once (a confidence curve): the thresholds of every level from one
        sort of the calibration scores, the sets' sizes from one pass over the scores (:func:`set_size_table`)."""
        levels = [exact_fraction(c) for c in confidences]
        split = self.test_split
        if not levels:
            return []
        if self.config.protocol == "release":
            thresholds = self.release_ranking.thresholds(levels)
            left_out = self.members
        else:
            missing = [c for c in levels if confidence_label(c) not in self.calibration.q_hat_]
            extra = self.calibrate_at(missing) if missing else None

            thresholds = np.array([split.thresholds(self.calibration if confidence_label(level) in
                                                    self.calibration.q_hat_ else extra, level)
                                   for level in levels]).reshape(len(levels), len(split))
            left_out = None
        sizes = set_size_table(split.sorted_scores, split.table.pool_sizes, thresholds)
        return [Certificate(level, thresholds[i], sizes[i], split.in_pool & (split.truth_positions < sizes[i]), split,
                            left_out, *_linkage_fields(self.linkage_fit)) for i, level in enumerate(levels)]

    def calibration_certificate(self, confidence) -> Certificate:
        """The calibration documents' own sets (for the records; no guarantee applies to them)."""
        return certify(self.calibration_split, self.calibration_for(confidence), confidence, self._linkage[1])

    def with_policy(self, confidence, policy: ReleasePolicy) -> AuditResult:
        """The same audit declared to flag at ``confidence`` under ``policy`` (:meth:`AuditConfig.with_policy`):
        what is exported after a curator settled on them; no set changes."""
        return replace(self, config=self.config.with_policy(confidence, policy))

    def with_peers(self, peers: tuple[AuditResult, ...]) -> AuditResult:
        """The result whose linkage probability also reads ``peers``' attacks of the same documents (audits by other
        attackers of the same release: the same documents in the same order in each split)."""
        for peer in peers:
            for mine, theirs in ((self.test_split, peer.test_split), (self.calibration_split, peer.calibration_split)):
                if theirs.table.doc_ids.tolist() != mine.table.doc_ids.tolist():
                    raise ConfigError(f"the peer {peer.config.attacker.name} of {self.config.attacker.name} audits "
                                      "other documents; expected the same release")
        return replace(self, peers=tuple(peers))

    def with_inputs(self, **inputs) -> AuditResult:
        """The result with more facts about its inputs (e.g. LLM counters) for the manifest."""
        return replace(self, inputs={**self.inputs, **inputs})


def score_table(table: CandidateTable, truth_ids, groups, config: AuditConfig) -> ScoredSplit:
    if config.top_k is not None:
        table = table.truncate(config.top_k)
    return ScoredSplit.build(table, truth_ids, groups, config.score)
