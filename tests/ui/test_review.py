"""The review of a release's redactions (``cpa_ui/redaction.py``): the curator's decisions over the rows a search
proposes, the deny and allow lists applied to the rows at once, decisions kept across searches, the edits of a
withheld document folded and not counted, and the pages of the review table."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from cpa_core.audit.rescoring import Risk
from cpa_core.redaction.decisions import accepted, decisions_table, row_keys, withheld_edits, word_rows
from cpa_core.redaction.suggestions import Edit, Suggestion
from cpa_ui.redaction import (
    ALWAYS,
    BY_YOU,
    NEVER,
    PAGE_ROWS,
    VIEWS,
    review_counts,
    review_page,
    review_positions,
    with_bulk,
    with_curator_text,
    with_lists,
    with_search,
    with_ticks,
    without_decisions,
)

TEXTS = {"a": "Ann from Leeds plays bingo at urlLink daily.", "b": "Bob from Leeds drives a bus to urlLink.",
         "c": "Cleo sings."}
RUN = SimpleNamespace(key="data:run")


def search(replacement: str = "[X]") -> list[Suggestion]:
    """Two flagged documents: ``a`` made acceptable by three edits, ``b`` to withhold after two."""
    def edit(doc, word, term):
        start = TEXTS[doc].index(word)
        return Edit(start, len(word), word, replacement, term)
    a = Suggestion("a", Risk(2, 0.5, 0.6), Risk(12, 0.05, 0.1),
                   (edit("a", "Leeds", "leeds"), edit("a", "bingo", "bingo"), edit("a", "urlLink", "urllink")), 11)
    b = Suggestion("b", Risk(1, 0.7, 0.8), Risk(3, 0.4, 0.5), (edit("b", "Leeds", "leeds"), edit("b", "bus", "bus")),
                   11, action="withhold", reason="too risky")
    return [a, b]


def searched(previous=None, replacement: str = "[X]"):
    found = search(replacement)
    return with_search(("ask", replacement), RUN, SimpleNamespace(), found, len(found), decisions_table(found),
                       previous)


def test_a_row_is_named_by_its_document_and_the_text_it_redacts_across_searches():
    first, second = decisions_table(search("[X]")), decisions_table(search("[CITY]"))
    assert row_keys(first) == row_keys(second)  # another replacement, the same rows
    assert row_keys(first)[-1] == ("b", "withhold", None, None)
    assert row_keys(first)[0] == ("a", "edit", TEXTS["a"].index("Leeds"), 5)


def test_a_word_of_a_list_names_the_edits_of_its_term_or_of_text_that_holds_it_whole():
    table = decisions_table(search())
    rows = word_rows(table, ["LEEDS", "url", " ", "Bingo"])
    assert set(rows) == {"LEEDS", "url", "Bingo"}  # an empty word names nothing
    assert table.loc[rows["LEEDS"], "doc_id"].tolist() == ["a", "b"]
    assert not rows["url"].any()  # a part of a word is not the word
    assert table.loc[rows["Bingo"], "original"].tolist() == ["bingo"]
    assert not (rows["LEEDS"] & (table["action"] == "withhold").to_numpy()).any()


def test_the_edits_of_a_withheld_document_are_folded_and_not_counted():
    review = searched()
    table = review.table
    assert withheld_edits(table).tolist() == [False, False, False, True, True, False]
    counts = review_counts(review)
    assert counts == {"withheld": 1, "edits_accepted": 3, "edits": 3, "folded": 2, "edited": 1}
    edits, withheld = accepted(table)
    assert set(edits) == {"a"} and withheld == {"b"}  # nor are they in the release
    assert review_positions(review, VIEWS[0]).tolist() == [0, 1, 2, 5]
    assert review_positions(review, VIEWS[4]).tolist() == [3, 4]
    page = review_page(review, review_positions(review, VIEWS[0]))
    assert page["folded_edits"].tolist()[-1] == 2 and pd.isna(page["folded_edits"].tolist()[0])
    # released, the document's edits unfold and count
    review = with_ticks(review, [5], [False])
    assert review_counts(review)["edits_accepted"] == 5
    assert review_positions(review, VIEWS[0]).tolist() == list(range(6))


def test_a_tick_is_a_decision_that_a_new_search_keeps_and_a_reset_takes_back():
    review = with_ticks(searched(), [1], [False])  # the curator rejects "bingo"
    assert review.table["accept"].tolist() == [True, False, True, True, True, True]
    assert review.decided == {("a", "edit", TEXTS["a"].index("bingo"), 5): (False, BY_YOU)}
    assert review.version == 0  # a tick does not draw the table anew
    again = searched(review, "[REDACTED]")  # another search: other replacements, the same rows
    assert again.table["accept"].tolist() == [True, False, True, True, True, True]
    assert set(again.table["replacement"]) == {"[REDACTED]", ""}
    assert review_page(again, np.arange(2))["decided_by"].tolist() == ["search", BY_YOU]
    reset = without_decisions(again)
    assert reset.table["accept"].all() and reset.decided == {} and reset.version > again.version


def test_the_deny_list_rejects_its_rows_at_once_and_gives_them_back_when_the_word_is_taken_off():
    review = searched()
    review = with_ticks(review, [1], [False])
    denied = with_lists(review, ("urlLink",), ())
    assert denied.table["accept"].tolist() == [True, False, False, True, True, True]
    assert denied.decided[denied.keys[2]] == (False, NEVER + "urlLink") and denied.version == review.version + 1
    assert denied.suggestions == review.suggestions  # no new search
    assert with_lists(denied, ("urlLink",), ()) is denied  # the same lists: nothing to do
    ticked = with_ticks(denied, [2], [True])  # the curator may still accept one of its rows
    assert ticked.table["accept"].tolist()[2] and ticked.decided[ticked.keys[2]] == (True, BY_YOU)
    back = with_lists(denied, (), ())
    assert back.table["accept"].tolist() == [True, False, True, True, True, True]  # the tick on "bingo" stays
    # a word added to the allow list accepts its rows; a bulk rejection decides them again
    rejected = with_bulk(back, np.ones(6, dtype=bool), False)
    assert not rejected.table["accept"].any()
    allowed = with_lists(rejected, (), ("Leeds",))
    assert allowed.table["accept"].tolist() == [True, False, False, True, False, False]
    assert allowed.decided[allowed.keys[0]] == (True, ALWAYS + "Leeds")
    # the lists' decisions are kept by a new search too
    assert searched(allowed).table["accept"].tolist() == allowed.table["accept"].tolist()


def test_the_curator_s_own_text_keeps_every_decision():
    review = with_ticks(searched(), [1], [False])
    edited = TEXTS["c"].replace("Cleo", "[NAME]")
    written = with_curator_text(review, "c", TEXTS["c"], edited)
    assert written.table["accept"].tolist() == [True, False, True, True, True, True, True]
    assert written.table["source"].tolist()[-1] == "curator" and written.decided == review.decided
    assert searched(written).table["source"].tolist()[-1] == "curator"  # kept by a new search


def test_a_review_table_of_fifty_thousand_rows_is_shown_a_page_at_a_time():
    rows = [{"doc_id": f"d{i // 8}", "action": "edit", "offset": 10 * (i % 8), "length": 4, "original": "word",
             "replacement": "[X]", "term": f"t{i % 50}", "kind": "placeholder", "source": "suggested", "reason": "",
             "accept": True} for i in range(50_000)]
    review = with_search(("ask",), RUN, SimpleNamespace(), (), 0, decisions_table([], rows), None)
    positions = review_positions(review, VIEWS[0])
    assert len(positions) == 50_000
    page = review_page(review, positions[PAGE_ROWS:2 * PAGE_ROWS])
    assert len(page) == PAGE_ROWS and page["doc_id"].iloc[0] == f"d{PAGE_ROWS // 8}"
    term = review_positions(review, VIEWS[0], term="t7")
    assert len(term) == 1_000 and set(review.table["term"].iloc[term]) == {"t7"}
    review = with_ticks(review, term[:3], [False] * 3)
    assert review_counts(review)["edits_accepted"] == 49_997
    assert review_positions(review, VIEWS[3]).tolist() == term[:3].tolist()


def test_every_term_shown_as_evidence_can_be_chosen_in_the_review_table():
    from cpa_ui.redaction import evidence_terms

    review = searched()
    work = pd.DataFrame({"doc_id": ["a", "b", "c"], "driving_terms": [["Leeds", "Ann"], ["Bús"], []]})
    assert evidence_terms(review, work) == ["ann", "bingo", "bus", "leeds", "urllink"]
    assert review_positions(review, VIEWS[0], term="ann").tolist() == []  # evidence with no edit: no row


def test_a_search_s_lists_are_those_its_table_reflects_and_a_cleared_list_stays_cleared():
    found = search()
    ask = (RUN.key, "placeholder", 0.9, None, ("urlLink",), ("Ann",), 0.1, None)  # as the Redact page asks
    review = with_search(ask, RUN, SimpleNamespace(), found, len(found), decisions_table(found), None)
    assert review.lists == (("urlLink",), ("Ann",))
    cleared = with_lists(review, (), ())
    assert cleared.lists == ((), ()) and cleared.table["accept"].tolist() == review.table["accept"].tolist()


def test_each_row_is_one_line_of_text_with_a_checkbox_that_shows_it_as_decided():
    from cpa_ui.redaction import review_rows

    review = with_ticks(searched(), [1], [False])
    rows = review_rows(review, review_positions(review, VIEWS[0]))
    assert [(p, accept) for p, _, accept, _ in rows] == [(0, True), (1, False), (2, True), (5, True)]
    assert [key for _, key, _, _ in rows] == [f"redact.row.{place}" for place in range(4)]
    labels = [label for *_, label in rows]
    # hand-written: the document in bold, the words and what they become, the evidence term, |C| and linkage
    # before (-> after, when the search scored its term on its own), who decided a row not as proposed
    assert labels[0] == "**a** · «Leeds» → \\[X\\] · evidence\\: leeds · \\|C\\| 2, linkage 0.500 · suggested"
    assert labels[1].endswith(" · suggested · decided by you")
    assert labels[3] == ("**b** · withhold the document \\(2 edits folded\\) · \\|C\\| 1, linkage 0.700 · "
                         "too risky · suggested")
    # a bulk action: the same checkboxes, showing the rows as decided now
    bulk = review_rows(with_bulk(review, np.ones(6, dtype=bool), True), np.array([1, 3]))
    assert [(p, key, accept) for p, key, accept, _ in bulk] == [(1, "redact.row.0", True), (3, "redact.row.1", True)]


def test_a_row_s_line_shows_text_from_the_data_as_text():
    from cpa_ui.redaction import review_rows

    found = search()
    hostile = "![x](http://host/beacon.png) *b* <img src=x> :smile:"
    rows = [{"doc_id": "**d**", "action": "edit", "offset": 0, "length": 3, "original": hostile,
             "replacement": "", "term": "[t](u)", "kind": "placeholder", "source": "curator", "reason": "",
             "accept": True}]
    review = with_search(("ask",), RUN, SimpleNamespace(), found, len(found), decisions_table([], rows), None)
    (_, _, _, label), = review_rows(review, np.arange(1))
    assert label.startswith("**\\*\\*d\\*\\*** · «")
    assert "\\!\\[x\\]\\(http\\://host/beacon.png\\)" in label and "\\<img src=x\\>" in label
    assert "\\:smile\\:" in label and "→ \\(deleted\\)" in label
    assert label.endswith(" · evidence\\: \\[t\\]\\(u\\) · your own edit")
