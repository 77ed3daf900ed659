"""Redaction in rounds: the release a search makes is audited again, and what that audit still flags is searched
again under its new calibration.

A search aims at the audit's stored calibration (:mod:`cpa_core.redaction.suggestions`). An edited release is a new
release mechanism: the attacker's scores of edited texts are calibrated anew, and a text whose evidence was cut may be
named as often as before with less certainty, which the first calibration read as safety (on the Blog Authorship
release, a search under the stored calibration alone left the attacker naming the right author for 20 % of the posts
it kept, where the policy accepts 9.1 %). So the release the decisions make is audited again with the same declared
attackers (never an attacker held out of the search), and every kept document that audit flags is searched again from
where it was left, under the new calibration: it takes further steps that lower its risk for every attacker, or is
withheld. Rounds end when the new audit flags no kept document, when a round changes nothing, or after ``rounds``
rounds (:data:`ROUNDS`). The rounds do not decide the verdict: the release they make is audited once more, with an
attacker held out of every round (``cpa redact``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cpa_core.audit.panel import PanelResult, audit_panel
from cpa_core.redaction.decisions import (
    COMMON_SHARE,
    EDIT,
    SUGGESTED,
    _row,
    accepted,
    never_words,
    proposed_decisions,
    redacted_config,
    typed,
)
from cpa_core.redaction.replacements import Replacer
from cpa_core.redaction.suggestions import (
    WITHHOLD,
    Edit,
    Replacement,
    Suggestion,
    decided_frame,
    panel_members,
    replacement_for,
    suggest_redactions,
)
from cpa_core.report.metrics import first_guess_figures

if TYPE_CHECKING:
    from cpa_core.attack.base import Attacker
    from cpa_core.audit.policy import ReleasePolicy
    from cpa_core.audit.results import AuditResult
    from cpa_core.io.tables import Documents, Registry

ROUNDS = 3
"""Searches at most: the first under the audit's calibration, each later one under the calibration of the release the
earlier ones made."""


@dataclass(frozen=True)
class Rounds:
    """What the rounds decided: the review table (every round's edits, in the released texts), each searched
    document's suggestion (its last round's edits and action, every round's steps), and what each round found
    (:meth:`record`)."""

    table: pd.DataFrame
    suggestions: list[Suggestion]
    rounds: list[dict]

    @property
    def count(self) -> int:
        return len(self.rounds)


def decided_documents(documents: Documents, edits: Mapping[str, Sequence[Edit]], withheld: Iterable[str]
                      ) -> Documents:
    """The release the decisions make, as a table of documents (its checksum that of its CSV: it is no file yet)."""
    frame = decided_frame(documents.frame, edits, set(withheld))
    digest = hashlib.sha256(frame.to_csv(index=False).encode("utf-8")).hexdigest()
    return replace(documents, frame=frame, sha256=digest)


def audit_decided(documents: Documents, registry: Registry, members: Sequence[tuple[AuditResult, Attacker]],
                  edits: Mapping[str, Sequence[Edit]], withheld: Iterable[str],
                  progress: Callable | None = None) -> PanelResult:
    """The release the decisions make, audited by each member's attacker under its declared threat model and
    policy (:func:`~cpa_core.redaction.decisions.redacted_config`), each calibrated on its own."""
    release = decided_documents(documents, edits, withheld)
    declared = [(redacted_config(result.config, release.frame), attacker) for result, attacker in members]
    return audit_panel(release, registry, declared, progress)


def merged(table: pd.DataFrame, earlier: Mapping[str, Suggestion], found: Sequence[Suggestion],
           round_number: int) -> tuple[pd.DataFrame, dict[str, Suggestion]]:
    """The review table with a later round's suggestions: each one's new edits (those its document did not have), and
    a withhold row for a document it withholds; and each document's suggestion, every round's steps in one."""
    rows, combined = [], dict(earlier)
    for suggestion in found:
        own = table[(table["doc_id"] == suggestion.doc_id) & (table["action"] == EDIT)]
        had = set(zip(own["offset"].astype(int), own["length"].astype(int)))
        for edit in suggestion.edits:
            if (edit.offset, edit.length) not in had:
                rows.append(_row(suggestion.doc_id, EDIT, edit, SUGGESTED, suggestion.before,
                                 suggestion.risk_after(edit.term), "", True))
        if suggestion.action == WITHHOLD:
            rows.append(_row(suggestion.doc_id, WITHHOLD, None, SUGGESTED, suggestion.before, suggestion.after,
                             f"round {round_number}: {suggestion.reason}", True))
        first = earlier.get(suggestion.doc_id)
        combined[suggestion.doc_id] = suggestion if first is None else replace(
            suggestion, before=first.before, steps=first.steps + suggestion.steps,
            rejected=first.rejected + suggestion.rejected)
    if not rows:
        return table, combined
    return typed(pd.concat([table, pd.DataFrame(rows)], ignore_index=True)), combined


def record(number: int, panel: PanelResult, policy: ReleasePolicy, searched: Sequence[Suggestion],
           confidence=None) -> dict:
    """What round ``number`` found: the audit it started from (its configuration id, audited documents, how many of
    them it flags, each attacker's first-guess rate with its interval) and what its search did (``searched``: every
    document flagged, under the split protocol its calibration documents too)."""
    certificate = panel.certificate(panel.config.policy_confidence if confidence is None else confidence)
    return {"round": number, "config_id": panel.config_id, "documents": len(certificate.set_sizes),
            "flagged": int(np.count_nonzero(certificate.flags(policy))),
            "first_guess": {name: first_guess_figures(member) for name, member in zip(panel.names, panel.members)},
            "searched": len(searched), "withheld": sum(s.action == WITHHOLD for s in searched),
            "edited": sum(bool(s.edits) for s in searched)}


def redact_in_rounds(result: AuditResult | PanelResult, attackers: Attacker | Sequence[Attacker], registry: Registry,
                     documents: Documents, *, rounds: int = ROUNDS, policy: ReleasePolicy | None = None,
                     confidence=None, strategy: str | Replacement | Replacer = "placeholder", generalization=None,
                     deny: Iterable[str] = (), allow: Iterable[str] = (), common_share: float | None = COMMON_SHARE,
                     progress: Callable | None = None, later_progress: Callable | None = None,
                     audit_progress: Callable | None = None, said: Callable[[str], None] | None = None) -> Rounds:
    """The decisions of up to ``rounds`` searches (module docstring): the first is
    :func:`~cpa_core.redaction.decisions.proposed_decisions` on the audit ``result``; each later one audits the
    release the decisions so far make (:func:`audit_decided`) and searches the documents it flags from their
    edits so far, under its calibration, with the same policy, level (``confidence``; default the declared one),
    strategy, deny list and common words. ``progress(done suggestions, total)``: the first search's;
    ``later_progress(done suggestions, total)``: each later one's; ``audit_progress(i, name)``: each audit's members';
    ``said``: a line as each later round starts."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, found {rounds}")
    members = panel_members(result, attackers)
    policy = policy or members[0][0].config.policy
    replacer = replacement_for(strategy, registry, generalization) if isinstance(strategy, str) else strategy
    texts = dict(zip(documents.frame["doc_id"].astype(str), documents.frame["text"]))
    table, first = proposed_decisions(result, attackers, registry, texts, policy=policy, confidence=confidence,
                                      strategy=replacer, deny=deny, allow=allow, common_share=common_share,
                                      progress=progress)
    suggestions = {s.doc_id: s for s in first}
    order = [s.doc_id for s in first]
    log = [record(1, result if isinstance(result, PanelResult) else PanelResult((result,)), policy, first,
                  confidence)]
    never = never_words(texts.values(), deny, common_share)
    attacker_list = [attacker for _, attacker in members]
    for number in range(2, rounds + 1):
        edits, withheld = accepted(table)
        if said:
            said(f"round {number}: auditing the release the decisions so far make again "
                 f"({len(documents) - len(withheld):,} documents)")
        panel = audit_decided(documents, registry, members, edits, withheld, audit_progress)
        if said:
            certificate = panel.certificate(panel.config.policy_confidence if confidence is None else confidence)
            said(f"round {number}: {int(np.count_nonzero(certificate.flags(policy))):,} of its "
                 f"{len(certificate.set_sizes):,} audited documents flagged; searching every flagged document again "
                 "from its edits, under the new calibration")
        found = suggest_redactions(panel, attacker_list, registry, texts, policy=policy, confidence=confidence,
                                   strategy=replacer, deny=never, progress=later_progress, start=edits)
        log.append(record(number, panel, policy, found, confidence))
        if not found:
            break
        before = len(table)
        table, suggestions = merged(table, suggestions, found, number)
        order += [s.doc_id for s in found if s.doc_id not in order]
        if len(table) == before:  # nothing new: a further round would find the same
            break
    return Rounds(table, [suggestions[d] for d in order], log)
