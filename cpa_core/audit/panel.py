"""An attacker panel: one release audited by several attackers, each run and calibrated on its own.

A certificate is valid for the attacker it calibrates; a release is attacked by whoever holds it. A panel audits the
same documents with every member (each member's :class:`~cpa_core.audit.results.AuditResult`: its candidate table, its
strata, its calibration, its linkage probability) and reads a document's risk as the worst over them
(:class:`PanelCertificate`): flagged when any member flags it, its linkage probability the largest of the members',
its smallest certified set with the member that gave it. Each member's certificate keeps its own guarantee; the
combined set is no certificate of its own, only the worst of valid ones.

A member's linkage probability also reads what its *peers* make of each document (:func:`peer_names`: the other
members whose attack of one text is cheap; :func:`~cpa_core.audit.linkage.peer_features`): a document every attacker
places on the same person is told apart from one only this attacker places there. It stays calibrated on the
member's own labelled documents, none reading its own label.

The release decision over a panel (:func:`~cpa_core.report.verdict.panel_verdict`) tests every member's first-guess
rate on what the panel leaves, with a correction for testing several members (``docs/guarantee.md``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.results import AuditResult, Certificate
from cpa_core.common.errors import ConfigError

if TYPE_CHECKING:
    from cpa_core.attack.base import Attacker
    from cpa_core.audit.configuration import AuditConfig
    from cpa_core.common.progress import Progress
    from cpa_core.io.tables import Documents, Registry

FULL_PANEL = ("tfidf", "lexical_fusion", "dense", "learned")
"""The default panel of a release this machine audits with every kind of attacker: word TF-IDF retrieval, the fused
lexical ranker (words, characters, BM25), dense retrieval over whole texts (where the sentence-embedding model is
installed) and the learned re-identifier (a classifier trained on the registry)."""
LEXICAL_PANEL = ("tfidf", "lexical_fusion")
"""The default panel of a larger release: the lexical members, which scale to it on this machine."""
HELD_OUT_ORDER = ("learned", "lexical_fusion", "bm25", "tfidf", "dense")
"""The attackers a redaction is verified with when its search never consulted them, in order of preference: the
first one that is not a member of the panel the search read (dense retrieval only where its model is installed)."""
FULL_PANEL_LIMIT = 10_000
"""The most documents, and the most profiles, the full panel runs on by default (bench/RESULTS.md, section (t), has its
time and memory at that size)."""


@dataclass(frozen=True)
class PanelCertificate:
    """The members' certificates of the same documents at one confidence level, and the worst over them.

    ``names[i]`` is the attacker of ``members[i]``; every member certifies the same documents in the same order.
    """

    names: tuple[str, ...]
    members: tuple[Certificate, ...]

    def __len__(self) -> int:
        return len(self.members[0].set_sizes)

    @cached_property
    def set_sizes(self) -> np.ndarray:
        """Each document's smallest certified set over the members (``(n,)``)."""
        return np.min(np.stack([cert.set_sizes for cert in self.members]), axis=0)

    @cached_property
    def smallest_by(self) -> np.ndarray:
        """The member (its index) that gave each document its smallest set; the first of them on a tie."""
        return np.argmin(np.stack([cert.set_sizes for cert in self.members]), axis=0)

    @cached_property
    def linkage(self) -> np.ndarray | None:
        """Each document's largest linkage probability over the members (``None`` when a member has none)."""
        if any(cert.linkage is None for cert in self.members):
            return None
        return np.max(np.stack([cert.linkage for cert in self.members]), axis=0)

    @cached_property
    def linkage_by(self) -> np.ndarray | None:
        """The member (its index) that gave each document its largest linkage probability; the first on a tie."""
        if self.linkage is None:
            return None
        return np.argmax(np.stack([cert.linkage for cert in self.members]), axis=0)

    def member_flags(self, policy: ReleasePolicy) -> np.ndarray:
        """Which member flags which document (``(n, members)`` bool)."""
        return np.stack([cert.flags(policy) for cert in self.members], axis=1)

    def flags(self, policy: ReleasePolicy) -> np.ndarray:
        """The documents any member flags."""
        return self.member_flags(policy).any(axis=1)


@dataclass(frozen=True)
class PanelResult:
    """One release audited by several attackers (``members``, in declared order), each calibrated on its own.

    Every member audits the same documents under the same declared configuration but for its attacker (the same
    protocol, split, knowledge level, confidence levels and release policy); a panel of other audits is refused.
    """

    members: tuple[AuditResult, ...]

    def __post_init__(self):
        if len(self.members) < 1:
            raise ConfigError("an attacker panel needs at least one member")
        names = self.names
        if len(set(names)) != len(names):
            raise ConfigError(f"an attacker panel names each attacker once, found {', '.join(names)}")
        first = self.members[0]
        ids = first.test_split.table.doc_ids.tolist()
        for member in self.members[1:]:
            if member.test_split.table.doc_ids.tolist() != ids:
                raise ConfigError(f"the panel's members audit different documents ({member.config.attacker.name} "
                                  f"against {first.config.attacker.name}); expected one release")
            if _shared(member) != _shared(first):
                raise ConfigError(f"the panel's members differ in more than their attacker ({member.config.attacker.name} "
                                  f"against {first.config.attacker.name}); expected one declared configuration")
        object.__setattr__(self, "members", tuple(_with_peers(member, self.members) for member in self.members))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(member.config.attacker.name for member in self.members)

    @property
    def config(self):
        """The configuration the members share (the first member's, whose attacker is one of the panel)."""
        return self.members[0].config

    @property
    def config_id(self) -> str:
        """:func:`panel_config_id` of its members."""
        return panel_config_id(self.members)

    @property
    def held_out(self) -> str | None:
        """The member a redaction search never consulted (the audit of a redacted release), if any."""
        return self.members[0].inputs.get("panel", {}).get("held_out")

    def member(self, name: str) -> AuditResult:
        for member in self.members:
            if member.config.attacker.name == name:
                return member
        raise KeyError(name)

    def certificate(self, confidence) -> PanelCertificate:
        """Every member's certificate at ``confidence`` (any level: no re-attack)."""
        return PanelCertificate(self.names, tuple(member.certificate(confidence) for member in self.members))


def default_panel(n_documents: int, n_profiles: int, dense_present: bool | None = None) -> tuple[str, ...]:
    """The attackers a release is audited with when none is declared: :data:`FULL_PANEL` (dense retrieval only where
    its model is installed, ``dense_present``: default, whether the packaged model is) for releases of at most
    :data:`FULL_PANEL_LIMIT` documents and profiles, else :data:`LEXICAL_PANEL`."""
    if n_documents > FULL_PANEL_LIMIT or n_profiles > FULL_PANEL_LIMIT:
        return LEXICAL_PANEL
    if dense_present is None:
        from cpa_core.attack.model_store import packaged_model_zip
        dense_present = packaged_model_zip() is not None
    return tuple(name for name in FULL_PANEL if dense_present or name != "dense")


def held_out_attacker(panel: Sequence[str], dense_present: bool | None = None) -> str | None:
    """The attacker that verifies a redaction searched against ``panel``: the first of :data:`HELD_OUT_ORDER` not in
    the panel (``None`` when every one is)."""
    if dense_present is None:
        from cpa_core.attack.model_store import packaged_model_zip
        dense_present = packaged_model_zip() is not None
    return next((name for name in HELD_OUT_ORDER if name not in panel and (dense_present or name != "dense")), None)


def audit_panel(documents: Documents, registry: Registry, declared: Sequence[tuple[AuditConfig, Attacker]],
                progress: Callable[[int, str], Progress | None] | None = None,
                finish: Callable[[AuditResult, Attacker], AuditResult] | None = None,
                held_out: str | None = None, engine=None) -> PanelResult:
    """Audit the release with every declared member (its configuration and built attacker), one after the other:
    each run and calibrated on its own (:func:`~cpa_core.audit.pipeline.run_audit`). ``progress(i, name)``: the
    progress of member ``i``; ``finish(result, attacker)``: what to add to a member's result once it is run (e.g.
    its LLM counters); ``held_out``: the member a redaction search never consulted (the audit of a redacted
    release); ``engine``: where the members that can run on a cluster attack
    (:class:`~cpa_core.attack.engine.DaskEngine`; the others run in this process). Each member's inputs record the
    panel it belongs to (``panel``: the panel's configuration id, its attackers, this member's, its peers
    (:func:`peer_names`: whose attacks its linkage probability reads) and the held-out one, if any)."""
    from cpa_core.audit.pipeline import check_split, run_audit

    for config, _ in declared:  # a split the release cannot give is said before any member's work
        check_split(documents, config)
    results = []
    from cpa_core.attack.registry import get_spec

    for i, (config, attacker) in enumerate(declared):
        where = engine if engine is not None and get_spec(attacker.name).runs_on_cluster else None
        result = run_audit(documents, registry, attacker, config, None if progress is None else progress(i, attacker.name),
                           engine=where)
        results.append(result if finish is None else finish(result, attacker))
    names = [result.config.attacker.name for result in results]
    if held_out is not None and held_out not in names:
        raise ConfigError(f"the held-out attacker {held_out} is no member of the panel ({', '.join(names)})")
    marked = {"config_id": panel_config_id(results), "attackers": names,
              **({"held_out": held_out} if held_out is not None else {})}
    peers = peer_names([(attacker.name, bool(attacker.costly_rescoring)) for _, attacker in declared], held_out)
    return PanelResult(tuple(result.with_inputs(panel={**marked, "attacker": name, "peers": peers[name]})
                             for result, name in zip(results, names)))


def _with_peers(member: AuditResult, members: Sequence[AuditResult]) -> AuditResult:
    """The member with its peers attached: the members its panel record names as peers (``inputs["panel"]["peers"]``,
    :func:`audit_panel`) that are in ``members``."""
    by_name = {other.config.attacker.name: other for other in members}
    wanted = [name for name in member.inputs.get("panel", {}).get("peers", ()) if name in by_name]
    if [peer.config.attacker.name for peer in member.peers] == wanted:
        return member
    return member.with_peers(tuple(by_name[name] for name in wanted))


def peer_names(declared: Sequence[tuple[str, bool]], held_out: str | None = None) -> dict[str, list[str]]:
    """Each member's peers, from the panel's members as ``(attacker name, whether its attack of one edited text is
    costly)``: the other members whose attack is cheap, but for the held-out one (a redaction search attacks with
    every peer of a member it reads, and never with the held-out member)."""
    cheap = [name for name, costly in declared if not costly and name != held_out]
    return {name: [peer for peer in cheap if peer != name] for name, _ in declared}


def panel_config_id(members) -> str:
    """A short, stable hash of a panel: its members' configuration ids (in any order: the same panel declared in
    another order is the same configuration); a panel of one is its member's configuration."""
    if len(members) == 1:
        return members[0].config.config_id
    canonical = json.dumps(sorted(member.config.config_id for member in members))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _shared(result: AuditResult) -> dict:
    """What every member of a panel declares alike: the configuration but for its attacker."""
    declared = result.config.to_dict()
    declared.pop("attacker")
    declared.pop("score", None)  # an attacker that scores itself declares its own score
    return declared
