"""Suggested redactions: for a flagged document, the fewest driving terms whose removal lifts its certified
set to at least ``k`` under the audit's stored threshold.

Greedy: remove every occurrence of the heaviest term of the current match (its evidence, see
:mod:`cpa_core.evidence`), attack the edited text again, recount its set against the document's stored
threshold, and repeat until the set holds ``k`` people or no evidence is left. Edits are offsets into the
*released* text, so they can be applied to the file as written.

The new set size is indicative: an edited release is a new release mechanism, and only a new calibration
certifies it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from .conformal import set_sizes
from .data import FORMATS, read_table
from .evidence import Explainer, Span, evidence_rows

if TYPE_CHECKING:
    from .attackers.base import Attacker
    from .audit import AuditResult, Certificate
    from .data import Documents, Registry
    from .policy import ReleasePolicy

REPLACEMENTS = {"delete": "", "placeholder": "[REDACTED]"}
"""What a redacted span becomes: nothing, or a placeholder (which is never evidence again)."""
MAX_TERMS = 15


@dataclass(frozen=True)
class Edit:
    """Replace ``length`` characters of the released text at ``offset`` (they read ``original``)."""

    offset: int
    length: int
    original: str
    replacement: str
    term: str

    def to_dict(self) -> dict:
        return {"offset": self.offset, "length": self.length, "original": self.original,
                "replacement": self.replacement, "term": self.term}


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

    def to_dict(self) -> dict:
        return {"doc_id": self.doc_id, "set_size_before": self.set_size_before, "set_size_after": self.set_size_after,
                "reaches_k": self.reaches_k, "characters": self.characters,
                "edits": [edit.to_dict() for edit in self.edits]}


Rescore = Callable[[str], tuple[int, list[int]]]
"""An edited text -> its set size under the stored threshold, and the registry rows of its top candidates."""
Replacement = Callable[[Span], str]
"""What a span of evidence becomes in the redacted text."""


def replacement_for(strategy: str) -> Replacement:
    """The replacement of a named strategy (see :data:`REPLACEMENTS`)."""
    text = REPLACEMENTS[strategy]
    return lambda span: text


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
    the text as edited so far, maps it back to the released text, and redacts every span of its heaviest term."""
    replace = replacement_for(strategy) if isinstance(strategy, str) else strategy
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
        edits = sorted(edits + [Edit(s.start, s.end - s.start, s.text, replace(s), term) for s in spans
                                if s.term == term], key=lambda e: e.offset)
        current = apply_edits(text, edits)
        size, rows = rescore(current)
    return Suggestion(doc_id, before, size, tuple(edits), size >= flag_below)


def rescorer(result: "AuditResult", cert: "Certificate", row: int, attacker: "Attacker",
             registry: "Registry") -> Rescore:
    """Attack an edited version of audited document ``row`` and count its set under its stored threshold."""
    from .audit import score_table

    config, split = result.config, cert.split
    doc_id, truth = split.table.doc_ids[row], split.truth_ids[row]
    threshold = np.array([cert.q_hat[row]])

    def rescore(text: str) -> tuple[int, list[int]]:
        table = attacker.attack([doc_id], [text], registry, config.knowledge)
        scored = score_table(table, [truth], None, config)
        return int(set_sizes(scored.sorted_scores, scored.table.pool_sizes, threshold)[0]), evidence_rows(scored, 0)
    return rescore


def suggest_redactions(result: "AuditResult", attacker: "Attacker", registry: "Registry", texts: dict[str, str],
                       policy: "ReleasePolicy | None" = None, confidence=None, strategy: str = "placeholder",
                       max_terms: int = MAX_TERMS) -> list[Suggestion]:
    """A suggestion for every document the policy flags at ``confidence`` (default: the declared ones), smallest
    set first; ``texts`` maps doc ids to the released texts."""
    policy = policy or result.config.policy
    cert = result.certificate(confidence if confidence is not None else result.config.policy_confidence)
    explainer = attacker.explainer(registry, result.config.knowledge)
    if explainer is None:
        return []
    rows = np.flatnonzero(policy.flags(cert.set_sizes))
    rows = rows[np.lexsort((cert.split.table.doc_ids[rows].astype(str), cert.set_sizes[rows]))]
    out = []
    for row in rows:
        doc_id = str(cert.split.table.doc_ids[row])
        out.append(suggest(doc_id, texts[doc_id], rescorer(result, cert, int(row), attacker, registry), explainer,
                           policy.flag_below, strategy, max_terms))
    return out


def redacted_release(source, documents: "Documents", suggestions, out_dir) -> Path:
    """Write the release with every suggestion applied, in the input's format, encoding and columns, to
    ``out_dir`` under the input's file name; returns its path (owner-only: it holds the released texts)."""
    source = Path(source)
    frame, _ = read_table(source, str(source), encoding=documents.encoding)
    columns = {"doc_id": "doc_id", "text": "text", **dict(documents.columns)}
    edits = {s.doc_id: s.edits for s in suggestions}
    ids = frame[columns["doc_id"]].astype(str).str.strip()
    frame[columns["text"]] = [apply_edits(text, edits[i]) if i in edits else text
                              for i, text in zip(ids, frame[columns["text"]])]
    path = Path(out_dir) / source.name
    kind = FORMATS.get(source.suffix.lower(), "csv")
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(handle)
    if kind == "parquet":
        frame.to_parquet(path, index=False)
    elif kind == "jsonl":
        path.write_text(frame.to_json(orient="records", lines=True, force_ascii=False), encoding=documents.encoding)
    else:
        frame.to_csv(path, index=False, encoding=documents.encoding)
    return path
