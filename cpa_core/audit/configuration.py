"""The declared configuration of an audit: the ``[audit]`` table with every default, the attacker
and the configuration id a certificate is valid for."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from cpa_core.attack.base import Attacker
from cpa_core.audit.policy import POLICY_PARAMS, ReleasePolicy
from cpa_core.common.errors import ConfigError
from cpa_core.common.params import Param
from cpa_core.conformal.calibration import confidence_label, exact_fraction
from cpa_core.conformal.scores import SCORES, get_score
from cpa_core.io.knowledge import QUERY_MODES, KnowledgeLevel
from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS, check_placeholders

MISS_POLICIES = ("infinite", "exclude")
PROTOCOLS = ("release", "split")
DEFAULT_CONFIDENCES = (0.90, 0.95, 0.99)
AUDIT_PARAMS = (
    Param("knowledge", "text", None, "Knowledge level", "A level declared under [knowledge].", optional=True,
          option="--knowledge"),
    Param("attacker", "text", "tfidf", "Attacker", "A registered attacker.", option="--attacker"),
    Param("attackers", "fields", None, "Attacker panel", "Several registered attackers, each run and calibrated on "
          "its own; a document's risk is the worst over them and the release is judged against every one (replaces "
          "attacker).", optional=True),
    Param("held_out", "text", None, "Held-out attacker", "The member of the attacker panel that the redaction search "
          "never consulted (a redacted release's audit names it; it is judged like every member).", optional=True),
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
    Param("certainty_bins", "int", 4, "Certainty strata", "Calibrate separately within up to this many strata of the "
          "attacker's own certainty (its top-1 margin), each expected to hold enough labelled documents; 1: one stratum.",
          min=1, max=20, option="--certainty-bins"),
    Param("top_k", "int", None, "Top-K shortlist", "Truncate each candidate pool to its top K.", min=1, optional=True,
          option="--top-k"),
    Param("miss_policy", "choice", "infinite", "Miss policy", "Calibration documents whose truth is outside the "
          "pool: score +inf (default) or excluded.", choices=MISS_POLICIES, option="--miss-policy"),
    *POLICY_PARAMS,
    Param("flag_confidence", "float", None, "Flagging confidence", "The level at which documents are flagged "
          "(default: the lowest audited level).", above=0, below=1, optional=True, option="--flag-confidence"),
)
"""The ``[audit]`` table (command-line options of the same meaning override it)."""

AUDIT_DEFAULTS = {param.name: param.default for param in AUDIT_PARAMS}
"""The default of every ``[audit]`` key, declared once (by :data:`AUDIT_PARAMS`): :class:`AuditConfig`, the
configuration file, the command line and the dashboard all read it here."""


@dataclass(frozen=True)
class AttackerConfig:
    """The declared attacker.

    ``name`` is its registry name, ``params`` its declared parameters (validated against its spec,
    defaults filled), ``details`` what the built attacker reports of itself for the manifest (model
    fingerprint, prompt hashes, LLM settings without key), ``required_score`` the nonconformity score its
    weights need (``None``: any) and ``weight_kind`` what its weights are. ``tables`` holds every
    ``[attacker.<name>]`` table the attack was built from (its own, and ``clues`` when its queries carry LLM
    clues) and ``llm`` the ``[llm]`` settings it calls (no key), so that a configuration file can declare it
    again (:mod:`cpa_core.store.bundle`).
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
           tables: Mapping[str, Mapping[str, Any]] | None = None) -> AttackerConfig:
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
    score: str = AUDIT_DEFAULTS["score"]
    confidences: tuple = AUDIT_DEFAULTS["confidence"]
    protocol: str = AUDIT_DEFAULTS["protocol"]
    n_cal: int | None = AUDIT_DEFAULTS["n_cal"]
    n_test: int | None = AUDIT_DEFAULTS["n_test"]
    seed: int = AUDIT_DEFAULTS["seed"]
    group_column: str | None = AUDIT_DEFAULTS["group_column"]
    certainty_bins: int = AUDIT_DEFAULTS["certainty_bins"]
    top_k: int | None = AUDIT_DEFAULTS["top_k"]
    miss_policy: str = AUDIT_DEFAULTS["miss_policy"]
    flag_below: int = AUDIT_DEFAULTS["flag_below"]
    leakage_threshold: float | None = AUDIT_DEFAULTS["leakage_threshold"]
    acceptable_linkage: float | None = AUDIT_DEFAULTS["acceptable_linkage"]
    flag_confidence: float | None = AUDIT_DEFAULTS["flag_confidence"]
    data: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    placeholders: tuple[str, ...] = DEFAULT_PLACEHOLDERS

    def __post_init__(self):
        object.__setattr__(self, "placeholders", check_placeholders(self.placeholders))
        by_name = {param.name: param for param in AUDIT_PARAMS}
        for name in ("score", "protocol", "n_cal", "n_test", "seed", "certainty_bins", "top_k", "miss_policy",
                     "flag_below", "leakage_threshold", "acceptable_linkage", "flag_confidence"):
            by_name[name].check(getattr(self, name), "[audit]")
        by_name["confidence"].check(list(self.confidences), "[audit]")
        if self.protocol == "release" and (self.n_cal is not None or self.n_test is not None):
            raise ConfigError("n_cal and n_test belong to the split protocol (protocol = 'split', --protocol split); "
                              "the release protocol certifies every document, calibrated on all labelled documents")
        if self.flag_confidence is not None and confidence_label(self.flag_confidence) not in \
                {confidence_label(c) for c in self.confidences}:
            levels = [confidence_label(c) for c in self.confidences]
            flag, lowest = confidence_label(self.flag_confidence), min(levels, key=exact_fraction)
            both = " ".join(f"--confidence {level}" for level in sorted({*levels, flag}, key=exact_fraction))
            raise ConfigError(f"the flagging confidence {flag} is not among the audited levels {levels}: flag at one "
                              f"of them (--flag-confidence {lowest}, or flag_confidence = {lowest} in [audit]) or "
                              f"audit {flag} too ({both}, or {flag} in [audit] confidence)")
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
        return ReleasePolicy(self.flag_below, self.leakage_threshold, self.acceptable_linkage)

    @property
    def policy_confidence(self):
        """The level at which documents are flagged: declared, else the lowest audited level.

        A lower level gives smaller sets, hence more flagged documents: the protective default.
        """
        return self.flag_confidence if self.flag_confidence is not None else min(self.confidences, key=exact_fraction)

    def with_policy(self, confidence, policy: ReleasePolicy) -> AuditConfig:
        """The configuration flagging at ``confidence`` under ``policy`` (the level added to the certified ones).

        What a curator settles on after calibration (a confidence level and a release policy on the pages)
        becomes the declared configuration of what is exported: no certificate changes, only which level
        flags and which rule; a command-line run declaring the same gives the same id.
        """
        levels = {confidence_label(c): c for c in (*self.confidences, confidence)}
        return replace(self, confidences=tuple(sorted(levels.values(), key=exact_fraction)),
                       flag_confidence=confidence, flag_below=policy.flag_below,
                       leakage_threshold=policy.leakage_threshold, acceptable_linkage=policy.acceptable_linkage)

    def with_data(self, data: Mapping[str, Mapping[str, Any]]) -> AuditConfig:
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
        out["acceptable_linkage"] = self.policy.linkage_rate  # likewise: 1/k declared or by default
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
