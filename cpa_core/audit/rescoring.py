"""The risk of an edited text under an audit's stored calibration: what a redaction would change, before any new
calibration.

An edited document is attacked again exactly as the audit's documents were (the attacker adopts what the audit
learned, e.g. its temperature) and scored with the audit's score. Its risk is read under the stored calibration:

- its **set size** under the threshold of the stratum its certainty now falls in (its own threshold while it stays
  in its own stratum; the smallest threshold of another stratum's documents when the edit moves it there);
- its **linkage probability** from the stored fit (:attr:`AuditResult.linkage_model`), from the description of the
  new attack on it;
- its **certainty**, the attacker's top-1 margin (:func:`~cpa_core.audit.stratification.certainty`).

A risk is *lower* than another when neither the set shrinks nor the probability rises, and one of the set, the
probability or the certainty moves the safe way. Every figure is indicative: an edited release is a new release
mechanism, and only a new calibration certifies it.

Over an attacker panel (:class:`PanelStoredRisk`), an edited text is attacked by every member and read under that
member's stored calibration (its linkage probability from its own attack and its peers',
:func:`~cpa_core.audit.linkage.peer_features`); its risk (:class:`PanelRisk`) is every member's side by side. It is
acceptable when every member's is, lower than another when no member's rises and one member's is lower, and its
figures are the worst over the members (the smallest set, the largest linkage probability).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from cpa_core.audit.results import ScoredSplit, score_table
from cpa_core.audit.stratification import certainty
from cpa_core.conformal.calibration import set_sizes

if TYPE_CHECKING:
    from cpa_core.attack.base import Attacker
    from cpa_core.attack.candidates import CandidateTable
    from cpa_core.audit.policy import ReleasePolicy
    from cpa_core.audit.results import AuditResult, Certificate
    from cpa_core.io.tables import Registry

N_EVIDENCE_ROWS = 3
"""The top candidates an edited text's evidence is about (as the worklist's)."""


@dataclass(frozen=True)
class Risk:
    """A document's risk under the stored calibration: its set size, its linkage probability (``None`` when the
    audit has none) and the attacker's certainty (top-1 margin)."""

    set_size: int
    linkage: float | None
    certainty: float

    def acceptable(self, policy: ReleasePolicy) -> bool:
        """Not flagged by the policy: a set of at least ``k`` and a linkage probability within the acceptable rate."""
        linkage = None if self.linkage is None else np.array([self.linkage])
        return not bool(policy.flags(np.array([self.set_size]), linkage)[0])

    def no_higher_than(self, other: Risk) -> bool:
        """Neither a smaller set nor a higher linkage probability than ``other``."""
        if self.set_size < other.set_size:
            return False
        return self.linkage is None or other.linkage is None or self.linkage <= other.linkage

    def lower_than(self, other: Risk) -> bool:
        """No higher than ``other``, and a larger set, a lower probability or a lower certainty."""
        if not self.no_higher_than(other):
            return False
        lower_linkage = self.linkage is not None and other.linkage is not None and self.linkage < other.linkage
        return self.set_size > other.set_size or lower_linkage or self.certainty < other.certainty

    def to_dict(self) -> dict:
        return {"set_size": self.set_size, "linkage_probability": self.linkage, "certainty": self.certainty}


@dataclass(frozen=True)
class PanelRisk:
    """A document's risk under each member of an attacker panel (``members[i]`` under the attacker ``names[i]``):
    acceptable when every member's is; its set size, linkage probability and certainty are the worst over them."""

    names: tuple[str, ...]
    members: tuple[Risk, ...]

    @cached_property
    def set_size(self) -> int:
        return min(risk.set_size for risk in self.members)

    @cached_property
    def linkage(self) -> float | None:
        found = [risk.linkage for risk in self.members if risk.linkage is not None]
        return max(found) if found else None

    @cached_property
    def certainty(self) -> float:
        return max(risk.certainty for risk in self.members)

    def member(self, name: str) -> Risk:
        return self.members[self.names.index(name)]

    def part(self, members: Sequence[int]) -> PanelRisk:
        """The risk under these members alone (indices into the panel, in that order)."""
        return PanelRisk(tuple(self.names[i] for i in members), tuple(self.members[i] for i in members))

    def acceptable(self, policy: ReleasePolicy) -> bool:
        """Acceptable to every member (:meth:`Risk.acceptable`)."""
        return all(risk.acceptable(policy) for risk in self.members)

    def no_higher_than(self, other: PanelRisk) -> bool:
        """No member's risk higher than under ``other`` (:meth:`Risk.no_higher_than`)."""
        return all(mine.no_higher_than(theirs) for mine, theirs in zip(self.members, other.members))

    def lower_than(self, other: PanelRisk) -> bool:
        """No member's risk higher than under ``other``, and one member's lower (:meth:`Risk.lower_than`)."""
        return self.no_higher_than(other) and any(mine.lower_than(theirs)
                                                  for mine, theirs in zip(self.members, other.members))

    def to_dict(self) -> dict:
        """The worst over the members, then each member's (by attacker)."""
        return {"set_size": self.set_size, "linkage_probability": self.linkage, "certainty": self.certainty,
                "attackers": {name: risk.to_dict() for name, risk in zip(self.names, self.members)}}


@dataclass(frozen=True)
class Rescored:
    """An edited text's risk and the registry rows of its top candidates (what its evidence is about), with the
    clues its query carried (LLM attackers). Over a panel (:class:`PanelStoredRisk`): the :class:`PanelRisk`, and
    ``rows`` and ``clues`` each member's, in the panel's order."""

    risk: Risk | PanelRisk
    rows: tuple
    clues: tuple = ()


def joined(parts: Sequence[tuple[Sequence[int], Rescored]], names: Sequence[str]) -> Rescored:
    """One text's risk under a whole panel (``names``) from its risks under parts of it, each ``(members,
    rescored)``: the members' indices into the panel and that part's :class:`Rescored` (every member in one part)."""
    risks, rows, clues = [None] * len(names), [None] * len(names), [()] * len(names)
    for members, rescored in parts:
        for j, i in enumerate(members):
            risks[i], rows[i] = rescored.risk.members[j], rescored.rows[j]
            if rescored.clues:
                clues[i] = rescored.clues[j]
    return Rescored(PanelRisk(tuple(names), tuple(risks)), tuple(rows), tuple(clues))


class StoredRisk:
    """Risks of edited texts of an audit's documents under its stored calibration at one confidence level.

    A document is named by its certificate and row (:func:`~cpa_core.redaction.suggestions.release_flags`); many
    edited texts are attacked and scored in one batch (:meth:`of`).
    """

    def __init__(self, result: AuditResult, attacker: Attacker, registry: Registry, confidence=None):
        self.result = result
        self.attacker = attacker
        self.registry = registry
        self.confidence = result.config.policy_confidence if confidence is None else confidence
        attacker.adopt(result.inputs.get("learned", {}))  # e.g. the temperature the audit chose
        self._lowest: dict[tuple[int, str], float] = {}
        self._bins: dict[str | None, list[tuple[float, str]]] = {}
        for stratum in result.strata:
            self._bins.setdefault(stratum["group"], []).append((float(stratum["margin_low"]), stratum["label"]))
        for bins in self._bins.values():
            bins.sort()

    @property
    def linkage_floor(self) -> float:
        """The lowest linkage probability the stored fit gives a new document, at any certainty: what the stored
        calibration can show of the least identifiable documents of the release."""
        return self.result.linkage_model.floor

    def documents(self) -> dict[str, tuple[Certificate, int]]:
        """Every document of the release by doc id, as (certificate, row): the audited ones and, under the split
        protocol, the calibration documents."""
        certificates = [self.result.certificate(self.confidence)]
        if self.result.config.protocol == "split":
            certificates.append(self.result.calibration_certificate(self.confidence))
        return {str(doc_id): (cert, row) for cert in certificates
                for row, doc_id in enumerate(cert.split.table.doc_ids)}

    def certified(self, cert: Certificate, row: int) -> Risk:
        """The certified risk of the document as released (its set, its stored linkage probability)."""
        linkage = None if cert.linkage is None else float(cert.linkage[row])
        return Risk(int(cert.set_sizes[row]), linkage, float(certainty(cert.split.table.rows([row]))[0]))

    def of(self, documents: Sequence[tuple[Certificate, int]], texts: Sequence[str],
           with_linkage: bool = True) -> list[Rescored]:
        """The risk of each text as the document named beside it (one attack of every text); ``with_linkage``:
        ``False`` leaves the linkage probability out (a member of a panel reads its peers' attacks for it:
        :meth:`PanelStoredRisk.of`)."""
        if not documents:
            return []
        return self.risks(documents, self.attack(documents, texts), () if with_linkage else None)

    def attack(self, documents: Sequence[tuple[Certificate, int]], texts: Sequence[str]) -> ScoredSplit:
        """Each text attacked as the document named beside it, scored with the audit's score."""
        splits = [cert.split for cert, _ in documents]
        rows = [row for _, row in documents]
        ids = [str(split.table.doc_ids[row]) for split, row in zip(splits, rows)]
        truths = [split.truth_ids[row] for split, row in zip(splits, rows)]
        config = self.result.config
        table = self.attacker.attack(ids, list(texts), self.registry, config.knowledge)
        return score_table(table, truths, None, config)

    def risks(self, documents: Sequence[tuple[Certificate, int]], scored: ScoredSplit,
              peers: Sequence[CandidateTable] | None = ()) -> list[Rescored]:
        """The risk of each attacked text (:meth:`attack`) as the document named beside it; ``peers``: the attacks
        of the same texts by each peer the linkage fit reads (:attr:`~cpa_core.audit.linkage.LinkageModel.peers`, in
        order; ``None``: no linkage probability)."""
        margins = certainty(scored.table)
        thresholds = np.array([self._threshold(cert, row, margin)
                               for (cert, row), margin in zip(documents, margins)], dtype=float)
        sizes = set_sizes(scored.sorted_scores, scored.table.pool_sizes, thresholds)
        with_linkage = peers is not None and any(cert.linkage is not None for cert, _ in documents)
        linkage = self.result.linkage_model.predict(scored.table, peers).p if with_linkage else None
        out = []
        for i in range(len(documents)):
            pool = min(N_EVIDENCE_ROWS, int(scored.table.pool_sizes[i]))
            top = tuple(int(r) for r in scored.table.candidates[i, :pool] if r >= 0)
            clues = tuple(scored.table.clues[i]) if scored.table.clues is not None else ()
            out.append(Rescored(Risk(int(sizes[i]), None if linkage is None else float(linkage[i]),
                                     float(margins[i])), top, clues))
        return out

    def _threshold(self, cert: Certificate, row: int, margin: float) -> float:
        """The threshold of the stratum an edited text with this certainty falls in."""
        labels = cert.split.strata
        if labels is None or not self._bins:
            return float(cert.q_hat[row])
        group = None if cert.split.groups is None else str(cert.split.groups[row])
        bins = self._bins.get(group)
        if not bins:
            return float(cert.q_hat[row])
        label = bins[0][1]
        for low, name in bins:
            if margin >= low:
                label = name
        if label == labels[row]:
            return float(cert.q_hat[row])
        key = (id(cert), label)
        if key not in self._lowest:
            same = labels.astype(str) == label
            self._lowest[key] = float(cert.q_hat[same].min()) if same.any() else float(cert.q_hat[row])
        return self._lowest[key]


class PanelStoredRisk:
    """Risks of edited texts of a release under every member of an attacker panel (``members``: each member's audit
    and attacker, one release) at one confidence level: each text attacked by every member and read under that
    member's stored calibration (:class:`StoredRisk`).

    A document is named by ``(part, row)``: its row in the audited documents (part 0) or, under the split protocol,
    in the calibration documents (part 1); every member certifies the same documents in the same order.
    """

    def __init__(self, members: Sequence[tuple[AuditResult, Attacker]], registry: Registry, confidence=None):
        if not members:
            raise ValueError("a panel's stored risk needs at least one member")
        self.stored = tuple(StoredRisk(result, attacker, registry, confidence) for result, attacker in members)
        self.names = tuple(result.config.attacker.name for result, _ in members)
        self.confidence = self.stored[0].confidence
        self._parts = [self._certificates(stored) for stored in self.stored]
        self._peers = [self._peer_members(stored) for stored in self.stored]

    def _peer_members(self, stored: StoredRisk) -> tuple[int, ...]:
        """The members whose attacks of an edited text the member's linkage fit reads (indices into the panel)."""
        missing = [name for name in stored.result.linkage_model.peers if name not in self.names]
        if missing:
            raise ValueError(f"the linkage fit of {stored.result.config.attacker.name} reads the attacks of "
                             f"{', '.join(missing)}, which this panel does not have")
        return tuple(self.names.index(name) for name in stored.result.linkage_model.peers)

    @staticmethod
    def _certificates(stored: StoredRisk) -> list[Certificate]:
        certificates = [stored.result.certificate(stored.confidence)]
        if stored.result.config.protocol == "split":
            certificates.append(stored.result.calibration_certificate(stored.confidence))
        return certificates

    @property
    def linkage_floor(self) -> float:
        """The largest of the members' :attr:`StoredRisk.linkage_floor`: the lowest linkage probability every
        member's stored calibration can show."""
        return max(stored.linkage_floor for stored in self.stored)

    def certificates(self, member: int = 0) -> list[Certificate]:
        """A member's certificates of the release's parts (the audited documents; the calibration ones under split)."""
        return self._parts[member]

    def documents(self) -> dict[str, tuple[int, int]]:
        """Every document of the release by doc id, as ``(part, row)``."""
        return {str(doc_id): (part, row) for part, cert in enumerate(self._parts[0])
                for row, doc_id in enumerate(cert.split.table.doc_ids)}

    def certified(self, name: tuple[int, int]) -> PanelRisk:
        """The certified risk of the document as released under every member."""
        part, row = name
        return PanelRisk(self.names, tuple(stored.certified(certs[part], row)
                                           for stored, certs in zip(self.stored, self._parts)))

    @cached_property
    def costly(self) -> tuple[int, ...]:
        """The members whose attack of one edited text is costly (:attr:`~cpa_core.attack.base.AttackerBase.
        costly_rescoring`: a sentence-embedding model's encoding, an LLM's calls): a search attacks with them only
        the step it would take (:func:`~cpa_core.redaction.suggestions.search_redactions`). None when every member
        is: nothing cheaper would rank the proposals."""
        costly = tuple(i for i, stored in enumerate(self.stored) if getattr(stored.attacker, "costly_rescoring", False))
        return costly if len(costly) < len(self.stored) else ()

    def of(self, documents: Sequence[tuple[int, int]], texts: Sequence[str],
           members: Sequence[int] | None = None) -> list[Rescored]:
        """The risk of each text as the document named beside it under every member (one attack of every text by
        each member); ``members``: under these members alone (indices into the panel), a risk of that part. The peers
        a member's linkage fit reads attack the texts too (once, members or not)."""
        if not documents:
            return []
        chosen = range(len(self.stored)) if members is None else list(members)
        named = [[(self._parts[m][part], row) for part, row in documents] for m in range(len(self.stored))]
        attacked = {m: self.stored[m].attack(named[m], texts)
                    for m in sorted({*chosen, *(p for m in chosen for p in self._peers[m])})}
        found = [self.stored[m].risks(named[m], attacked[m], [attacked[p].table for p in self._peers[m]])
                 for m in chosen]
        names = tuple(self.names[m] for m in chosen)
        return [Rescored(PanelRisk(names, tuple(member[i].risk for member in found)),
                         tuple(member[i].rows for member in found), tuple(member[i].clues for member in found))
                for i in range(len(documents))]
