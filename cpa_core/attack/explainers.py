"""Evidence: the character spans of a released text that drive its match to its top candidates.

An attacker that can explain its matches (:meth:`~cpa_core.attack.base.Attacker.explainer`) gives an
:class:`Explainer`: for a released text and some candidate rows, every span of the text that weighs in the
match, each with a ``term`` naming the piece of evidence it belongs to (the spans of one term are redacted
together) and a weight. Every span is an offset into the *released* text: ``text[start:end] == span.text``,
accents and case kept. Placeholders that an anonymiser wrote (``PERSON_FIRSTNAME_1``, ``PRONOUN``,
``[REDACTED]``, ``<NAME>``, ``***``; the list is the declared configuration's ``[evidence] placeholders``)
are never evidence.

Words (TF-IDF, :class:`TermExplainer`)
    A term's weight is its contribution to the cosine of the query with the candidates (summed over them);
    :func:`term_spans` finds every occurrence of a weighted term in the text: "Gdańsk" for the term "gdansk".

Sentences (dense retrieval, :class:`LeaveOneOutExplainer`)
    An embedding has no per-word contributions, so each sentence is left out in turn. The text is cut into
    sentences (a run of characters ending with ``.``, ``!``, ``?`` or ``…`` before a space, or at a line
    break); a sentence's evidence is its pieces between placeholders (trimmed; pieces without a letter or
    digit are none), all under one term, ``sentence: <its pieces joined by …>`` (identical sentences share
    it). Its weight is the drop of the query's *summed* similarity to the candidates when every piece of
    that term is deleted from the query (placeholders stay, as they would after a redaction); terms whose
    removal does not lower the similarity are no evidence. The full query and every leave-one-out variant
    go to the similarity function in one call (one encoder batch, cached like the attack's embeddings):
    ``1 + sentences (+ clues)`` texts per document, no gradient, no sampling, and the weight is exactly the
    change of the quantity the attack ranks by. Sentences are explained one at a time: two sentences that
    each repeat what the other says may each weigh little (removing both would weigh more).

Clues (``direct_plus_clues`` levels)
    The query is the released text followed by an LLM's clues (:func:`clue_query`, the query the attack used:
    its strings, hence LLM cache keys and results, are those of the attack). Evidence is still offsets into
    the released text: the evidence of the text's words or sentences *in that query*, plus, for each clue,
    its occurrences in the text (case, accents and spacing aside; whole words) under the term ``clue: <clue>``,
    weighted by the drop of the summed similarity when the clue is left out of the query (without a similarity
    function, the summed weights of its words). The drop may be negative, e.g. for a clue that singles out the
    top candidate at the others' expense: such a clue is no evidence (its words may still be). A clue span lies
    inside a word or sentence span of the text; both are listed. A clue the LLM inferred and the text does not
    write has no span: :func:`inferred_clues` lists it (the worklist's ``inferred_clues``).

What every surface shows of a document (the drill-down, the worklist, the report) is computed once from these
explainers by :mod:`cpa_core.report.evidence`.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS, placeholder_regions

N_TERMS = 5
SENTENCE_PATTERN = r"\S(?:[^\n]*?[.!?…]+[\"'”’)\]]*(?=\s|$)|[^\n]*)"
"""A sentence: from a non-space character to ``.``, ``!``, ``?`` or ``…`` (and closing quotes or brackets)
before a space, or to the end of the line."""


SENTENCE_TERM = "sentence: "
CLUE_TERM = "clue: "
GAP = " … "  # joins the pieces of a sentence cut by placeholders, in its term


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


TermWeightsBatch = Callable[[Sequence[str], Sequence[Sequence[int]]], list[Mapping[str, float]]]
"""The same for many queries at once, with the same results: one mapping per query and its candidate rows."""


Similarity = Callable[[Sequence[str], Sequence[int]], np.ndarray]
"""An attacker's similarity: for some query texts and candidate rows, each text's similarity to the candidates'
profiles, summed over them (one number per text)."""


class Explainer:
    """What an attacker says about its matches: :meth:`evidence` gives every span of a released text that drives
    its match to some candidate rows, each with a weight and a ``term`` naming the piece of evidence it belongs
    to (a word for TF-IDF, a sentence for dense retrieval, a clue for LLM clues; spans of one term go together).
    Spans are offsets into the released text and never overlap a placeholder.

    Subclasses are frozen dataclasses with a ``placeholders`` field, so that :func:`audit_explainer` can give
    them the declared list with :func:`dataclasses.replace`."""

    placeholders: tuple[str, ...] = DEFAULT_PLACEHOLDERS

    def evidence(self, text: str, candidate_rows: Sequence[int], clues: Sequence[str] = ()) -> list[Span]:
        """Every weighted span of ``text``, in text order; ``clues``: the LLM clues its query carried
        (the query is :func:`clue_query` of both)."""
        raise NotImplementedError

    def evidence_batch(self, texts: Sequence[str], candidate_rows: Sequence[Sequence[int]],
                       clues: Sequence[Sequence[str]]) -> list[list[Span]]:
        """:meth:`evidence` of many texts (each with its candidate rows and clues); subclasses that can explain
        many matches in one computation override it with the same results."""
        return [self.evidence(text, rows, text_clues) for text, rows, text_clues in zip(texts, candidate_rows, clues)]

    def spans(self, text: str, candidate_rows: Sequence[int], n_terms: int = N_TERMS,
              clues: Sequence[str] = ()) -> list[Span]:
        """Every span, in text order, of the ``n_terms`` heaviest terms of the match."""
        return self.spans_batch([text], [candidate_rows], n_terms, [clues])[0]

    def spans_batch(self, texts: Sequence[str], candidate_rows: Sequence[Sequence[int]], n_terms: int = N_TERMS,
                    clues: Sequence[Sequence[str]] | None = None) -> list[list[Span]]:
        """:meth:`spans` of many texts, through :meth:`evidence_batch`."""
        clues = [()] * len(texts) if clues is None else clues
        return [heaviest_terms(found, n_terms) for found in self.evidence_batch(texts, candidate_rows, clues)]


@dataclass(frozen=True)
class PanelExplainer(Explainer):
    """The evidence of an attacker panel: every member that explains its matches (``members[i]``, ``None`` for one
    that does not), each about its own candidates and clues (``candidate_rows`` and ``clues`` of a text are each
    member's, in the panel's order).

    The members' weights are on scales of their own (a cosine's share, a drop of summed similarity), so each
    member's weights of a text are divided by its heaviest term's there: every member's heaviest term weighs 1. A
    term several members give (the same word) is one term, its spans merged (one span per range of the text), and
    weighs what its heaviest member gives it."""

    members: tuple[Explainer | None, ...] = ()

    def evidence(self, text: str, candidate_rows: Sequence[Sequence[int]], clues: Sequence[Sequence[str]] = ()
                 ) -> list[Span]:
        return self.evidence_batch([text], [candidate_rows], [clues])[0]

    def evidence_batch(self, texts, candidate_rows, clues) -> list[list[Span]]:
        merged: list[dict[tuple[str, int, int], Span]] = [{} for _ in texts]
        for i, explainer in enumerate(self.members):
            if explainer is None:
                continue
            rows = [member_rows[i] for member_rows in candidate_rows]
            member_clues = [text_clues[i] if len(text_clues) > i else () for text_clues in clues]
            for found, spans in zip(merged, explainer.evidence_batch(texts, rows, member_clues)):
                heaviest = max((span.weight for span in spans), default=0.0)
                if heaviest <= 0:
                    continue
                for span in spans:
                    key = (span.term, span.start, span.end)
                    weight = span.weight / heaviest
                    if key not in found or found[key].weight < weight:
                        found[key] = Span(span.start, span.end, span.text, span.term, weight)
        return [sorted(found.values(), key=lambda s: (s.start, s.end, s.term)) for found in merged]


class _Regions:
    """Ranges of a text (sorted by start, possibly overlapping), asked many times whether a range meets one:
    a bisection on the starts and the furthest end of the ranges that start before."""

    def __init__(self, regions: Sequence[tuple[int, int]]):
        self.starts = [a for a, _ in regions]
        self.reach = list(itertools.accumulate((b for _, b in regions), max))

    def overlap(self, start: int, end: int) -> bool:
        before = bisect.bisect_left(self.starts, end)  # the ranges that start before ``end``
        return before > 0 and self.reach[before - 1] > start


# ------------------------------------------------------------------------------------------------
# words


def heaviest_terms(spans: Sequence[Span], n_terms: int) -> list[Span]:
    """The spans of the ``n_terms`` heaviest terms (a term weighs what its heaviest span does), in text order."""
    heaviest: dict[str, float] = {}
    for span in sorted(spans, key=lambda s: (-s.weight, s.term)):
        if span.term not in heaviest and len(heaviest) < n_terms:
            heaviest[span.term] = span.weight
    return [span for span in spans if span.term in heaviest]


def term_spans(text: str, weights: Mapping[str, float], normalize: Callable[[str], str],
               token_pattern: str = r"(?u)\b\w\w+\b", placeholders: Iterable[str] = DEFAULT_PLACEHOLDERS
               ) -> list[Span]:
    """The tokens of ``text`` whose normalised form has a positive weight, outside placeholders, in text order."""
    covered = _Regions(placeholder_regions(text, placeholders))
    out = []
    terms: dict[str, str] = {}  # each distinct token normalised once
    for match in re.finditer(token_pattern, text):
        start, end = match.span()
        if covered.overlap(start, end):
            continue
        token = match.group(0)
        term = terms.get(token)
        if term is None:
            term = terms[token] = normalize(token)
        weight = weights.get(term, 0.0)
        if weight > 0:
            out.append(Span(start, end, token, term, float(weight)))
    return out


@dataclass(frozen=True)
class TermExplainer(Explainer):
    """Evidence as words: ``weights`` explains the match term by term, ``normalize`` turns a token of the text
    into the attacker's term, ``token_pattern`` finds the tokens; ``similarity`` (optional) weighs the clues of
    a ``direct_plus_clues`` query by leaving each out; ``batch_weights`` (optional) explains many queries in one
    computation, with the results of ``weights``."""

    weights: TermWeights
    normalize: Callable[[str], str]
    token_pattern: str = r"(?u)\b\w\w+\b"
    placeholders: tuple[str, ...] = DEFAULT_PLACEHOLDERS
    similarity: Similarity | None = None
    batch_weights: TermWeightsBatch | None = None

    def evidence(self, text: str, candidate_rows: Sequence[int], clues: Sequence[str] = ()) -> list[Span]:
        return self.evidence_batch([text], [candidate_rows], [clues])[0]

    def evidence_batch(self, texts, candidate_rows, clues) -> list[list[Span]]:
        """Every text's term weights (in one call of :attr:`batch_weights` when given), then its spans."""
        queries = [clue_query(text, text_clues) for text, text_clues in zip(texts, clues)]
        rows = [list(r) for r in candidate_rows]
        all_weights = (self.batch_weights(queries, rows) if self.batch_weights is not None
                       else [self.weights(query, r) for query, r in zip(queries, rows)])
        return [self._spans(text, weights, rows, tuple(text_clues))
                for text, weights, rows, text_clues in zip(texts, all_weights, candidate_rows, clues)]

    def _spans(self, text: str, weights: Mapping[str, float], candidate_rows: Sequence[int],
               clues: Sequence[str]) -> list[Span]:
        spans = term_spans(text, weights, self.normalize, self.token_pattern, self.placeholders)
        if not clues:
            return spans
        occurrences = clue_occurrences(text, clues, self.placeholders)
        if self.similarity is not None:
            drops = leave_one_out(self.similarity, [clue_query(text, clues)]
                                  + [clue_query(text, without(clues, clue)) for clue in occurrences],
                                  candidate_rows)
            clue_weights = dict(zip(occurrences, drops))
        else:  # the weights of the clue's words in the query
            clue_weights = {clue: sum(weights.get(term, 0.0) for term in
                                      {self.normalize(t) for t in re.findall(self.token_pattern, clue)})
                            for clue in occurrences}
        return _in_text_order(spans + clue_spans(text, occurrences, clue_weights))


# ------------------------------------------------------------------------------------------------
# sentences, left out one at a time


def sentence_units(text: str, placeholders: Iterable[str] = DEFAULT_PLACEHOLDERS
                   ) -> dict[str, list[tuple[int, int]]]:
    """Each sentence's term and the ``(start, end)`` of its pieces between placeholders (trimmed, with a letter
    or a digit), in text order; identical sentences share a term (and their pieces)."""
    regions = placeholder_regions(text, placeholders)
    units: dict[str, list[tuple[int, int]]] = {}
    for sentence in re.finditer(SENTENCE_PATTERN, text):
        start, end = sentence.span()
        cuts = [(max(a, start), min(b, end)) for a, b in regions if a < end and start < b]
        pieces, position = [], start
        for a, b in cuts + [(end, end)]:
            if a > position:
                piece = text[position:a]
                left = len(piece) - len(piece.lstrip())
                right = len(piece.rstrip())
                if right > left and re.search(r"\w", piece[left:right]):
                    pieces.append((position + left, position + right))
            position = max(position, b)
        if pieces:
            term = SENTENCE_TERM + GAP.join(" ".join(text[a:b].split()) for a, b in pieces)
            units.setdefault(term, []).extend(pieces)
    return units


def delete_pieces(text: str, pieces: Iterable[tuple[int, int]]) -> str:
    """The text without these (non-overlapping) character ranges."""
    out, position = [], 0
    for a, b in sorted(pieces):
        out.append(text[position:a])
        position = b
    out.append(text[position:])
    return "".join(out)


def leave_one_out(similarity: Similarity, variants: Sequence[str], candidate_rows: Sequence[int]) -> list[float]:
    """The drop of the summed similarity from ``variants[0]`` (the query) to each other variant (one call), or 0
    where it does not drop."""
    if len(variants) < 2:
        return []
    values = np.asarray(similarity(list(variants), list(candidate_rows)), dtype=np.float64).reshape(-1)
    if values.shape != (len(variants),):
        raise ValueError(f"the similarity function returned {values.size} values for {len(variants)} texts")
    return [float(max(values[0] - value, 0.0)) for value in values[1:]]


@dataclass(frozen=True)
class LeaveOneOutExplainer(Explainer):
    """Evidence as sentences: each sentence's weight is the drop of the query's summed similarity to the
    candidates (``similarity``) when it is left out; see the module's docstring."""

    similarity: Similarity
    placeholders: tuple[str, ...] = DEFAULT_PLACEHOLDERS

    def evidence(self, text: str, candidate_rows: Sequence[int], clues: Sequence[str] = ()) -> list[Span]:
        rows = list(candidate_rows)
        units = sentence_units(text, self.placeholders)
        occurrences = clue_occurrences(text, clues, self.placeholders) if clues else {}
        if not rows or not (units or occurrences):
            return []
        variants = [clue_query(text, clues)]
        variants += [clue_query(delete_pieces(text, pieces), clues) for pieces in units.values()]
        variants += [clue_query(text, without(clues, clue)) for clue in occurrences]
        drops = leave_one_out(self.similarity, variants, rows)
        spans = [Span(a, b, text[a:b], term, weight) for (term, pieces), weight in zip(units.items(), drops)
                 if weight > 0 for a, b in pieces]
        return _in_text_order(spans + clue_spans(text, occurrences, dict(zip(occurrences, drops[len(units):]))))


# ------------------------------------------------------------------------------------------------
# LLM clues


def clue_query(text: str, clues: Sequence[str]) -> str:
    """The retrieval query of a released text and its clues (``direct_plus_clues``): the text, then the clues
    on a line of their own joined by ``; `` (the text alone without clues)."""
    return text + ("\n" + "; ".join(clues) if clues else "")


def released_text(query: str, clues: Sequence[str]) -> str | None:
    """The released text of a query built by :func:`clue_query` from it and ``clues`` (``None``: it was not)."""
    suffix = clue_query("", clues)
    return query[:len(query) - len(suffix)] if query.endswith(suffix) else None


def without(clues: Sequence[str], clue: str) -> list[str]:
    """The clues without ``clue`` (every copy of it, as :func:`fold` sees them)."""
    key = _clue_key(clue)
    return [c for c in clues if _clue_key(c) != key]


def fold(text: str) -> str:
    """Case and accents aside: NFKD of the case-folded text without its combining marks."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c))


def _clue_key(clue: str) -> str:
    return " ".join(fold(clue).split())


def _folded(text: str) -> tuple[str, list[int]]:
    """The folded text and, for each of its characters, the index of the character of ``text`` it comes from."""
    out, origin = [], []
    for i, char in enumerate(text):
        piece = fold(char)
        out.append(piece)
        origin.extend([i] * len(piece))
    return "".join(out), origin


def _is_word(char: str) -> bool:
    """A character of a word: a letter, a digit, ``_``, or an accent stored apart from its letter (NFD)."""
    return char.isalnum() or char == "_" or bool(unicodedata.combining(char))


def find_clue(text: str, clue: str, regions: Sequence[tuple[int, int]] = (),
              folded: tuple[str, list[int]] | None = None) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each occurrence of ``clue`` in ``text``: case and accents aside (fold), any run
    of spaces for a space, whole words only, outside ``regions`` (placeholders). ``folded``: the text's
    :func:`_folded` form, when it is at hand."""
    words = fold(clue).split()
    if not words:
        return []
    flat, origin = folded if folded is not None else _folded(text)
    covered = _Regions(sorted(regions))
    found = []
    for match in re.finditer(r"\s+".join(map(re.escape, words)), flat):
        a, b = match.span()
        if (a > 0 and origin[a - 1] == origin[a]) or (b < len(flat) and origin[b] == origin[b - 1]):
            continue  # a part of one character (the "s" of "ß", folded to "ss")
        start, end = origin[a], origin[b - 1] + 1
        while end < len(text) and not fold(text[end]):  # the combining marks of its last character
            end += 1
        if (_is_word(flat[a]) and start > 0 and _is_word(text[start - 1])) or \
                (_is_word(flat[b - 1]) and end < len(text) and _is_word(text[end])):
            continue  # inside a word
        if not covered.overlap(start, end):
            found.append((start, end))
    return found


def clue_occurrences(text: str, clues: Sequence[str], placeholders: Iterable[str] = DEFAULT_PLACEHOLDERS
                     ) -> dict[str, list[tuple[int, int]]]:
    """Each distinct clue (its first spelling) that the released text writes, with its occurrences."""
    regions = placeholder_regions(text, placeholders)
    folded = _folded(text)
    out: dict[str, list[tuple[int, int]]] = {}
    seen = set()
    for clue in clues:
        key = _clue_key(clue)
        if key in seen:
            continue
        seen.add(key)
        where = find_clue(text, clue, regions, folded)
        if where:
            out[clue] = where
    return out


def clue_spans(text: str, occurrences: Mapping[str, list[tuple[int, int]]], weights: Mapping[str, float]
               ) -> list[Span]:
    """The occurrences of the clues with a positive weight, as spans of the term ``clue: <clue>``."""
    return [Span(a, b, text[a:b], CLUE_TERM + " ".join(clue.split()), float(weights[clue]))
            for clue, where in occurrences.items() if weights.get(clue, 0.0) > 0 for a, b in where]


def inferred_clues(text: str, clues: Sequence[str], placeholders: Iterable[str] = DEFAULT_PLACEHOLDERS) -> list[str]:
    """The clues the released text does not write (outside placeholders): what the LLM inferred, which no span
    can show (distinct, in the LLM's order)."""
    written = {_clue_key(c) for c in clue_occurrences(text, clues, placeholders)}
    out, seen = [], set()
    for clue in clues:
        key = _clue_key(clue)
        if key and key not in written and key not in seen:
            seen.add(key)
            out.append(clue)
    return out


def _in_text_order(spans: list[Span]) -> list[Span]:
    return sorted(spans, key=lambda s: (s.start, s.end, s.term))
