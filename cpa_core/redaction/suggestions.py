"""Suggested redactions: for a flagged document, the fewest driving terms whose removal lifts its certified
set to at least ``k`` under the audit's stored threshold.

Greedy: remove every occurrence of the heaviest term of the current match (its evidence, see
:mod:`cpa_core.attack.explainers`), attack the edited text again, recount its set against the document's stored
threshold, and repeat until the set holds ``k`` people or no evidence is left. Edits are offsets into the
*released* text, so they can be applied to the file as written. What a span becomes (nothing, its category
placeholder, or a generalisation such as a city's region) is decided by a
:class:`~cpa_core.redaction.replacements.Replacer`, and each edit records which kind it used.

The new set size is indicative: an edited release is a new release mechanism, and only a new calibration
certifies it.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cpa_core.attack.explainers import Explainer, Span
from cpa_core.common.errors import DataError
from cpa_core.conformal.calibration import set_sizes
from cpa_core.io.reading import FORMATS, read_table
from cpa_core.redaction.replacements import KINDS, STRATEGIES, Choice, GeneralizationTable, Replacer
from cpa_core.report.evidence import audit_explainer, evidence_rows
from cpa_core.report.worklist import risk_order

if TYPE_CHECKING:
    from cpa_core.attack.base import Attacker
    from cpa_core.audit.configuration import AuditConfig
    from cpa_core.audit.policy import ReleasePolicy
    from cpa_core.audit.results import AuditResult, Certificate
    from cpa_core.io.tables import Documents, Registry

REPLACEMENTS = dict(STRATEGIES)
"""The named strategies: what a redacted span becomes (see :mod:`cpa_core.redaction.replacements`): nothing, its category
placeholder (never evidence again), or a generalisation where the data allows."""
MAX_TERMS = 15


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
class Suggestion:
    """The suggested redaction of one document: its set size before and after (indicative) and the edits."""

    doc_id: str
    set_size_before: int
    set_size_after: int
    edits: tuple[Edit, ...]
    reaches_k: bool

    @property
    def characters(self) -> int:
        """Characters of the released text the edits remove (the utility cost)."""
        return sum(edit.length for edit in self.edits)

    def kinds(self) -> dict[str, int]:
        """How many edits of each kind (see :data:`~cpa_core.redaction.replacements.KINDS`)."""
        return edit_kinds([self])

    def to_dict(self) -> dict:
        return {"doc_id": self.doc_id, "set_size_before": self.set_size_before, "set_size_after": self.set_size_after,
                "reaches_k": self.reaches_k, "characters": self.characters, "kinds": self.kinds(),
                "edits": [edit.to_dict() for edit in self.edits]}


def edit_kinds(suggestions: Iterable[Suggestion]) -> dict[str, int]:
    """How many edits of each kind the suggestions make (every kind listed)."""
    counts = dict.fromkeys(KINDS, 0)
    for suggestion in suggestions:
        for edit in suggestion.edits:
            counts[edit.kind] += 1
    return counts


Rescore = Callable[[str], tuple[int, list[int]]]
"""An edited text -> its set size under the stored threshold, and the registry rows of its top candidates."""
Replacement = Callable[[Span], str]
"""What a span of evidence becomes in the redacted text (a :class:`~cpa_core.redaction.replacements.Replacer` is one)."""


def replacement_for(strategy: str, registry: Registry | None = None,
                    table: GeneralizationTable | None = None) -> Replacer:
    """The replacement of a named strategy (see :data:`REPLACEMENTS`); categories and generalisations come from
    the registry (none without one) and, for ``generalize``, the curator's table."""
    return Replacer.from_registry(registry, strategy, table)


def _chooser(strategy: str | Replacement) -> Callable[[Span, str], Choice]:
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
    shift = 0
    for edit in sorted(edits, key=lambda e: e.offset):
        begin = edit.offset + shift
        finish = begin + len(edit.replacement)
        if begin >= end:  # this edit, and every later one, lies after the span
            break
        if start < finish or start < begin:  # overlaps what it wrote, or straddles a deletion
            return None
        shift += len(edit.replacement) - edit.length
    return start - shift, end - shift


def suggest(doc_id: str, text: str, rescore: Rescore, explainer: Explainer, flag_below: int,
            strategy: str | Replacement = "placeholder", max_terms: int = MAX_TERMS) -> Suggestion:
    """The greedy redaction of one released text (see the module's docstring): each round takes the evidence of
    the text as edited so far, maps it back to the released text, and redacts every span of its heaviest term.
    ``strategy``: a name of :data:`REPLACEMENTS` (without the registry's categories), a
    :class:`~cpa_core.redaction.replacements.Replacer`, or any span -> text callable."""
    choose = _chooser(strategy)
    before, rows = rescore(text)
    size = before
    edits: list[Edit] = []
    removed: set[str] = set()
    current = text
    while size < flag_below and len(removed) < max_terms:
        spans = []
        for span in explainer.evidence(current, rows):
            where = None if span.term in removed else released_offsets(edits, span.start, span.end)
            if where is not None:
                spans.append(Span(where[0], where[1], span.text, span.term, span.weight))
        if not spans:
            break
        term = max(spans, key=lambda s: (s.weight, s.term)).term
        removed.add(term)
        for s in spans:
            if s.term == term:
                choice = choose(s, text)  # the span's offsets are into the released text
                edits.append(Edit(s.start, s.end - s.start, s.text, choice.replacement, term, choice.kind))
        edits.sort(key=lambda e: e.offset)
        current = apply_edits(text, edits)
        size, rows = rescore(current)
    return Suggestion(doc_id, before, size, tuple(edits), size >= flag_below)


def rescorer(result: AuditResult, cert: Certificate, row: int, attacker: Attacker,
             registry: Registry) -> Rescore:
    """Attack an edited version of audited document ``row`` and count its set under its stored threshold."""
    from cpa_core.audit.results import score_table

    config, split = result.config, cert.split
    doc_id, truth = split.table.doc_ids[row], split.truth_ids[row]
    threshold = np.array([cert.q_hat[row]])
    attacker.adopt(result.inputs.get("learned", {}))  # e.g. the temperature the audit chose

    def rescore(text: str) -> tuple[int, list[int]]:
        table = attacker.attack([doc_id], [text], registry, config.knowledge)
        scored = score_table(table, [truth], None, config)
        return int(set_sizes(scored.sorted_scores, scored.table.pool_sizes, threshold)[0]), evidence_rows(scored, 0)
    return rescore


def suggest_redactions(result: AuditResult, attacker: Attacker, registry: Registry, texts: dict[str, str],
                       policy: ReleasePolicy | None = None, confidence=None,
                       strategy: str | Replacement = "placeholder", max_terms: int = MAX_TERMS,
                       generalization: GeneralizationTable | None = None,
                       doc_ids: Iterable[str] | None = None) -> list[Suggestion]:
    """A suggestion for every document of the release the policy flags at ``confidence`` (default: the declared
    ones; see :func:`release_flags`), smallest set first; ``texts`` maps doc ids to the released texts. A named
    ``strategy`` is built once from the registry (and, for ``generalize``, the ``generalization`` table);
    ``doc_ids`` keeps only those flagged documents."""
    policy = policy or result.config.policy
    explainer = audit_explainer(attacker, registry, result.config)
    if explainer is None:
        return []
    flagged = release_flags(result, policy, confidence)
    if doc_ids is not None:
        wanted = {str(d) for d in doc_ids}
        flagged = [(cert, row) for cert, row in flagged if str(cert.split.table.doc_ids[row]) in wanted]
    if isinstance(strategy, str):
        strategy = replacement_for(strategy, registry, generalization)
    elif generalization is not None:
        raise TypeError("a generalisation table goes with a named strategy, not with a replacement of one's own")
    out = []
    for cert, row in flagged:
        doc_id = str(cert.split.table.doc_ids[row])
        out.append(suggest(doc_id, texts[doc_id], rescorer(result, cert, row, attacker, registry), explainer,
                           policy.flag_below, strategy, max_terms))
    return out


def release_flags(result: AuditResult, policy: ReleasePolicy | None = None,
                  confidence=None) -> list[tuple[Certificate, int]]:
    """Every document of the release the policy's set rule flags under the stored calibration, as (certificate, row),
    riskiest first (:func:`~cpa_core.report.worklist.risk_order`): the audited documents and, under the split protocol, the calibration
    documents too. Redaction changes the release mechanism, and a new calibration certifies the redacted release
    only when its calibration documents went through the same mechanism as its audited ones: so the rule
    "redact what the audit flags" is applied to every document alike, whichever split it fell in."""
    policy = policy or result.config.policy
    confidence = result.config.policy_confidence if confidence is None else confidence
    certificates = [result.certificate(confidence)]
    if result.config.protocol == "split":
        certificates.append(result.calibration_certificate(confidence))
    # the search lifts a set to k: it serves the documents the set rule flags (a document flagged by its linkage
    # probability alone is on the worklist, for the curator to redact or withhold)
    flagged = [(cert, int(row)) for cert in certificates for row in np.flatnonzero(policy.flags_by_set(cert.set_sizes))]
    return sorted(flagged, key=lambda item: risk_order(item[0], item[1]))



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


def redaction_log(config: AuditConfig, strategy: str | Replacement, suggestions: Sequence[Suggestion],
                  policy: ReleasePolicy | None = None, confidence=None,
                  generalization: GeneralizationTable | None = None) -> dict:
    """The machine-readable record of suggested redactions (``redactions.json``): the configuration, strategy
    and generalisation table (file and sha256) used, what the replacer derived from the registry (field names:
    hierarchies, the age band field, the category fields), the policy, counts of edits by kind, and per document
    its set size before and after (indicative) and its edits (offset, length, original, replacement, kind)."""
    policy = policy or config.policy
    confidence = config.policy_confidence if confidence is None else confidence
    derived = None
    if isinstance(strategy, Replacer):
        generalization = generalization or strategy.table
        name = strategy.strategy
        derived = None if name == "delete" else strategy.vocabulary.to_dict()
    else:
        name = strategy if isinstance(strategy, str) else "custom"
    return {"config_id": config.config_id, "strategy": name,
            "generalization": None if generalization is None else generalization.to_dict(),
            "derived": derived,
            "rule": policy.rule, "confidence": float(confidence),
            "note": "set sizes after are indicative: the redacted release is a new release mechanism and needs its "
                    "own calibration",
            "n_documents": len(suggestions), "n_reach_k": sum(s.reaches_k for s in suggestions),
            "edits_by_kind": edit_kinds(suggestions),
            "documents": [s.to_dict() for s in suggestions]}


def redacted_file(source, documents: Documents, suggestions) -> tuple[str, bytes]:
    """The release with every suggestion applied, in the input's format, encoding and columns: its file name and
    bytes. ``source`` is the input file's path, or its bytes as read (named by ``documents.file``)."""
    if isinstance(source, (bytes, bytearray)):
        data, name = bytes(source), str(documents.file)
    else:
        data, name = Path(source), str(source)
    frame, _ = read_table(data, name, encoding=documents.encoding)
    columns = {"doc_id": "doc_id", "text": "text", **dict(documents.columns)}
    edits = {s.doc_id: s.edits for s in suggestions}
    ids = frame[columns["doc_id"]].astype(str).str.strip()
    frame[columns["text"]] = [apply_edits(text, edits[i]) if i in edits else text
                              for i, text in zip(ids, frame[columns["text"]])]
    kind = FORMATS.get(Path(name).suffix.lower(), "csv")
    if kind == "parquet":
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return Path(name).name, buffer.getvalue()
    text = (frame.to_json(orient="records", lines=True, force_ascii=False) if kind == "jsonl"
            else frame.to_csv(index=False))
    try:
        return Path(name).name, text.encode(documents.encoding)
    except UnicodeEncodeError as error:
        raise DataError(name, "the redacted release cannot be written in its encoding",
                        expected=f"replacements that {documents.encoding} can encode",
                        found=f"the character U+{ord(error.object[error.start]):04X}") from None


def redacted_release(source, documents: Documents, suggestions, out_dir) -> Path:
    """Write the release with every suggestion applied, in the input's format, encoding and columns, to
    ``out_dir`` under the input's file name; returns its path (owner-only: it holds the released texts)."""
    name, payload = redacted_file(source, documents, suggestions)
    path = Path(out_dir) / name
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(handle, "wb") as out:
        out.write(payload)
    return path
