"""The audit pipeline: split, attack, score, calibrate, certify.

:func:`run_audit` attacks the calibration and test documents once. The resulting
:class:`AuditResult` keeps, per document, the scores of its ranked candidates (non-decreasing), so
certifying at any other confidence level recomputes one quantile and one count per document; the
attack is never re-run.

Calibration documents whose true identity is outside the pool get the score ``+inf`` by default
(``miss_policy="infinite"``, conservative: the threshold then guards unconditional coverage);
``miss_policy="exclude"`` calibrates on the documents whose truth is in the pool, which certifies
coverage conditional on inclusion.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from .attackers.base import Attacker, RetrievalAttacker
from .evidence import DEFAULT_PLACEHOLDERS, Explainer, check_placeholders
from .candidates import CandidateTable, Progress, as_rows, check_pool_fits
from .conformal import (ALL, Calibration, CalibrationScores, LeaveOneOutRanking, calibrate, confidence_label,
                        exact_fraction, set_size_table, set_sizes)
from .data import Documents, Registry, registry_share
from .errors import ConfigError
from .knowledge import QUERY_MODES, KnowledgeLevel
from .metrics import AuditSummary, summarize
from .policy import ReleasePolicy
from .records import write_audit
from .params import Param
from .scores import SCORES, Score, get_score, tie_pessimistic_ranks
from .split import split_indices

if TYPE_CHECKING:
    from .engine import DaskEngine
    from .attackers.imported import CandidateScores

MISS_POLICIES = ("infinite", "exclude")
PROTOCOLS = ("release", "split")
DEFAULT_CONFIDENCES = (0.90, 0.95, 0.99)

AUDIT_PARAMS = (
    Param("knowledge", "text", None, "Knowledge level", "A level declared under [knowledge].", optional=True,
          option="--knowledge"),
    Param("attacker", "text", "tfidf", "Attacker", "A registered attacker.", option="--attacker"),
    Param("query_mode", "choice", None, "Query mode", "direct: the released text is the query; direct_plus_clues: "
          "an LLM's clues are appended (default: the knowledge level's).", choices=QUERY_MODES, optional=True,
          option="--query-mode"),
    Param("score", "choice", "aps", "Nonconformity score", "aps (default), rank, probability, or given (the "
          "attacker's own score).", choices=tuple(SCORES), option="--score"),
    Param("confidence", "floats", DEFAULT_CONFIDENCES, "Confidence levels", "Levels to certify.", above=0, below=1,
          option="--confidence"),
    Param("protocol", "choice", "release", "Protocol", "release (default): every document gets a set, calibrated "
          "leave-one-out on the other labelled documents; split: a disjoint calibration/test split, for matched "
          "comparisons and published protocols.", choices=PROTOCOLS, option="--protocol"),
    Param("n_cal", "int", None, "Calibration documents", "Split protocol: default half of the labelled documents.",
          min=1, optional=True, option="--n-cal"),
    Param("n_test", "int", None, "Test documents", "Split protocol: default the rest.", min=1, optional=True,
          option="--n-test"),
    Param("seed", "int", 0, "Split seed", "Seed of the calibration/test split.", min=0, option="--seed"),
    Param("group_column", "text", None, "Group column", "Calibrate separately per value of this column (Mondrian).",
          optional=True, option="--group-column"),
    Param("top_k", "int", None, "Top-K shortlist", "Truncate each candidate pool to its top K.", min=1, optional=True,
          option="--top-k"),
    Param("miss_policy", "choice", "infinite", "Miss policy", "Calibration documents whose truth is outside the "
          "pool: score +inf (default) or excluded.", choices=MISS_POLICIES, option="--miss-policy"),
    Param("flag_below", "int", 11, "Release policy k", "Flag documents whose set has fewer than k members.", min=1,
          option="--flag-below"),
    Param("leakage_threshold", "float", None, "Leakage threshold", "Also flag documents whose leakage proxy exceeds "
          "it.", above=0, max=1, optional=True, option="--leakage-threshold"),
    Param("flag_confidence", "float", None, "Flagging confidence", "The level at which documents are flagged "
          "(default: the lowest audited level).", above=0, below=1, optional=True, option="--flag-confidence"),
)
"""The ``[audit]`` table (command-line options of the same meaning override it)."""


@dataclass(frozen=True)
class AttackerConfig:
    """The declared attacker.

    ``name`` is its registry name, ``params`` its declared parameters (validated against its spec,
    defaults filled), ``details`` what the built attacker reports of itself for the manifest (model
    fingerprint, prompt hashes, LLM settings without key), ``required_score`` the nonconformity score its
    weights need (``None``: any) and ``weight_kind`` what its weights are. ``tables`` holds every
    ``[attacker.<name>]`` table the attack was built from (its own, and ``clues`` when its queries carry LLM
    clues) and ``llm`` the ``[llm]`` settings it calls (no key), so that a configuration file can declare it
    again (:mod:`cpa_core.bundle`).
    """

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)
    required_score: str | None = None
    weight_kind: str = "probability"
    tables: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    llm: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, attacker: Attacker, params: Mapping[str, Any] | None = None,
           tables: Mapping[str, Mapping[str, Any]] | None = None) -> "AttackerConfig":
        """The configuration of a built attacker (``params``: its declared parameters, if any; ``tables``: the
        attacker tables it was built from, default its own)."""
        clients = attacker.clients()
        return cls(attacker.name, dict(params or {}), attacker.params(), attacker.required_score, attacker.weight_kind,
                   dict(tables) if tables is not None else {attacker.name: dict(params or {})},
                   {k: v for k, v in clients[0].params().items() if v is not None} if clients else {})

    def to_dict(self) -> dict:
        return {"attacker": self.name, **dict(self.details)}


@dataclass(frozen=True)
class AuditConfig:
    """The declared configuration of one audit: the threat model (knowledge level, attacker and its
    parameters), the protocol, the score, the confidence levels, the release policy and the data it
    certifies (``data``: per input, ``documents``, ``registry`` and ``scores``, its SHA-256 and how it was read),
    and the anonymiser placeholders that are never evidence (``placeholders``, ``[evidence]``).

    A certificate is valid for exactly this configuration; :attr:`config_id` hashes all of it, so two
    audits with the same id certify the same release under the same declared threat.
    """

    knowledge: KnowledgeLevel
    attacker: AttackerConfig
    score: str = "aps"
    confidences: tuple = DEFAULT_CONFIDENCES
    protocol: str = "release"
    n_cal: int | None = None
    n_test: int | None = None
    seed: int = 0
    group_column: str | None = None
    top_k: int | None = None
    miss_policy: str = "infinite"
    flag_below: int = 11
    leakage_threshold: float | None = None
    flag_confidence: float | None = None
    data: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    placeholders: tuple[str, ...] = DEFAULT_PLACEHOLDERS

    def __post_init__(self):
        object.__setattr__(self, "placeholders", check_placeholders(self.placeholders))
        by_name = {param.name: param for param in AUDIT_PARAMS}
        for name in ("score", "protocol", "n_cal", "n_test", "seed", "top_k", "miss_policy", "flag_below",
                     "leakage_threshold", "flag_confidence"):
            by_name[name].check(getattr(self, name), "[audit]")
        by_name["confidence"].check(list(self.confidences), "[audit]")
        if self.protocol == "release" and (self.n_cal is not None or self.n_test is not None):
            raise ConfigError("n_cal and n_test belong to the split protocol (protocol = 'split', --protocol split); "
                              "the release protocol certifies every document, calibrated on all labelled documents")
        if self.flag_confidence is not None and confidence_label(self.flag_confidence) not in \
                {confidence_label(c) for c in self.confidences}:
            raise ConfigError(f"the flagging confidence {self.flag_confidence} is not among the audited levels "
                              f"{[confidence_label(c) for c in self.confidences]}")
        required = self.attacker.required_score
        if required and self.score != required:
            raise ConfigError(f"the attacker '{self.attacker.name}' scores candidates itself and needs "
                              f"score '{required}', found '{self.score}'")
        if get_score(self.score).needs_weights and self.attacker.weight_kind == "rank":
            raise ConfigError(f"score '{self.score}' needs candidate weights, but the attacker gives only ranks; "
                              "use score 'rank'")

    @property
    def policy(self) -> ReleasePolicy:
        """The declared release policy."""
        return ReleasePolicy(self.flag_below, self.leakage_threshold)

    @property
    def policy_confidence(self):
        """The level at which documents are flagged: declared, else the lowest audited level.

        A lower level gives smaller sets, hence more flagged documents: the protective default.
        """
        return self.flag_confidence if self.flag_confidence is not None else min(self.confidences, key=exact_fraction)

    def with_policy(self, confidence, policy: ReleasePolicy) -> "AuditConfig":
        """The configuration flagging at ``confidence`` under ``policy`` (the level added to the certified ones).

        What a curator settles on after calibration (a confidence level and a release policy on the pages)
        becomes the declared configuration of what is exported: no certificate changes, only which level
        flags and which rule; a command-line run declaring the same gives the same id.
        """
        levels = {confidence_label(c): c for c in (*self.confidences, confidence)}
        return replace(self, confidences=tuple(sorted(levels.values(), key=exact_fraction)),
                       flag_confidence=confidence, flag_below=policy.flag_below,
                       leakage_threshold=policy.leakage_threshold)

    def with_data(self, data: Mapping[str, Mapping[str, Any]]) -> "AuditConfig":
        """The configuration bound to these inputs; refuses inputs that differ from those declared."""
        for role, declared in self.data.items():
            found = data.get(role, {})
            if declared.get("sha256") and declared["sha256"] != found.get("sha256"):
                raise ConfigError(f"the {role} file {found.get('file') or ''} has SHA-256 "
                                  f"{str(found.get('sha256'))[:16]}…, but the configuration was declared for "
                                  f"{declared['sha256'][:16]}…: these are not the files it certifies")
        return replace(self, data={role: {k: v for k, v in info.items() if k != "file"}
                                   for role, info in data.items()})

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["knowledge"] = self.knowledge.to_dict()
        out["attacker"] = self.attacker.to_dict()
        out["confidences"] = [confidence_label(c) for c in self.confidences]
        out["flag_confidence"] = confidence_label(self.policy_confidence)  # the default, declared or not: one id
        out["data"] = {role: dict(info) for role, info in self.data.items()}
        if self.placeholders == DEFAULT_PLACEHOLDERS:  # the default list: the ids recorded before it was declared
            del out["placeholders"]
        else:
            out["placeholders"] = list(self.placeholders)
        return out

    @property
    def config_id(self) -> str:
        """A short, stable hash of the declared configuration."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class ScoredSplit:
    """One split (calibration or test), attacked and scored.

    Attributes
    ----------
    table : CandidateTable with n rows
    truth_ids : ndarray (n,)
    groups : ndarray (n,) or None
    sorted_scores : ndarray (n, K), each row non-decreasing (stored scale, see :mod:`cpa_core.scores`)
    truth_positions : ndarray (n,), -1 where the truth is outside the pool
    truth_scores : ndarray (n,), +inf where the truth is outside the pool
    truth_ranks : ndarray (n,), tie-pessimistic rank of the truth (1 = top), 0 outside the pool
    score_name : the nonconformity score (``score.to_method`` gives the METHOD's scale for display)
    with_candidates : ``False`` for the documents' own facts without their ranked candidates (the table and the
        scores have no columns; :meth:`documents`): such a split calibrates but certifies nothing
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

    @classmethod
    def build(cls, table: CandidateTable, truth_ids, groups, score: str) -> "ScoredSplit":
        positions = table.truth_positions(truth_ids)
        scores = get_score(score).sorted_scores(table.weights, table.pool_sizes, table.tail_mass)
        rows = np.arange(len(table))
        hit = positions >= 0
        if len(table) and table.width:
            truth_scores = np.where(hit, scores[rows, np.maximum(positions, 0)], np.inf)
            ranks = tie_pessimistic_ranks(table.weights, table.pool_sizes, np.maximum(positions, 0))
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
    def in_pool(self) -> np.ndarray:
        return self.truth_positions >= 0

    @cached_property
    def labelled(self) -> np.ndarray:
        """Documents whose true identity is known (a blank identity_id: unlabelled); computed once."""
        return np.array([t is not None for t in self.truth_ids], dtype=bool)

    def calibration_scores(self, miss_policy: str) -> tuple[np.ndarray, np.ndarray | None]:
        """Scores (and strata) used for calibration under the miss policy."""
        keep = self.in_pool if miss_policy == "exclude" else np.ones(len(self), dtype=bool)
        return self.truth_scores[keep], None if self.groups is None else self.groups[keep]

    def rows(self, index) -> "ScoredSplit":
        """The split restricted to the given rows (in that order); consecutive rows are views, not copies."""
        index = as_rows(index)
        return ScoredSplit(self.table.rows(index), self.truth_ids[index],
                           None if self.groups is None else self.groups[index], self.sorted_scores[index],
                           self.truth_positions[index], self.truth_scores[index], self.truth_ranks[index],
                           self.score_name, self.with_candidates)

    def documents(self, index) -> "ScoredSplit":
        """The documents at the given rows with their own facts (ids, groups, the truth's position, score and rank)
        but not their ranked candidates: what calibration reads, without a copy of the candidates of rows that are
        not consecutive (the release protocol's calibration documents, whose candidates are this split's rows)."""
        index = as_rows(index)
        table = self.table
        facts = replace(table, candidates=table.candidates[:, :0], weights=table.weights[:, :0], queries=None,
                        clues=None).rows(index)
        return ScoredSplit(facts, self.truth_ids[index], None if self.groups is None else self.groups[index],
                           self.sorted_scores[:, :0][index], self.truth_positions[index], self.truth_scores[index],
                           self.truth_ranks[index], self.score_name, with_candidates=False)

    def thresholds(self, calibration: Calibration, confidence) -> np.ndarray:
        """Each document's threshold under ``calibration`` at ``confidence``: its stratum's (``+inf`` for a stratum
        never calibrated), the pooled one when the calibration has a single stratum."""
        if self.groups is None or set(calibration.strata) == {ALL}:
            return calibration.thresholds_for(confidence, None, len(self))
        return calibration.thresholds_by_code(confidence, *self.group_codes)

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

    @cached_property
    def leakage(self) -> np.ndarray:
        """Leakage proxy ``1 / max(1, |C|)``: not a re-identification probability (computed once)."""
        return 1.0 / np.maximum(1, self.set_sizes)

    def members(self, row: int) -> np.ndarray:
        """Identity ids in the certified set of test document ``row``, in ranked order."""
        index = self.split.table.candidates[row, : self.set_sizes[row]]
        return self.split.table.candidate_ids[index]


def release_ranking(split: ScoredSplit, members: np.ndarray, stratified: bool) -> LeaveOneOutRanking:
    """The members' scores sorted once (per group when ``stratified``): what :func:`certify_release` reads."""
    codes = split.group_codes[1] if stratified and split.groups is not None else None
    return LeaveOneOutRanking(split.truth_scores, members, codes)


def certify_release(split: ScoredSplit, ranking: LeaveOneOutRanking, confidence) -> Certificate:
    """Every document's set: members with the threshold of the other members (leave-one-out), the others
    with the threshold of all members; per group when the ranking is (:func:`release_ranking`)."""
    split.check_candidates()
    q_hat = ranking.thresholds([confidence])[0]
    sizes = set_sizes(split.sorted_scores, split.table.pool_sizes, q_hat)
    covered = split.in_pool & (split.truth_positions < sizes)
    return Certificate(exact_fraction(confidence), q_hat, sizes, covered, split, ranking.members)


def certify(split: ScoredSplit, calibration: Calibration, confidence) -> Certificate:
    """Apply the calibrated thresholds to a scored split at one confidence level."""
    split.check_candidates()
    q_hat = split.thresholds(calibration, confidence)
    sizes = set_sizes(split.sorted_scores, split.table.pool_sizes, q_hat)
    covered = split.in_pool & (split.truth_positions < sizes)
    return Certificate(exact_fraction(confidence), q_hat, sizes, covered, split)


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
    _certificates: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # by level, the latest

    @cached_property
    def calibration_scores(self) -> CalibrationScores:
        """The calibration split's scores under the miss policy, by stratum: thresholds at any level."""
        scores, strata = self.calibration_split.calibration_scores(self.config.miss_policy)
        return CalibrationScores(scores, strata if self.config.group_column else None)

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
        """Release protocol: the audited documents that calibrate (labelled; in the pool under 'exclude')."""
        split = self.test_split
        return split.labelled & (split.in_pool if self.config.miss_policy == "exclude" else True)

    @cached_property
    def release_ranking(self) -> LeaveOneOutRanking:
        """Release protocol: the members' scores sorted once, for the thresholds at every level."""
        return release_ranking(self.test_split, self.members, bool(self.config.group_column))

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
                found = certify_release(self.test_split, self.release_ranking, confidence)
            else:
                found = certify(self.test_split, self.calibration_for(confidence), confidence)
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
                            left_out) for i, level in enumerate(levels)]

    def calibration_certificate(self, confidence) -> Certificate:
        """The calibration documents' own sets (for the records; no guarantee applies to them)."""
        return certify(self.calibration_split, self.calibration_for(confidence), confidence)

    def summary(self, confidences=None, policy: ReleasePolicy | None = None) -> "AuditSummary":
        """Every figure of the audit at ``confidences`` (default: the audited levels) under ``policy``
        (default: the declared one): what the CLI, the dashboard and the report show."""
        return summarize(self, confidences, policy)

    def write(self, out_dir, explain: "Explainer | None" = None) -> dict:
        """Write the audit's folder (summary, records, worklist, manifest); returns the paths by file name."""
        return write_audit(self, out_dir, explain)

    def with_policy(self, confidence, policy: ReleasePolicy) -> "AuditResult":
        """The same audit declared to flag at ``confidence`` under ``policy`` (:meth:`AuditConfig.with_policy`):
        what is exported after a curator settled on them; no set changes."""
        return replace(self, config=self.config.with_policy(confidence, policy))

    def with_inputs(self, **inputs) -> "AuditResult":
        """The result with more facts about its inputs (e.g. LLM counters) for the manifest."""
        return replace(self, inputs={**self.inputs, **inputs})


def input_facts(documents: Documents | None, registry: Registry, scores: "CandidateScores | None" = None) -> dict:
    """What the declared configuration records of each input: file, SHA-256, the rows kept (a release may be a
    subset of a file: invalid rows dropped, one group) and how it was read (a column mapping, a non-UTF-8
    encoding)."""
    out = {}
    for role, table in (("documents", documents), ("registry", registry)):
        if table is None:
            continue
        info = {"file": table.file, "sha256": table.sha256, "rows": len(table)}
        if table.report.rejected:
            info["dropped_rows"] = len(table.report.rejected)
        if table.columns:
            info["columns"] = dict(table.columns)
        if table.encoding != "utf-8":
            info["encoding"] = table.encoding
        out[role] = info
    if scores is not None:
        out["scores"] = {"file": scores.file, "sha256": scores.sha256, "rows": len(scores.frame)}
    return out


def score_table(table: CandidateTable, truth_ids, groups, config: AuditConfig) -> ScoredSplit:
    if config.top_k is not None:
        table = table.truncate(config.top_k)
    return ScoredSplit.build(table, truth_ids, groups, config.score)


def attack_documents(documents: Documents, registry: Registry, attacker: Attacker, level: KnowledgeLevel,
                     rows: np.ndarray | None = None, progress: Progress | None = None,
                     engine: "DaskEngine | None" = None) -> tuple[CandidateTable, dict]:
    """Let the attacker learn from the given rows (all when ``None``; every one of them alike, labelled or not)
    and attack them, in this process or on ``engine`` (:class:`~cpa_core.engine.DaskEngine`: the same results);
    returns the table and what the attacker chose (e.g. a temperature ``auto``)."""
    frame = documents.frame if rows is None else documents.frame.iloc[rows]
    doc_ids, texts = frame["doc_id"].tolist(), frame["text"].tolist()
    learned = attacker.learn(doc_ids, texts, registry, level, frame["identity_id"].tolist(), progress)
    if engine is not None:
        return engine.attack(attacker, learned, doc_ids, texts, registry, level, progress), learned
    return attacker.attack(doc_ids, texts, registry, level, progress), learned


def document_groups(documents: Documents, config: AuditConfig) -> np.ndarray | None:
    if not config.group_column:
        return None
    if "group" not in documents.frame.columns:
        raise ConfigError(f"per-group calibration needs the column '{config.group_column}' in {documents.file}, "
                          f"which has columns {list(documents.frame.columns)}")
    return documents.frame["group"].to_numpy(dtype=object)


def _split(documents: Documents, config: AuditConfig):
    """Groups, calibration rows and audited rows: under the release protocol every labelled document
    calibrates and every document is audited; under the split protocol labelled documents are split."""
    groups = document_groups(documents, config)
    labelled = np.flatnonzero(documents.frame["identity_id"].notna().to_numpy())
    if config.protocol == "release":
        return groups, labelled, np.arange(len(documents))
    cal, test = split_indices(len(labelled), config.n_cal, config.n_test, config.seed,
                              None if groups is None else groups[labelled])
    return groups, labelled[cal], labelled[test]


def estimate_llm_calls(documents: Documents, registry: Registry, attacker: Attacker, config: AuditConfig) -> int:
    """The dry run: LLM calls :func:`run_audit` would make (answers already cached cost none)."""
    _, cal, test = _split(documents, config)
    frame = documents.frame.iloc[np.union1d(cal, test)]
    return int(attacker.estimate_calls(frame["doc_id"].tolist(), frame["text"].tolist(), registry, config.knowledge))


def run_audit(documents: Documents, registry: Registry, attacker: Attacker, config: AuditConfig,
              progress: Progress | None = None, table: CandidateTable | None = None,
              engine: "DaskEngine | None" = None) -> AuditResult:
    """Attack, score, calibrate: every document (release protocol) or a disjoint split (split protocol).

    Parameters
    ----------
    table : CandidateTable over all documents (in file order), optional
        A precomputed attack (e.g. shared by several audits on matched splits); the attacker is
        not called when it is given.
    engine : where the attack runs (:class:`~cpa_core.engine.DaskEngine`; default this process); the results
        do not depend on it, and the result's inputs record it.
    """
    config = config.with_data({**config.data, **input_facts(documents, registry)})  # refuses other files
    groups, cal, test = _split(documents, config)
    release = config.protocol == "release"
    # each document attacked once, in an order where each split is a run of rows (views, not copies): every
    # document in file order (release: the audited documents are all of them, the calibrating ones among them),
    # or the calibration documents then the audited ones (split)
    order = test if release else np.concatenate([cal, test])
    if table is None:
        if isinstance(attacker, RetrievalAttacker):  # it ranks the whole registry, or its shortlist
            check_pool_fits(len(order), len(registry), attacker.top_k)
        attacked, learned = attack_documents(documents, registry, attacker, config.knowledge, order, progress, engine)
    else:
        attacked, learned = table.rows(order), {}
    truth = documents.frame["identity_id"].to_numpy(dtype=object)
    if release:  # the calibration documents' scores are their rows of the audited split's (not copied again)
        test_split = score_table(attacked, truth[test], None if groups is None else groups[test], config)
        cal_split = test_split.documents(cal)
    else:
        cal_split = score_table(attacked.rows(np.arange(len(cal))), truth[cal],
                                None if groups is None else groups[cal], config)
        test_split = score_table(attacked.rows(np.arange(len(cal), len(order))), truth[test],
                                 None if groups is None else groups[test], config)
    scores, strata = cal_split.calibration_scores(config.miss_policy)
    calibration = calibrate(scores, config.confidences, strata)
    inputs = {"documents": {"file": documents.file, "sha256": documents.sha256, "rows": len(documents),
                            "share_in_registry": registry_share(documents, registry)},
              "registry": {"file": registry.file, "sha256": registry.sha256, "rows": len(registry)}}
    if learned:
        inputs["learned"] = learned  # what the attacker chose from all labelled documents
    if engine is not None and table is None:
        inputs["engine"] = engine.describe()
    return AuditResult(config, cal_split, test_split, calibration, inputs)
