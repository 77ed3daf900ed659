"""Evidence spans: offsets into the released text, accents and case kept, placeholders never evidence."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.attack.explainers import TermExplainer, term_spans
from cpa_core.attack.tfidf_index import TfidfIndex
from cpa_core.io.placeholders import DEFAULT_PLACEHOLDERS, placeholder_regions
from cpa_core.report.evidence import driving_terms


def fold(token: str) -> str:
    """Lower case, accents stripped: what the TF-IDF index makes of a token."""
    return "".join(c for c in unicodedata.normalize("NFKD", token.lower()) if not unicodedata.combining(c))


WORDS = st.sampled_from(["Gdańsk", "gdansk", "Zoë", "Müller", "Straße", "café", "bus", "driver", "Łódź", "2014",
                         "naïve", "東京", "PERSON_FIRSTNAME_1", "PRONOUN", "[REDACTED]", "<NAME>", "***"])
SEPARATORS = st.sampled_from([" ", ", ", ".\n", " – ", "; ", "\t", "  "])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(WORDS, SEPARATORS), min_size=1, max_size=30),
       st.dictionaries(st.sampled_from(["gdansk", "zoe", "muller", "strasse", "cafe", "bus", "lodz", "2014",
                                        "naive", "東京", "person_firstname_1", "pronoun", "redacted", "name"]),
                       st.floats(0.01, 5), max_size=8))
def test_every_span_is_the_released_text_at_its_offset(pieces, weights):
    text = "".join(word + separator for word, separator in pieces)
    spans = term_spans(text, weights, fold)
    regions = placeholder_regions(text)
    previous_end = 0
    for span in spans:
        assert text[span.start:span.end] == span.text  # round trip, non-ASCII included
        assert fold(span.text) == span.term and span.weight == weights[span.term] > 0
        assert span.start >= previous_end  # in text order, never overlapping
        previous_end = span.end
        assert not any(a < span.end and span.start < b for a, b in regions)  # placeholders are never evidence
        assert span.to_dict()["offset"] == span.start and span.to_dict()["length"] == len(span.text)


def test_accented_and_cased_forms_are_found_for_the_index_terms():
    index = TfidfIndex().fit(["lives in gdansk and drives a bus", "lives in leeds", "teacher in york"])
    text = "PERSON_FIRSTNAME_1 moved to Gdańsk in 2014; PRONOUN drives the BUS."
    spans = index.explainer().spans(text, [0])
    assert [(s.text, s.start) for s in spans] == [("Gdańsk", 28), ("drives", 52), ("BUS", 63)]
    assert "Gdańsk" in driving_terms(spans) and "gdansk" not in driving_terms(spans)


def test_anonymiser_placeholders_are_never_evidence():
    text = "PERSON_FIRSTNAME_1 met PRONOUN in LOCATION_2, [REDACTED] <NAME> ***, then golf"
    weights = {fold(w): 1.0 for w in ("PERSON_FIRSTNAME_1", "PRONOUN", "LOCATION_2", "REDACTED", "NAME", "golf")}
    assert [s.text for s in term_spans(text, weights, fold)] == ["golf"]
    # the list is configurable: without it, the words inside the placeholders count
    assert "REDACTED" in [s.text for s in term_spans(text, weights, fold, placeholders=())]
    assert len(DEFAULT_PLACEHOLDERS) >= 4


def test_only_the_heaviest_terms_are_kept_with_every_occurrence():
    explainer = TermExplainer(lambda query, rows: {"a1": 3.0, "b2": 2.0, "c3": 1.0}, str.lower)
    spans = explainer.spans("c3 A1 b2 a1 C3", [0], n_terms=2)
    assert [s.text for s in spans] == ["A1", "b2", "a1"]
    assert driving_terms(spans) == ["A1", "a1", "b2"]
