"""Evidence: the character spans of a released text that drive its match to its top candidates.

An attacker that can explain its matches gives, for a query and some candidate rows, a weight per term
(for TF-IDF, the term's contribution to the cosine with those candidates). :func:`term_spans` finds every
occurrence of a weighted term in the *original* text, so a span's offsets, and its text, are those of the
release: "Gdańsk" is found for the term "gdansk", accents and case kept. Placeholders that an anonymiser
wrote (``PERSON_FIRSTNAME_1``, ``PRONOUN``, ``[REDACTED]``, ``<NAME>``, ``***``) are never evidence.

:func:`document_evidence` is the one computation every surface uses (the drill-down, the worklist, the
report): the same candidates (the document's top ``n_candidates``), the same terms (the ``n_terms``
heaviest), every occurrence of each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from .audit import ScoredSplit

DEFAULT_PLACEHOLDERS = (
    r"\b[A-Z]+(?:_[A-Z]+)*_\d+\b",   # TextWash and similar: PERSON_FIRSTNAME_1, LOCATION_2, DATE_1
    r"\bPRONOUN\b",
    r"\[[^\]\n]{1,40}\]",             # [REDACTED], [NAME], [** Date **]
    r"<[A-Za-z_ -]{1,40}>",           # <PERSON>, <redacted>
    r"\*{2,}|#{3,}|X{3,}",            # masked runs
)
"""Regular expressions of anonymiser placeholders (the text they match is never evidence)."""
N_CANDIDATES = 3
N_TERMS = 5


@dataclass(frozen=True)
class Span:
    """One occurrence of a driving term: ``text[start:end]`` of the released text, its term and weight."""

    start: int
    end: int
    text: str
    term: str
    weight: float

    def to_dict(self) -> dict:
        """A machine-readable span: ``offset`` and ``length`` in characters of the released text."""
        return {"offset": self.start, "length": self.end - self.start, "text": self.text, "term": self.term,
                "weight": round(float(self.weight), 6)}


TermWeights = Callable[[str, Sequence[int]], Mapping[str, float]]
"""A term attacker's explanation: for a query and candidate rows, the weight of each term that drives the match."""


class Explainer:
    """What an attacker says about its matches: :meth:`evidence` gives every span of a query that drives its match
    to some candidate rows, each with a weight and a ``term`` naming the piece of evidence it belongs to (a word
    for TF-IDF, a sentence for dense retrieval, a clue for LLM clues; spans of one term go together).
    Spans are offsets into the query and never overlap a placeholder."""

    placeholders: tuple[str, ...] = DEFAULT_PLACEHOLDERS

    def evidence(self, query: str, candidate_rows: Sequence[int]) -> list[Span]:
        """Every weighted span of the query, in text order."""
        raise NotImplementedError

    def spans(self, query: str, candidate_rows: Sequence[int], n_terms: int = N_TERMS) -> list[Span]:
        """Every span, in text order, of the ``n_terms`` heaviest terms of the match."""
        return heaviest_terms(self.evidence(query, candidate_rows), n_terms)


@dataclass(frozen=True)
class TermExplainer(Explainer):
    """Evidence as words: ``weights`` explains the match term by term, ``normalize`` turns a token of the text
    into the attacker's term, ``token_pattern`` finds the tokens."""

    weights: TermWeights
    normalize: Callable[[str], str]
    token_pattern: str = r"(?u)\b\w\w+\b"
    placeholders: tuple[str, ...] = DEFAULT_PLACEHOLDERS

    def evidence(self, query: str, candidate_rows: Sequence[int]) -> list[Span]:
        return term_spans(query, self.weights(query, candidate_rows), self.normalize, self.token_pattern,
                          self.placeholders)


def heaviest_terms(spans: Sequence[Span], n_terms: int) -> list[Span]:
    """The spans of the ``n_terms`` heaviest terms (a term weighs what its heaviest span does), in text order."""
    heaviest: dict[str, float] = {}
    for span in sorted(spans, key=lambda s: (-s.weight, s.term)):
        if span.term not in heaviest and len(heaviest) < n_terms:
            heaviest[span.term] = span.weight
    return [span for span in spans if span.term in heaviest]


def placeholder_regions(text: str, placeholders: Iterable[str] = DEFAULT_PLACEHOLDERS) -> list[tuple[int, int]]:
    """The ``(start, end)`` character ranges of the text that are anonymiser placeholders."""
    return sorted((m.start(), m.end()) for pattern in placeholders for m in re.finditer(pattern, text))


def term_spans(text: str, weights: Mapping[str, float], normalize: Callable[[str], str],
               token_pattern: str = r"(?u)\b\w\w+\b", placeholders: Iterable[str] = DEFAULT_PLACEHOLDERS
               ) -> list[Span]:
    """The tokens of ``text`` whose normalised form has a positive weight, outside placeholders, in text order."""
    regions = placeholder_regions(text, placeholders)
    out = []
    for match in re.finditer(token_pattern, text):
        start, end = match.span()
        if any(a < end and start < b for a, b in regions):
            continue
        term = normalize(match.group(0))
        weight = weights.get(term, 0.0)
        if weight > 0:
            out.append(Span(start, end, match.group(0), term, float(weight)))
    return out


def evidence_rows(split: "ScoredSplit", row: int, n_candidates: int = N_CANDIDATES) -> list[int]:
    """The registry rows a document's evidence is about: its top ``n_candidates`` (never padding)."""
    table = split.table
    pool = min(n_candidates, int(table.pool_sizes[row]))
    return [int(r) for r in table.candidates[row, :pool] if r >= 0]


def document_evidence(split: "ScoredSplit", row: int, explainer: Explainer | None) -> list[Span]:
    """The spans of a document's query that drive its match to its top candidates (none without an explainer
    or a stored query)."""
    queries = split.table.queries
    if explainer is None or not queries:
        return []
    return explainer.spans(queries[row], evidence_rows(split, row))


def driving_terms(spans: Sequence[Span]) -> list[str]:
    """The distinct texts of the spans, heaviest first, as the released text writes them."""
    seen: dict[str, float] = {}
    for span in sorted(spans, key=lambda s: (-s.weight, s.start)):
        seen.setdefault(span.text, span.weight)
    return list(seen)
