"""Suggested redactions that never raise risk: for a flagged document, the fewest driving terms whose removal
makes it acceptable to the release policy under the audit's stored calibration, for every attacker of its panel.

Greedy, in lockstep over many documents (one attack per round and member for all of them,
:class:`~cpa_core.audit.rescoring.PanelStoredRisk`; a single attacker's audit is a panel of one): each round takes
the evidence every member gives of each text as edited so far (:class:`~cpa_core.attack.explainers.PanelExplainer`;
see :mod:`cpa_core.attack.explainers`), maps it back to the released text, proposes removing every span of each of
its :data:`PROPOSALS` heaviest terms, attacks every proposal with every member, and keeps, per document, the proposal
that lowers its risk most (a member whose attack of one text is costly, dense retrieval encoding it again or an LLM
reading it, attacks only the proposal the others rank best, then the next when that one raises its risk). A step is
taken only when no member's risk rises and one member's falls (its set grows, its linkage probability or its
certainty falls; :meth:`~cpa_core.audit.rescoring.PanelRisk.lower_than`): a term
whose removal would raise any member's risk, or lower none, is never redacted (it is recorded as rejected), so every
step, and the end, is at most as risky as the start for every member. The search ends when the document is
acceptable to every member (``|C| >= k`` and its linkage probability within the acceptable rate), when no evidence
is left, or after :data:`MAX_TERMS` terms; a document it cannot make acceptable is marked *withhold*, with the
reason. Where no document can show a linkage probability within the acceptable rate under the stored calibration,
the search aims at the lowest one it can show (:func:`reachable`), and a document the release policy flags is never
left unchanged: it takes at least one step that lowers its risk, or is to be withheld. Nothing else stops the
search: in particular not a change of the attacker's first guess, which may move onto the true subject.

The search consults only the panel's members: a redacted release is verified by a new audit with the panel and an
attacker held out of the search (:func:`held_out_attacker`).

Edits are offsets into the *released* text, so they can be applied to the file as written. What a span becomes
(nothing, its category placeholder, or a generalisation such as a city's region) is decided by a
:class:`~cpa_core.redaction.replacements.Replacer`, and each edit records which kind it used. Terms of a deny list
are never proposed.

The risk after is indicative: an edited release is a new release mechanism, and only a new calibration certifies it.
"""

from __future__ import annotations

import bisect
import io
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cpa_core.attack.explainers import Explainer, PanelExplainer, Span, fold
from cpa_core.attack.function_words import NONE as NO_FUNCTION_WORDS
from cpa_core.attack.function_words import FunctionWords
from cpa_core.audit.panel import PanelResult
from cpa_core.audit.policy import ReleasePolicy
from cpa_core.audit.rescoring import PanelRisk, PanelStoredRisk, Rescored, Risk, joined
from cpa_core.common.errors import DataError
from cpa_core.io.columns import ROW_NUMBERS, row_numbers
from cpa_core.io.reading import FORMATS, read_table
from cpa_core.redaction.replacements import KINDS, STRATEGIES, Choice, GeneralizationTable, Replacer
from cpa_core.report.evidence import panel_explainers
from cpa_core.report.formatting import counted
from cpa_core.report.worklist import risk_order

if TYPE_CHECKING:
    from cpa_core.attack.base import Attacker
    from cpa_core.audit.results import AuditResult
    from cpa_core.io.tables import Documents, Registry

REPLACEMENTS = dict(STRATEGIES)
"""The named strategies: what a redacted span becomes (see :mod:`cpa_core.redaction.replacements`): nothing, its category
placeholder (never evidence again), or a generalisation where the data allows."""
MAX_TERMS = 15
"""The most terms one document's suggestion redacts."""
PROPOSALS = 3
"""The heaviest terms tried per document and round."""
MAX_TRIED = 4 * MAX_TERMS
"""The most terms tried for one document (accepted or rejected)."""
CHUNK = 2000
"""Documents searched together (one attack per round for all of them); progress is reported per chunk."""
REDACT, WITHHOLD = "redact", "withhold"
"""What a suggestion says to do with its document."""


@dataclass(frozen=True)
class Edit:
    """Replace ``length`` characters of the released text at ``offset`` (they read ``original``)."""

    offset: int
    length: int
    original: str
    replacement: str
    term: str
    kind: str = ""  # one of KINDS; by default "delete" for an empty replacement, else "placeholder"

    def __post_init__(self):
        if not self.kind:
            object.__setattr__(self, "kind", "delete" if self.replacement == "" else "placeholder")
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind of edit '{self.kind}'; expected one of {', '.join(KINDS)}")

    def to_dict(self) -> dict:
        return {"offset": self.offset, "length": self.length, "original": self.original,
                "replacement": self.replacement, "term": self.term, "kind": self.kind}


def apply_edits(text: str, edits) -> str:
    """The text with the (non-overlapping) edits applied."""
    for edit in sorted(edits, key=lambda e: e.offset, reverse=True):
        text = text[:edit.offset] + edit.replacement + text[edit.offset + edit.length:]
    return text


@dataclass(frozen=True)
class Step:
    """One redacted term of a suggestion and the document's risk once it (and every earlier one) is redacted."""

    term: str
    risk: Risk | PanelRisk


@dataclass(frozen=True)
class Suggestion:
    """The suggested redaction of one document: its risk before and after (indicative), the edits, the steps that
    led there, and what to do: ``redact`` (the edits make it acceptable) or ``withhold`` (no safe redaction of its
    evidence does; ``reason`` says why). ``rejected``: terms whose removal would not have lowered its risk."""

    doc_id: str
    before: Risk | PanelRisk
    after: Risk | PanelRisk
    edits: tuple[Edit, ...]
    flag_below: int
    action: str = REDACT
    reason: str = ""
    steps: tuple[Step, ...] = ()
    rejected: tuple[str, ...] = ()

    @property
    def set_size_before(self) -> int:
        return self.before.set_size

    @property
    def set_size_after(self) -> int:
        return self.after.set_size

    @property
    def reaches_k(self) -> bool:
        return self.after.set_size >= self.flag_below

    @property
    def characters(self) -> int:
        """Characters of the released text the edits remove (the utility cost)."""
        return sum(edit.length for edit in self.edits)

    def kinds(self) -> dict[str, int]:
        """How many edits of each kind (see :data:`~cpa_core.redaction.replacements.KINDS`)."""
        return edit_kinds([self])

    def risk_after(self, term: str) -> Risk | PanelRisk | None:
        """The risk once ``term`` (and every term redacted before it) is redacted."""
        return next((step.risk for step in self.steps if step.term == term), None)

    def to_dict(self) -> dict:
        return {"doc_id": self.doc_id, "action": self.action, "reason": self.reason,
                "set_size_before": self.set_size_before, "set_size_after": self.set_size_after,
                "linkage_before": self.before.linkage, "linkage_after": self.after.linkage,
                "reaches_k": self.reaches_k, "characters": self.characters, "kinds": self.kinds(),
                "steps": [{"term": step.term, **step.risk.to_dict()} for step in self.steps],
                "rejected_terms": len(self.rejected),
                "edits": [edit.to_dict() for edit in self.edits]}


def edit_kinds(suggestions: Iterable[Suggestion]) -> dict[str, int]:
    """How many edits of each kind the suggestions make (every kind listed)."""
    counts = dict.fromkeys(KINDS, 0)
    for suggestion in suggestions:
        for edit in suggestion.edits:
            counts[edit.kind] += 1
    return counts


RescoreBatch = Callable[[Sequence[object], Sequence[str]], list[Rescored]]
"""Documents (whatever names them for the re-scorer) and an edited text of each -> each text's risk and evidence
rows under the stored calibration (:meth:`~cpa_core.audit.rescoring.PanelStoredRisk.of` is one)."""
Replacement = Callable[[Span], str]
"""What a span of evidence becomes in the redacted text (a :class:`~cpa_core.redaction.replacements.Replacer` is one)."""


def replacement_for(strategy: str, registry: Registry | None = None,
                    table: GeneralizationTable | None = None) -> Replacer:
    """The replacement of a named strategy (see :data:`REPLACEMENTS`); categories and generalisations come from
    the registry (none without one) and, for ``generalize``, the curator's table."""
    return Replacer.from_registry(registry, strategy, table)


def chooser(strategy: str | Replacement) -> Callable[[Span, str], Choice]:
    """A span of a text -> its replacement and kind: a replacer reads the words around the span; any other
    callable gives the text only (its kind: "delete" when empty, else "placeholder")."""
    replace = replacement_for(strategy) if isinstance(strategy, str) else strategy
    if isinstance(replace, Replacer):
        return replace.choose

    def choose(span: Span, text: str) -> Choice:
        replacement = replace(span)
        return Choice(replacement, "delete" if replacement == "" else "placeholder")
    return choose


def released_offsets(edits: Sequence[Edit], start: int, end: int) -> tuple[int, int] | None:
    """Where ``[start, end)`` of the text with ``edits`` applied lies in the released text; ``None`` when it
    touches what an edit wrote (or straddles a deletion)."""
    return OffsetMap(edits).released(start, end)


class OffsetMap:
    """The edits of a text, sorted once, mapping ranges of the edited text back to the released one (a bisection
    per range)."""

    def __init__(self, edits: Sequence[Edit]):
        ordered = sorted(edits, key=lambda e: e.offset)
        self.begins, self.finishes, self.shifts = [], [], [0]
        for edit in ordered:  # where each edit's replacement lies in the edited text
            begin = edit.offset + self.shifts[-1]
            self.begins.append(begin)
            self.finishes.append(begin + len(edit.replacement))
            self.shifts.append(self.shifts[-1] + len(edit.replacement) - edit.length)

    def released(self, start: int, end: int) -> tuple[int, int] | None:
        before = bisect.bisect_left(self.begins, end)  # the edits that begin before the range ends
        if before and (start < self.finishes[before - 1] or start < self.begins[before - 1]):
            return None  # overlaps what the last of them wrote, or straddles a deletion
        shift = self.shifts[before]
        return start - shift, end - shift


def folded_terms(words: Iterable[str]) -> frozenset[str]:
    """A list of words as the search compares them (case and accents aside, blanks dropped)."""
    return frozenset(" ".join(fold(w).split()) for w in words if str(w).strip())


@dataclass
class _Search:
    """One document's search: the released text, the edits so far, its risk and evidence rows now."""

    name: object
    doc_id: str
    text: str
    before: Risk
    current: Rescored
    edits: list[Edit] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    redacted: set[str] = field(default_factory=set)
    rejected: list[str] = field(default_factory=list)

    flagged: bool = False  # flagged as released: never left unchanged
    deny: frozenset[str] = frozenset()  # folded words never redacted in it: the deny list and its function words

    def safe(self, policy: ReleasePolicy) -> bool:
        """Acceptable to the policy (to every member of a panel) as edited so far, and changed if it was flagged."""
        return self.current.risk.acceptable(policy) and (bool(self.steps) or not self.flagged)

    @property
    def edited(self) -> str:
        return apply_edits(self.text, self.edits)

    def tried(self) -> int:
        return len(self.redacted) + len(self.rejected)


def _proposals(search: _Search, spans: Sequence[Span], deny: frozenset[str], room: int) -> dict[str, list[Span]]:
    """The ``room`` heaviest terms the document's evidence offers now (a term weighs what its heaviest span does),
    each with its spans in the released text; terms already redacted or rejected, denied words and spans that
    touch an edit are left out."""
    by_term: dict[str, list[Span]] = {}
    for span in spans:
        by_term.setdefault(span.term, []).append(span)
    skip = search.redacted | set(search.rejected)
    ranked = sorted((t for t in by_term if t not in skip), key=lambda t: (-max(s.weight for s in by_term[t]), t))
    mapping = OffsetMap(search.edits)
    offered: dict[str, list[Span]] = {}
    for term in ranked:
        if len(offered) >= room:
            break
        if deny and fold(term) in deny:
            continue
        kept = []
        for span in by_term[term]:
            where = mapping.released(span.start, span.end)
            if where is not None and not (deny and " ".join(fold(span.text).split()) in deny):
                kept.append(Span(where[0], where[1], span.text, span.term, span.weight))
        if kept:
            offered[term] = kept
    return offered


def _shortfall(risk: Risk, policy: ReleasePolicy) -> list[str]:
    """What keeps one attacker's risk from being acceptable."""
    short = []
    if risk.set_size < policy.flag_below:
        short.append(f"|C| = {risk.set_size} < k = {policy.flag_below}")
    if risk.linkage is not None and risk.linkage > policy.linkage_rate:
        short.append(f"linkage probability {risk.linkage:.3g} > {policy.linkage_rate:.3g}")
    return short


def _withhold_reason(search: _Search, policy: ReleasePolicy) -> str:
    risk = search.current.risk
    if isinstance(risk, PanelRisk) and len(risk.members) > 1:  # each member it is not acceptable to
        short = [f"{name}: {' and '.join(_shortfall(member, policy)) or 'still flagged'}"
                 for name, member in zip(risk.names, risk.members) if not member.acceptable(policy)]
        left = "; ".join(short) or "it is still flagged"
    else:
        member = risk.members[0] if isinstance(risk, PanelRisk) else risk
        left = " and ".join(_shortfall(member, policy)) or "it is still flagged"
    if not search.steps:
        return (f"no redaction of its evidence lowers its risk ({counted(len(search.rejected), 'term')} tried); "
                f"{left}" if search.rejected else f"the attacker's evidence offers nothing to redact; {left}")
    redacted = f"after redacting {counted(len(search.steps), 'term')} ({counted(len(search.edits), 'edit')}), {left}"
    return redacted + (f"; {counted(len(search.rejected), 'more term')} would not lower its risk"
                       if search.rejected else "")


def search_redactions(documents: Sequence[tuple[object, str, str]], rescore: RescoreBatch, explainer: Explainer,
                      policy: ReleasePolicy, strategy: str | Replacement = "placeholder",
                      max_terms: int = MAX_TERMS, deny: Collection[str] = (),
                      before: Sequence[Risk] | None = None, proposals: int = PROPOSALS,
                      progress: Callable[[list[Suggestion], int], None] | None = None,
                      flagged_by: ReleasePolicy | None = None, costly: Sequence[int] = (),
                      function_words: FunctionWords = NO_FUNCTION_WORDS) -> list[Suggestion]:
    """The greedy search of the module's docstring over ``documents``: each ``(name, doc_id, released text)``,
    ``name`` naming the document for ``rescore``; the suggestions in the order of ``documents``. ``flagged_by``: the
    release policy, when ``policy`` is the target a search can reach (:func:`reachable`): a document it flags as
    released is never left unchanged, even when it is within the target (at least one step that lowers its risk, else
    it is to be withheld). ``before``: each
    document's risk as released (default: its text re-scored); ``deny``: words never redacted, and in each document
    its ``function_words`` (:mod:`cpa_core.attack.function_words`) neither; ``proposals``:
    the heaviest terms tried per round (1: the heaviest term whenever it lowers the risk); ``progress(finished
    suggestions, total)`` is called after each round (stopping it there keeps the finished ones).
    ``costly``: members of a panel whose attack of one text is costly (indices; ``rescore`` then takes ``members=``
    and gives the risk under those members alone): every proposal is attacked by the others, and the costly members
    attack a document's best proposal only (by the others' risk), then its next best when it raises theirs, until
    one is taken; every step taken is still one that raises no member's risk and lowers one's."""
    if not documents:
        return []
    choose = chooser(strategy)
    deny = folded_terms(deny)
    names = [name for name, _, _ in documents]
    start = rescore(names, [text for _, _, text in documents])
    searches = []
    for i, ((name, doc_id, text), found) in enumerate(zip(documents, start)):
        risk = found.risk if before is None else before[i]
        searches.append(_Search(name, str(doc_id), text, risk, Rescored(risk, found.rows, found.clues),
                                flagged=flagged_by is not None and not risk.acceptable(flagged_by),
                                deny=deny | function_words.of(text)))
    finished: dict[int, Suggestion] = {}

    def finish(done: Iterable[_Search]) -> None:
        for search in done:
            finished[id(search)] = _suggestion(search, policy, flagged_by)
        if progress is not None:
            progress(list(finished.values()), len(searches))
    active = [s for s in searches if not s.safe(policy)]
    finish(s for s in searches if s.safe(policy))
    while active:
        evidence = explainer.evidence_batch([s.edited for s in active], [s.current.rows for s in active],
                                            [s.current.clues for s in active])
        tries = []  # (search, term, weight, edits)
        for search, spans in zip(active, evidence):
            room = min(proposals, MAX_TRIED - search.tried())
            offered = _proposals(search, spans, search.deny, room) if room > 0 else {}
            for term in offered:
                new = [_edit(choose, s, search.text) for s in offered[term]]
                tries.append((search, term, max(s.weight for s in offered[term]),
                              sorted(search.edits + new, key=lambda e: e.offset)))
        if not tries:
            break
        best = _staged_best(tries, rescore, policy, costly) if costly else _best(tries, rescore, policy)
        still = []
        for search in {id(t[0]): t[0] for t in tries}.values():
            chosen = best.get(id(search))
            if chosen is not None:
                _, term, edits, rescored = chosen
                search.edits, search.current = edits, rescored
                search.redacted.add(term)
                search.steps.append(Step(term, rescored.risk))
            if search.safe(policy) or len(search.redacted) >= max_terms \
                    or search.tried() >= MAX_TRIED:
                continue
            still.append(search)
        kept = {id(search) for search in still}
        finish(search for search in active if id(search) not in kept)
        active = still
    finish(active)
    return [finished[id(search)] for search in searches]


def _key(risk, policy: ReleasePolicy, edits: Sequence[Edit], weight: float) -> tuple:
    """How good a proposal is (the larger the better): acceptable first, and among acceptable ones the one that keeps
    more of the text (removes fewer characters); then the larger set, the lower linkage probability, the lower
    certainty, the fewer characters removed, the heavier term."""
    removed = sum(edit.length for edit in edits)
    acceptable = risk.acceptable(policy)
    return (acceptable, -removed if acceptable else 0, risk.set_size, -(risk.linkage or 0.0), -risk.certainty,
            -removed, weight)


def _best(tries: list[tuple], rescore: RescoreBatch, policy: ReleasePolicy) -> dict[int, tuple]:
    """Each search's best proposal among ``tries`` (``(search, term, weight, edits)``) that lowers its risk, as
    ``(key, term, edits, rescored)`` by the search's id; a proposal that does not lower it is rejected."""
    found = rescore([t[0].name for t in tries], [apply_edits(t[0].text, t[3]) for t in tries])
    best: dict[int, tuple] = {}
    for (search, term, weight, edits), rescored in zip(tries, found):
        if not rescored.risk.lower_than(search.current.risk):
            search.rejected.append(term)
            continue
        key = _key(rescored.risk, policy, edits, weight)
        if id(search) not in best or key > best[id(search)][0]:
            best[id(search)] = (key, term, edits, rescored)
    return best


def _staged_best(tries: list[tuple], rescore: RescoreBatch, policy: ReleasePolicy, costly: Sequence[int]
                 ) -> dict[int, tuple]:
    """:func:`_best` with the ``costly`` members attacking only the proposal each search would take: every proposal
    is attacked by the other members (one that raises their risk is rejected), then, best first by their risk, a
    search's proposals by the costly members, one per search and batch, until one lowers its whole risk (the others
    it raises are rejected)."""
    names = tries[0][0].current.risk.names
    costly = list(costly)
    cheap = [i for i in range(len(names)) if i not in costly]
    found = rescore([t[0].name for t in tries], [apply_edits(t[0].text, t[3]) for t in tries], members=cheap)
    queue: dict[int, list[tuple]] = {}
    searches = {}
    for (search, term, weight, edits), rescored in zip(tries, found):
        if not rescored.risk.no_higher_than(search.current.risk.part(cheap)):
            search.rejected.append(term)
            continue
        queue.setdefault(id(search), []).append((_key(rescored.risk, policy, edits, weight), term, edits, rescored))
        searches[id(search)] = search
    for proposals in queue.values():
        proposals.sort(key=lambda proposal: proposal[0], reverse=True)
    best: dict[int, tuple] = {}
    while queue:
        heads = [(sid, proposals.pop(0)) for sid, proposals in queue.items()]
        checked = rescore([searches[sid].name for sid, _ in heads],
                          [apply_edits(searches[sid].text, head[2]) for sid, head in heads], members=costly)
        for (sid, (key, term, edits, rescored)), verified in zip(heads, checked):
            search = searches[sid]
            whole = joined([(cheap, rescored), (costly, verified)], names)
            if whole.risk.lower_than(search.current.risk):
                best[sid] = (key, term, edits, whole)
                del queue[sid]
            else:
                search.rejected.append(term)
                if not queue[sid]:
                    del queue[sid]
    return best


def _suggestion(search: _Search, policy: ReleasePolicy, flagged_by: ReleasePolicy | None = None) -> Suggestion:
    safe = search.safe(policy)
    return Suggestion(search.doc_id, search.before, search.current.risk, tuple(search.edits), policy.flag_below,
                      REDACT if safe else WITHHOLD, "" if safe else _withhold_reason(search, flagged_by or policy),
                      tuple(search.steps), tuple(search.rejected))


def _edit(choose, span: Span, text: str) -> Edit:
    choice = choose(span, text)  # the span's offsets are into the released text
    return Edit(span.start, span.end - span.start, span.text, choice.replacement, span.term, choice.kind)


def suggest(doc_id: str, text: str, rescore: Callable[[str], Rescored | tuple[int, list[int]]], explainer: Explainer,
            flag_below: int, strategy: str | Replacement = "placeholder", max_terms: int = MAX_TERMS,
            deny: Collection[str] = (), proposals: int = PROPOSALS) -> Suggestion:
    """The search of one released text, ``rescore`` giving an edited text's :class:`Rescored` (or its set size
    and evidence rows: a set rule alone, the attacker's certainty unknown). ``strategy``: a name of
    :data:`REPLACEMENTS` (without the registry's categories), a
    :class:`~cpa_core.redaction.replacements.Replacer`, or any span -> text callable."""
    def batch(names, texts):
        out = []
        for edited in texts:
            found = rescore(edited)
            if not isinstance(found, Rescored):
                size, rows = found
                found = Rescored(Risk(int(size), None, 0.0), tuple(rows))
            out.append(found)
        return out
    return search_redactions([(doc_id, doc_id, text)], batch, explainer, ReleasePolicy(flag_below), strategy,
                             max_terms, deny, proposals=proposals)[0]


def panel_members(result: AuditResult | PanelResult, attacker: Attacker | Sequence[Attacker]
                  ) -> list[tuple[AuditResult, Attacker]]:
    """Each member's audit and attacker: a panel's members with their attackers (in the panel's order), or one
    attacker's audit as a panel of one."""
    if isinstance(result, PanelResult):
        attackers = list(attacker) if isinstance(attacker, (list, tuple)) else [attacker]
        if len(attackers) != len(result.members):
            raise ValueError(f"a panel of {len(result.members)} attackers needs each member's attacker, found "
                             f"{len(attackers)}")
        return list(zip(result.members, attackers))
    return [(result, attacker)]


def panel_explainer(members: Sequence[tuple[AuditResult, Attacker]], registry: Registry) -> PanelExplainer | None:
    """The evidence the search reads: the members' explainers (:func:`~cpa_core.report.evidence.panel_explainers`:
    dense retrieval's only when no member explains by words), ``None`` when none explains. Every member's risk is read
    at every step alike: a step that raises it is never taken."""
    explainers = panel_explainers([(result.config, attacker) for result, attacker in members], registry)
    if all(explainer is None for explainer in explainers):
        return None
    return PanelExplainer(members=tuple(explainers))


def suggest_redactions(result: AuditResult | PanelResult, attacker: Attacker | Sequence[Attacker], registry: Registry,
                       texts: dict[str, str], policy: ReleasePolicy | None = None, confidence=None,
                       strategy: str | Replacement = "placeholder", max_terms: int = MAX_TERMS,
                       generalization: GeneralizationTable | None = None,
                       doc_ids: Iterable[str] | None = None, deny: Collection[str] = (),
                       function_words: FunctionWords = NO_FUNCTION_WORDS,
                       progress: Callable[[list[Suggestion], int], None] | None = None) -> list[Suggestion]:
    """A suggestion for every document of the release the policy flags at ``confidence`` (default: the declared
    ones; see :func:`release_flags`), riskiest first; ``texts`` maps doc ids to the released texts. ``result`` is one
    attacker's audit (``attacker`` its attacker) or an attacker panel's (``attacker``: each member's, in order):
    every member's evidence is read and every member's risk is kept from rising (see the module's docstring). A
    named ``strategy`` is built once from the registry (and, for ``generalize``, the ``generalization`` table);
    ``doc_ids`` keeps only those flagged documents; ``deny``: words never redacted, nor in a document its
    ``function_words``. Documents are searched
    :data:`CHUNK` at a time, in lockstep; ``progress(finished suggestions, total)`` is called after each round."""
    members = panel_members(result, attacker)
    policy = policy or members[0][0].config.policy
    explainer = panel_explainer(members, registry)
    if explainer is None:
        return []
    stored = PanelStoredRisk(members, registry, confidence)
    flagged = release_flags(stored, policy)
    if doc_ids is not None:
        wanted = {str(d) for d in doc_ids}
        flagged = [name for name in flagged if _doc_id(stored, name) in wanted]
    if isinstance(strategy, str):
        strategy = replacement_for(strategy, registry, generalization)
    elif generalization is not None:
        raise TypeError("a generalisation table goes with a named strategy, not with a replacement of one's own")
    target = reachable(policy, stored.linkage_floor)
    out: list[Suggestion] = []
    order = {_doc_id(stored, name): i for i, name in enumerate(flagged)}
    pools = {name: int(stored.certificates()[name[0]].split.table.pool_sizes[name[1]]) for name in flagged}
    small = [name for name in flagged if pools[name] < policy.flag_below]
    if small:  # no redaction gives a set more people than its pool holds
        for name in small:
            risk = stored.certified(name)
            out.append(Suggestion(_doc_id(stored, name), risk, risk, (), policy.flag_below, WITHHOLD,
                                  f"its pool holds {pools[name]:,} people, fewer than k = {policy.flag_below}: no "
                                  "redaction gives it a set of k"))
        flagged = [name for name in flagged if pools[name] >= policy.flag_below]
        if progress is not None:
            progress(list(out), len(flagged) + len(out))
    total = len(flagged) + len(out)
    for first in range(0, len(flagged), CHUNK):
        chunk = flagged[first:first + CHUNK]
        documents = [(name, _doc_id(stored, name), texts[_doc_id(stored, name)]) for name in chunk]

        def report(done: list[Suggestion], _total: int, earlier: int = len(out)) -> None:
            if progress is not None:
                progress(out[:earlier] + done, total)
        out.extend(search_redactions(documents, stored.of, explainer, target, strategy, max_terms, deny,
                                     progress=report, flagged_by=policy, costly=stored.costly,
                                     function_words=function_words))
    return sorted(out, key=lambda s: order[s.doc_id])  # riskiest first


def _doc_id(stored: PanelStoredRisk, name: tuple[int, int]) -> str:
    part, row = name
    return str(stored.certificates()[part].split.table.doc_ids[row])


def reachable(policy: ReleasePolicy, floor: float) -> ReleasePolicy:
    """The policy a search aims at: ``policy``, with an acceptable linkage rate of at least ``floor``, the lowest
    linkage probability the stored calibration gives any document (a release whose least identifiable documents
    are linked more often than the policy accepts cannot show one below it; its new calibration decides)."""
    if floor <= policy.linkage_rate:
        return policy
    return replace(policy, acceptable_linkage=floor)


def release_flags(stored: PanelStoredRisk, policy: ReleasePolicy | None = None) -> list[tuple[int, int]]:
    """Every document of the release the policy flags under any member's stored calibration (by its set or by its
    linkage probability), named ``(part, row)`` (:meth:`~cpa_core.audit.rescoring.PanelStoredRisk.documents`),
    riskiest first (the riskiest member's :func:`~cpa_core.report.worklist.risk_order`): the audited documents and,
    under the split protocol, the calibration documents too. Redaction changes the release mechanism, and a new
    calibration certifies the redacted release only when its calibration documents went through the same mechanism
    as its audited ones: so the rule "redact what the audit flags" is applied to every document alike, whichever
    split it fell in."""
    policy = policy or stored.stored[0].result.config.policy
    members = [stored.certificates(i) for i in range(len(stored.names))]
    flagged = sorted({(part, int(row)) for certificates in members for part, cert in enumerate(certificates)
                      for row in np.flatnonzero(cert.flags(policy))})
    return sorted(flagged, key=lambda name: min(risk_order(certificates[name[0]], name[1])
                                                for certificates in members))


SUGGESTION_COLUMNS = ("set_size_after_edits", "reaches_k", "suggested_edits")


def suggested_worklist(work: pd.DataFrame, suggestions: Sequence[Suggestion]) -> pd.DataFrame:
    """The worklist with each flagged document's suggestion: its set size after the edits (indicative), whether
    that reaches k, and the edits as machine-readable ``offset``, ``length``, ``original``, ``replacement`` and
    ``kind`` (empty for a document without a suggestion)."""
    found = {s.doc_id: s for s in suggestions}
    frame = work.copy()
    chosen = [found.get(str(doc_id)) for doc_id in frame["doc_id"]]
    frame["set_size_after_edits"] = pd.array([None if s is None else s.set_size_after for s in chosen], dtype="Int64")
    frame["reaches_k"] = pd.array([None if s is None else s.reaches_k for s in chosen], dtype="boolean")
    frame["suggested_edits"] = [[] if s is None else [edit.to_dict() for edit in s.edits] for s in chosen]
    columns = [c for c in frame.columns if c not in ("config_id", "confidence")]
    return frame[columns + ["config_id", "confidence"]]


def redacted_name(name: str) -> str:
    """The redacted release's file name: the input's stem with ``-redacted`` (never the input's own name)."""
    path = Path(name)
    return f"{path.stem}-redacted{path.suffix}"


def decided_frame(frame: pd.DataFrame, edits: Mapping[str, Sequence[Edit]], withheld: Collection[str] = (),
                  doc_id: str = "doc_id", text: str = "text") -> pd.DataFrame:
    """A table of released documents with the edits applied (doc id -> its edits) and the ``withheld`` documents
    left out (``doc_id`` and ``text`` name its columns)."""
    ids = frame[doc_id].astype(str).str.strip()
    out = frame.copy()
    out[text] = [apply_edits(t, edits[i]) if i in edits else t for i, t in zip(ids, frame[text])]
    return out[~ids.isin({str(d) for d in withheld})].reset_index(drop=True)


def source_name(source, documents: Documents) -> str:
    """The name of the input file of :func:`redacted_file` (its path, or ``documents.file`` for its bytes as read):
    the redacted release is named after it (:func:`redacted_name`)."""
    return str(documents.file) if isinstance(source, (bytes, bytearray)) else str(source)


def redacted_file(source, documents: Documents, edits: Mapping[str, Sequence[Edit]],
                  withheld: Collection[str] = ()) -> tuple[str, bytes]:
    """The release with the edits applied (doc id -> its edits) and the ``withheld`` documents left out, in the
    input's format, encoding and columns (and a ``doc_id`` column first when its rows were numbered, holding the
    numbers): its file name (:func:`redacted_name`) and bytes. ``source`` is the input file's path, or its bytes as
    read (named by ``documents.file``)."""
    name = source_name(source, documents)
    data = bytes(source) if isinstance(source, (bytes, bytearray)) else Path(source)
    frame, _ = read_table(data, name, encoding=documents.encoding)
    columns = {"doc_id": "doc_id", "text": "text", **dict(documents.columns)}
    if columns["doc_id"] == ROW_NUMBERS:  # withheld rows would renumber the rest: the release keeps its ids
        frame = frame.drop(columns="doc_id", errors="ignore")
        frame.insert(0, "doc_id", row_numbers(len(frame)))
        columns["doc_id"] = "doc_id"
    frame = decided_frame(frame, edits, withheld, columns["doc_id"], columns["text"])
    kind = FORMATS.get(Path(name).suffix.lower(), "csv")
    if kind == "parquet":
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return redacted_name(name), buffer.getvalue()
    text = (frame.to_json(orient="records", lines=True, force_ascii=False) if kind == "jsonl"
            else frame.to_csv(index=False))
    try:
        return redacted_name(name), text.encode(documents.encoding)
    except UnicodeEncodeError as error:
        raise DataError(name, "the redacted release cannot be written in its encoding",
                        expected=f"replacements that {documents.encoding} can encode",
                        found=f"the character U+{ord(error.object[error.start]):04X}") from None


def redacted_release(source, documents: Documents, edits: Mapping[str, Sequence[Edit]], out_dir,
                     withheld: Collection[str] = ()) -> Path:
    """Write the redacted release (:func:`redacted_file`) to ``out_dir``; returns its path (owner-only: it holds
    the released texts)."""
    name, payload = redacted_file(source, documents, edits, withheld)
    path = Path(out_dir) / name
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(handle, "wb") as out:
        out.write(payload)
    return path
