"""A document's evidence, as every surface shows it (the drill-down, the worklist, the report).

:func:`document_evidence` is the one computation: the same candidates (the document's top
``n_candidates``), the same terms (the ``n_terms`` heaviest that are not function words of the release,
:func:`release_function_words`), every occurrence of each.
:func:`audit_explainer` is the attacker's explainer with the declared configuration's placeholders:
every caller goes through it.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from cpa_core.audit.configuration import AuditConfig
    from cpa_core.audit.results import ScoredSplit
    from cpa_core.io.tables import Registry
from cpa_core.attack.explainers import N_TERMS, Explainer, Span, fold, heaviest_terms, inferred_clues, released_text
from cpa_core.attack.function_words import FunctionWords, function_words
from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS

N_CANDIDATES = 3


# ------------------------------------------------------------------------------------------------
# one computation for every surface


def audit_explainer(attacker, registry: "Registry", config: "AuditConfig") -> Explainer | None:
    """The attacker's explainer of the audit's knowledge level, with the declared configuration's placeholders
    (``None`` when the attacker does not explain its matches)."""
    explainer = attacker.explainer(registry, config.knowledge)
    if explainer is None:
        return None
    placeholders = tuple(getattr(config, "placeholders", DEFAULT_PLACEHOLDERS))
    if dataclasses.is_dataclass(explainer) and "placeholders" in {f.name for f in dataclasses.fields(explainer)}:
        return dataclasses.replace(explainer, placeholders=placeholders)
    if tuple(explainer.placeholders) == placeholders:
        return explainer
    explainer = copy.copy(explainer)  # a plugin's explainer that is not a dataclass
    object.__setattr__(explainer, "placeholders", placeholders)
    return explainer


def panel_explainers(members: Sequence[tuple["AuditConfig", object]], registry: "Registry") -> list[Explainer | None]:
    """Each panel member's explainer (``members``: each one's declared configuration and attacker, in order), as the
    panel's worklists and its redaction search read them. A member that explains by leaving each sentence out
    (:class:`~cpa_core.attack.explainers.LeaveOneOutExplainer`, dense retrieval) encodes every sentence of every
    flagged text again, dozens of times the cost of its attack: its explainer is given only when no member explains
    by words (``None`` otherwise: the words the other members weigh are the evidence to act on, and its risk is still
    checked at every redaction step)."""
    from cpa_core.attack.explainers import LeaveOneOutExplainer

    explainers = [audit_explainer(attacker, registry, config) for config, attacker in members]
    if any(explainer is not None and not isinstance(explainer, LeaveOneOutExplainer) for explainer in explainers):
        return [None if isinstance(explainer, LeaveOneOutExplainer) else explainer for explainer in explainers]
    return explainers


def evidence_rows(split: "ScoredSplit", row: int, n_candidates: int = N_CANDIDATES) -> list[int]:
    """The registry rows a document's evidence is about: its top ``n_candidates`` (never padding)."""
    table = split.table
    pool = min(n_candidates, int(table.pool_sizes[row]))
    return [int(r) for r in table.candidates[row, :pool] if r >= 0]


def document_query(split: "ScoredSplit", row: int) -> tuple[str, tuple[str, ...]] | None:
    """A document's released text and the clues its query carried (``None`` without a stored query, or when the
    query is not its text and clues)."""
    table = split.table
    if not table.queries:
        return None
    query = table.queries[row]
    clues = tuple(table.clues[row]) if table.clues is not None else ()
    text = released_text(query, clues)
    return None if text is None else (text, clues)


def document_evidence(split: "ScoredSplit", row: int, explainer: Explainer | None,
                      n_candidates: int = N_CANDIDATES, n_terms: int = N_TERMS) -> list[Span]:
    """The spans of a document's released text that drive its match to its top candidates (none without an
    explainer or a stored query), offsets into the released text."""
    return documents_evidence(split, [row], explainer, n_candidates, n_terms)[0]


def documents_evidence(split: "ScoredSplit", rows: Sequence[int], explainer: Explainer | None,
                       n_candidates: int = N_CANDIDATES, n_terms: int = N_TERMS) -> list[list[Span]]:
    """:func:`document_evidence` of many documents, explained in one batch (:meth:`Explainer.spans_batch`)."""
    out: list[list[Span]] = [[] for _ in rows]
    if explainer is None:
        return out
    found = [(i, document_query(split, row)) for i, row in enumerate(rows)]
    found = [(i, query) for i, query in found if query is not None]
    if not found:
        return out
    explained = explainer.evidence_batch([text for _, (text, _) in found],
                                         [evidence_rows(split, rows[i], n_candidates) for i, _ in found],
                                         [clues for _, (_, clues) in found])
    common = release_function_words(split)
    for (i, (text, _)), spans in zip(found, explained):
        never = common.of(text)
        out[i] = heaviest_terms([span for span in spans if fold(span.term) not in never], n_terms)
    return out


def release_function_words(split: "ScoredSplit") -> FunctionWords:
    """The function words of the documents of ``split`` (:func:`~cpa_core.attack.function_words.function_words` at
    its default share, as the redaction search reads them by default): never evidence."""
    queries = (document_query(split, row) for row in range(len(split.table.doc_ids)))
    return function_words([query[0] for query in queries if query is not None])


def document_inferred_clues(split: "ScoredSplit", row: int, explainer: Explainer | None = None) -> list[str]:
    """The clues of a document's query that its released text does not write (none in the ``direct`` mode)."""
    found = document_query(split, row)
    if found is None or not found[1]:
        return []
    placeholders = explainer.placeholders if explainer is not None else DEFAULT_PLACEHOLDERS
    return inferred_clues(*found, placeholders)


def driving_terms(spans: Sequence[Span]) -> list[str]:
    """The distinct texts of the spans, heaviest first, as the released text writes them."""
    seen: dict[str, float] = {}
    for span in sorted(spans, key=lambda s: (-s.weight, s.start)):
        seen.setdefault(span.text, span.weight)
    return list(seen)


EXCERPT_CONTEXT = 30
"""Characters of released text an excerpt shows on each side of an evidence span."""
EXCERPT_SPANS = 3
"""Evidence spans a document's excerpt shows at most (the first the worklist lists: the heaviest terms)."""


def evidence_excerpt(text: str, spans: Sequence[dict], context: int = EXCERPT_CONTEXT,
                     most: int = EXCERPT_SPANS) -> str:
    """A short excerpt of a released text around its evidence, for a reader on paper: for each of its first ``most``
    spans (worklist form: ``offset`` and ``length`` in the released text) ``context`` characters either side, the
    span itself between « and », the windows of nearby spans merged and the gaps shown as … (empty without spans)."""
    windows: list[list[int]] = []
    for span in sorted(spans[:most], key=lambda s: int(s["offset"])):
        start, end = int(span["offset"]), int(span["offset"]) + int(span["length"])
        low, high = max(0, start - context), min(len(text), end + context)
        if windows and low <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], high)
            windows[-1][2].append((start, end))
        else:
            windows.append([low, high, [(start, end)]])
    parts = []
    for low, high, marked in windows:
        out, at = [], low
        for start, end in marked:
            if start < at:  # a span inside one already marked
                continue
            out += [text[at:start], "«", text[start:end], "»"]
            at = end
        out.append(text[at:high])
        parts.append(("…" if low > 0 else "") + " ".join("".join(out).split()) + ("…" if high < len(text) else ""))
    return " ".join(parts)
