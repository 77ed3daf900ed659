"""The curator's decisions table: built from suggestions, accepted and rejected row by row, written and read
back, checked against the release, edits typed by the curator as rows, and the allow list's edits."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpa_core.audit.rescoring import Risk
from cpa_core.common.errors import DataError
from cpa_core.redaction.decisions import (
    accepted,
    allow_edits,
    allow_rows,
    curator_rows,
    decisions_csv,
    decisions_table,
    read_decisions,
    text_edits,
)
from cpa_core.redaction.replacements import Replacer
from cpa_core.redaction.suggestions import Edit, Step, Suggestion, apply_edits

TEXTS = {"a": "Ann, a nurse from Leeds, plays bingo twice a week.", "b": "Bob drove a bus in Leeds.",
         "c": "Nothing here at all."}


def suggestions():
    leeds = Edit(18, 5, "Leeds", "[CITY]", "leeds")
    bingo = Edit(31, 5, "bingo", "[REDACTED]", "bingo")
    safe = Suggestion("a", Risk(2, 0.5, 0.6), Risk(12, 0.05, 0.1), (leeds, bingo), 11,
                      steps=(Step("leeds", Risk(6, 0.2, 0.3)), Step("bingo", Risk(12, 0.05, 0.1))))
    stuck = Suggestion("b", Risk(1, 0.7, 0.8), Risk(3, 0.4, 0.5), (Edit(19, 5, "Leeds", "[CITY]", "leeds"),), 11,
                       action="withhold", reason="after redacting 1 terms, |C| = 3 < k = 11",
                       steps=(Step("leeds", Risk(3, 0.4, 0.5)),))
    return [safe, stuck]


def test_the_table_lists_every_edit_with_its_effect_and_a_row_to_withhold_what_no_edit_makes_safe():
    table = decisions_table(suggestions())
    assert table[["doc_id", "action", "original", "source", "set_size_after", "accept"]].values.tolist() == [
        ["a", "edit", "Leeds", "suggested", 6, True], ["a", "edit", "bingo", "suggested", 12, True],
        ["b", "edit", "Leeds", "suggested", 3, True], ["b", "withhold", "", "suggested", 3, True]]
    assert table.loc[3, "reason"].startswith("after redacting 1 terms") and table.loc[0, "linkage_after"] == 0.2
    edits, withheld = accepted(table)
    assert [e.original for e in edits["a"]] == ["Leeds", "bingo"] and withheld == {"b"}
    table.loc[1, "accept"] = False  # the curator rejects "bingo" and keeps document b
    table.loc[3, "accept"] = False
    edits, withheld = accepted(table)
    assert apply_edits(TEXTS["a"], edits["a"]) == "Ann, a nurse from [CITY], plays bingo twice a week."
    assert withheld == set()


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_table_written_and_read_back_gives_the_same_decisions(tmp_path, suffix):
    table = decisions_table(suggestions())
    table.loc[1, "accept"] = False
    path = tmp_path / f"decisions.{suffix}"
    if suffix == "csv":
        path.write_text(decisions_csv(table), encoding="utf-8")
    else:
        table.to_parquet(path, index=False)
    again = read_decisions(path, TEXTS)
    assert accepted(again) == accepted(table)
    assert again["accept"].tolist() == table["accept"].tolist()


@pytest.mark.parametrize("change, words", [
    (lambda f: f.assign(doc_id=["a", "zz", "b", "b"]), ["row 2", "column 'doc_id'", "not in the release", "'zz'"]),
    (lambda f: f.assign(accept=["true", "maybe", "true", "true"]), ["row 2", "column 'accept'", "'maybe'"]),
    (lambda f: f.assign(action=["edit", "blur", "edit", "withhold"]), ["row 2", "column 'action'", "unknown action"]),
    (lambda f: f.assign(offset=[18, 32, 19, None]), ["row 2", "column 'original'", "not what the document holds"]),
    (lambda f: f.assign(offset=[18, 300, 19, None]), ["row 2", "column 'offset'", "beyond the end"]),
    (lambda f: f.assign(length=[5, "five", 5, None]), ["row 2", "column 'length'", "'five'"]),
    (lambda f: f.assign(offset=[18, 20, 19, None], original=["Leeds", "eds, ", "Leeds", ""]),
     ["row 2", "overlap", "column 'offset'"]),
    (lambda f: f.drop(columns=["accept"]), ["missing column 'accept'"]),
])
def test_a_bad_table_is_refused_naming_the_file_row_and_column_never_the_text(tmp_path, change, words):
    table = decisions_table(suggestions())
    path = tmp_path / "reviewed.csv"
    change(table).to_csv(path, index=False)
    with pytest.raises(DataError) as raised:
        read_decisions(path, TEXTS)
    message = str(raised.value)
    assert message.startswith(str(path)) and all(w in message for w in words), message
    assert "nurse" not in message and "bingo" not in message and "\n" not in message


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab c.,é", max_size=30), st.text(alphabet="ab c.,é[]X", max_size=30))
def test_the_edits_between_two_texts_turn_one_into_the_other(released, edited):
    edits = text_edits(released, edited)
    assert apply_edits(released, edits) == edited
    assert all(released[e.offset:e.offset + e.length] == e.original for e in edits)


def test_a_text_the_curator_writes_becomes_rows_and_keeps_the_suggestions_it_keeps():
    table = decisions_table(suggestions()[:1])
    released = TEXTS["a"]
    # the curator keeps [CITY], undoes [REDACTED] and writes "[NAME]" for Ann
    edited = "[NAME], a nurse from [CITY], plays bingo twice a week."
    after = curator_rows(table, "a", released, edited)
    rows = after[["original", "replacement", "source", "accept"]].values.tolist()
    assert rows == [["Leeds", "[CITY]", "suggested", True], ["bingo", "[REDACTED]", "suggested", False],
                    ["Ann", "[NAME]", "curator", True]]
    edits, _ = accepted(after)
    assert apply_edits(released, edits["a"]) == edited
    # writing again replaces the curator's rows of the document
    again = curator_rows(after, "a", released, "Ann, a nurse from [CITY], plays [REDACTED] twice a [PERIOD].")
    assert again[["original", "source", "accept"]].values.tolist() == [
        ["Leeds", "suggested", True], ["bingo", "suggested", True], ["week", "curator", True]]
    assert apply_edits(released, accepted(again)[0]["a"]) == "Ann, a nurse from [CITY], plays [REDACTED] twice a [PERIOD]."


def test_the_allow_list_redacts_every_whole_word_occurrence_and_says_when_it_raises_a_risk():
    found = allow_edits(TEXTS, ["leeds", "BUS", "twice a week", "ee"], Replacer("placeholder").choose)
    assert {d: [e.original for e in edits] for d, edits in found.items()} == {
        "a": ["Leeds", "twice a week"], "b": ["bus", "Leeds"]}
    assert all(e.replacement == "[REDACTED]" for edits in found.values() for e in edits)
    rows = allow_rows(found, {"a": Risk(5, 0.2, 0.5), "b": Risk(5, 0.2, 0.5)},
                      {"a": Risk(7, 0.1, 0.4), "b": Risk(3, 0.1, 0.4)})
    frame = pd.DataFrame(rows)
    assert frame.groupby("doc_id")["accept"].all().to_dict() == {"a": True, "b": False}
    assert set(frame.loc[frame["doc_id"] == "b", "reason"]) == {"the allow list's edits raise this document's risk"}


def test_words_in_more_than_a_share_of_the_documents_are_common_case_and_accents_aside():
    from cpa_core.redaction.decisions import common_words

    texts = ["urlLink and Zoë", "URLLINK, zoe and the bus", "the urllink", "nothing"]
    assert common_words(texts, 0.5) == ["urllink"]  # in 3 of 4 documents; "and", "the", "zoe" in 2: not more
    assert common_words(texts, 0.25) == ["urllink", "and", "the", "zoe"]
    assert common_words(texts, None) == [] and common_words(texts, 0) == [] and common_words([], 0.1) == []
