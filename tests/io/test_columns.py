"""Which column holds what (cpa_core.io.columns): a declared mapping applied, columns guessed from their names (the
text column from the content when no name says it), a release without ids numbered on request, and every
missing-column message listing the file's real columns and the mapping used."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import write_table
from hypothesis import given, settings
from hypothesis import strategies as hst
from table_files import DOCS_HEADER, check, write_bytes

from cpa_core.common.errors import DataError
from cpa_core.io.columns import (
    DOCUMENT_SYNONYMS,
    REGISTRY_SYNONYMS,
    ROW_NUMBERS,
    check_columns,
    free_text_lengths,
    guess_columns,
    mapping_problems,
)
from cpa_core.io.tables import load_documents, load_registry

# --------------------------------------------------------------------------------------------- a declared mapping

def test_column_mapping_for_documents_and_registry(tmp_path):
    docs = write_bytes(tmp_path, "notes.csv", b"note_id,note,person,ward\nN1,first note,A,w1\nN2,second note,B,w2\n")
    reg = write_bytes(tmp_path, "people.csv", b"pid,town\nA,York\nB,Leeds\n")
    loaded = load_documents(docs, columns={"doc_id": "note_id", "text": "note", "identity_id": "person"},
                            group_column="ward")
    assert loaded.frame.to_dict("list") == {"doc_id": ["N1", "N2"], "text": ["first note", "second note"],
                                            "identity_id": ["A", "B"], "group": ["w1", "w2"]}
    registry = load_registry(reg, columns={"identity_id": "pid"})
    assert registry.ids.tolist() == ["A", "B"] and registry.fields == ["town"]


def test_mapped_column_that_is_missing_is_named(tmp_path):
    docs = write_bytes(tmp_path, "notes.csv", b"note_id,note,person\nN1,first,A\n")
    with pytest.raises(DataError) as info:
        load_documents(docs, columns={"doc_id": "note_id", "text": "body", "identity_id": "person"})
    check(info.value, str(docs), "column 'body'", "'body'", "'text'", "note_id", "no such column")
    assert info.value.column == "body"


def test_mapping_onto_a_name_the_file_already_uses(tmp_path):
    """A file with the original ``text`` and the released ``anon_text``: mapping text -> anon_text must
    audit the released text (or refuse clearly), never crash on the duplicated column name."""
    docs = write_bytes(tmp_path, "release.csv",
                       b"doc_id,text,anon_text,identity_id\n1,Alice Smith of York,[NAME] of [CITY],A\n"
                       b"2,Bob Jones of Leeds,[NAME] of [CITY],B\n")
    try:
        loaded = load_documents(docs, columns={"text": "anon_text"})
    except DataError as error:  # a clear refusal is acceptable
        check(error, str(docs), "text")
    else:
        assert loaded.frame["text"].tolist() == ["[NAME] of [CITY]", "[NAME] of [CITY]"]


def test_prose_that_parses_as_one_column_reports_missing_columns(tmp_path):
    path = write_bytes(tmp_path, "letter.csv", b"Dear reader\nthis is a letter\n")
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), "required column 'doc_id' is missing", "expected columns",
          "['doc_id', 'text', 'identity_id']", "found columns ['Dear reader']")


@pytest.mark.parametrize("missing", ["doc_id", "text", "identity_id"])
def test_missing_required_document_column(tmp_path, missing):
    columns = [c for c in ("doc_id", "text", "identity_id") if c != missing]
    frame = pd.DataFrame({c: ["x1", "x2"] for c in columns})
    path = write_table(frame, tmp_path / "docs.csv")
    with pytest.raises(DataError) as info:
        load_documents(path)
    check(info.value, str(path), f"column '{missing}'", "is missing", "expected columns", f"found columns {columns}")
    assert info.value.column == missing


def test_missing_registry_id_column(tmp_path):
    path = write_bytes(tmp_path, "reg.csv", b"person,city\nA,York\n")
    with pytest.raises(DataError) as info:
        load_registry(path)
    check(info.value, str(path), "column 'identity_id'", "is missing", "found columns ['person', 'city']")


def test_group_column_that_does_not_exist(tmp_path):
    path = write_bytes(tmp_path, "d.csv", (DOCS_HEADER + "1,a,P1\n").encode())
    with pytest.raises(DataError) as info:
        load_documents(path, group_column="ward")
    check(info.value, str(path), "column 'ward'", "missing")


# -------------------------------------------------------------------------------------------- guessing columns

@pytest.mark.parametrize("header,expected", [
    (["doc", "note", "subject"], {"doc_id": "doc", "text": "note", "identity_id": "subject", "group": None}),
    (["id", "text", "person_id"], {"doc_id": "id", "text": "text", "identity_id": "person_id", "group": None}),
    (["note_id", "note", "person", "mechanism"],
     {"doc_id": "note_id", "text": "note", "identity_id": "person", "group": "mechanism"}),
    (["Doc ID", "Released Text", "Patient-ID", "Split"],
     {"doc_id": "Doc ID", "text": "Released Text", "identity_id": "Patient-ID", "group": "Split"}),
    (["record_id", "body", "author_id", "source", "age"],
     {"doc_id": "record_id", "text": "body", "identity_id": "author_id", "group": "source"}),
    # a column of exactly our name wins over synonyms, which are then not ambiguous
    (["id", "doc_id", "text", "identity_id", "group", "subject"],
     {"doc_id": "doc_id", "text": "text", "identity_id": "identity_id", "group": "group"}),
    (["TEXT", "body", "doc_id", "pid"], {"doc_id": "doc_id", "text": "TEXT", "identity_id": "pid", "group": None}),
    # ambiguous: two candidates for one of our columns, so no guess for it (the others are still guessed)
    (["id", "record_id", "body", "person", "subject"],
     {"doc_id": None, "text": "body", "identity_id": None, "group": None}),
    (["Text", "TEXT", "body", "doc", "pid"], {"doc_id": "doc", "text": None, "identity_id": "pid", "group": None}),
    (["a", "b", "c"], {"doc_id": None, "text": None, "identity_id": None, "group": None}),
    ([], {"doc_id": None, "text": None, "identity_id": None, "group": None}),
])
def test_document_columns_are_guessed_from_their_names(header, expected):
    assert guess_columns(header, DOCUMENT_SYNONYMS) == expected


@pytest.mark.parametrize("header,expected", [
    (["subject", "age"], "subject"), (["person", "city"], "person"), (["id", "city"], "id"), (["pid"], "pid"),
    (["Identity ID", "id"], "Identity ID"), (["city", "identity_id"], "identity_id"),
    (["pid", "id", "city"], None), (["name", "city"], None),
])
def test_registry_id_column_is_guessed_from_its_name(header, expected):
    assert guess_columns(header, REGISTRY_SYNONYMS) == {"identity_id": expected}


def test_no_synonym_serves_two_columns():
    from cpa_core.io.columns import _normal

    for synonyms in (DOCUMENT_SYNONYMS, REGISTRY_SYNONYMS):
        seen = {}
        for ours, names in synonyms.items():
            assert _normal(ours) in {_normal(n) for n in names}
            for name in names:
                assert seen.setdefault(_normal(name), ours) == ours, (name, ours, seen[_normal(name)])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(header=hst.lists(hst.sampled_from(sorted({n for names in DOCUMENT_SYNONYMS.values() for n in names})
                                         + ["Doc ID", "TEXT", "Person", "x", "note "]), unique=True, max_size=8))
def test_a_guess_never_uses_a_column_twice_nor_invents_one(header):
    guess = guess_columns(header, DOCUMENT_SYNONYMS)
    chosen = [c for c in guess.values() if c is not None]
    assert len(chosen) == len(set(chosen)) and set(chosen) <= set(header)


def test_mapping_problems_name_what_is_missing_or_doubled():
    assert mapping_problems({"doc_id": "a", "text": "b", "identity_id": "c"}, ("doc_id", "text", "identity_id")) == []
    assert mapping_problems({"doc_id": "a", "text": None, "identity_id": None}, ("doc_id", "text", "identity_id")) \
        == ["no column chosen for 'text', 'identity_id'"]
    assert mapping_problems({"doc_id": "a", "text": "b", "identity_id": "c", "group": "a"},
                            ("doc_id", "text", "identity_id")) == [
        "the column 'a' is chosen for both 'doc_id' and 'group'"]


# ------------------------------------------------------------------------ missing-column messages: real columns

def test_a_mapped_column_the_file_lacks_lists_the_real_columns_and_the_mapping(tmp_path):
    docs = write_bytes(tmp_path, "documents.csv", b"doc,note,subject\nD1,first,A\n")
    with pytest.raises(DataError) as info:
        load_documents(docs, columns={"doc_id": "doc", "text": "body", "identity_id": "subject"})
    check(info.value, str(docs), "column 'text' (mapped from 'body') is missing",
          "the file has columns: 'doc', 'note', 'subject'",
          "mapping used: doc_id = 'doc', text = 'body' (no such column), identity_id = 'subject'")
    assert info.value.column == "body"


def test_a_required_column_left_unmapped_lists_the_files_columns_not_the_renamed_ones(tmp_path):
    docs = write_bytes(tmp_path, "documents.csv", b"note_id,note,person\nN1,first,A\n")
    with pytest.raises(DataError) as info:
        load_documents(docs, columns={"doc_id": "note_id", "text": "note"})
    check(info.value, str(docs), "required column 'identity_id' is missing",
          "found columns ['note_id', 'note', 'person']", "mapping used: doc_id = 'note_id', text = 'note'")
    assert "'doc_id', 'text', 'person'" not in str(info.value)
    registry = write_bytes(tmp_path, "people.csv", b"pid,town\nA,York\n")
    with pytest.raises(DataError) as info:
        load_registry(registry, columns={"identity_id": "person"})
    check(info.value, str(registry), "column 'identity_id' (mapped from 'person') is missing",
          "the file has columns: 'pid', 'town'", "identity_id = 'person' (no such column)")


def test_a_column_mapped_twice_is_refused(tmp_path):
    docs = write_bytes(tmp_path, "documents.csv", b"doc,note,subject\nD1,first,A\n")
    with pytest.raises(DataError) as info:
        load_documents(docs, columns={"doc_id": "doc", "text": "doc", "identity_id": "subject"})
    check(info.value, str(docs), "column 'doc' is mapped to both 'doc_id' and 'text'", "'doc', 'note', 'subject'")
    with pytest.raises(DataError) as info:
        load_documents(docs, columns={"doc_id": "doc", "text": "note", "identity_id": "subject"}, group_column="note")
    check(info.value, "column 'note' is mapped to both 'text' and 'group'")


def test_the_listed_columns_are_cut_short(tmp_path):
    header = ",".join(f"{'c' * 60}{i}" for i in range(100))
    with pytest.raises(DataError) as info:
        load_documents((header + "\n" + ",".join("x" * 100) + "\n").encode(), name="wide.csv")
    message = str(info.value)
    assert "c" * 61 not in message and "… (70 more)" in message


def test_check_columns_is_what_the_loader_checks():
    with pytest.raises(DataError) as info:
        check_columns("d.csv", ["a", "b"], None, ("doc_id", "text", "identity_id"))
    check(info.value, "d.csv", "required column 'doc_id' is missing", "found columns ['a', 'b']")
    check_columns("d.csv", ["a", "b", "c"], {"doc_id": "a", "text": "b", "identity_id": "c"},
                  ("doc_id", "text", "identity_id"))


# ------------------------------------------------------------------------ a release without ids: rows numbered

BLOG = b"author,post\nA,went hiking with the dog again today\nB,my sister visited from the coast\n" \
       b"A,new recipe for the bakery stall\n"


def test_a_release_without_ids_is_numbered_when_asked(tmp_path):
    path = write_bytes(tmp_path, "blog.csv", BLOG)
    loaded = load_documents(path, columns={"doc_id": ROW_NUMBERS, "text": "post", "identity_id": "author"})
    assert loaded.frame["doc_id"].tolist() == ["1", "2", "3"]  # data rows from 1, the header excluded
    assert loaded.frame["identity_id"].tolist() == ["A", "B", "A"]
    assert loaded.frame["text"].tolist()[1] == "my sister visited from the coast"
    assert dict(loaded.columns) == {"doc_id": ROW_NUMBERS, "text": "post", "identity_id": "author"}


def test_row_numbers_are_those_of_the_file_when_invalid_rows_are_dropped(tmp_path):
    path = write_bytes(tmp_path, "blog.jsonl", b'{"author": "A", "post": "first post"}\n\n'
                                               b'{"author": "B", "post": ""}\n{"author": "C", "post": "third post"}\n')
    loaded = load_documents(path, columns={"doc_id": ROW_NUMBERS, "text": "post", "identity_id": "author"},
                            on_invalid="drop")
    assert loaded.frame["doc_id"].tolist() == ["1", "3"]  # row 2 (empty text) dropped; a blank line is no row
    assert [(r.row, r.column) for r in loaded.report.rejected] == [(2, "text")]


def test_a_release_without_ids_is_refused_unasked_naming_file_columns_and_remedy(tmp_path):
    path = write_bytes(tmp_path, "blog.csv", BLOG)
    with pytest.raises(DataError) as info:
        load_documents(path, columns={"text": "post", "identity_id": "author"})
    check(info.value, str(path), "required column 'doc_id' is missing", "found columns ['author', 'post']",
          "map one of the file's columns to doc_id", "number its rows 1, 2, …", "--number-rows",
          'doc_id = "<row number>" in [columns.documents]')
    assert info.value.column == "doc_id"
    with pytest.raises(DataError) as info:  # no mapping at all: the same remedy
        load_documents(path)
    check(info.value, "required column 'doc_id' is missing", "--number-rows")


def test_a_missing_text_column_is_not_offered_row_numbers(tmp_path):
    path = write_bytes(tmp_path, "blog.csv", BLOG)
    with pytest.raises(DataError) as info:
        load_documents(path, columns={"doc_id": ROW_NUMBERS, "identity_id": "author"})
    check(info.value, "required column 'text' is missing", "mapping used: doc_id = the row numbers, identity_id = "
          "'author'")
    assert "--number-rows" not in str(info.value)


def test_row_numbers_give_only_an_id_and_never_shadow_a_column_of_that_name(tmp_path):
    path = write_bytes(tmp_path, "blog.csv", BLOG)
    with pytest.raises(DataError) as info:
        load_documents(path, columns={"doc_id": ROW_NUMBERS, "text": ROW_NUMBERS, "identity_id": "author"})
    check(info.value, str(path), "row numbers can give only 'doc_id', not 'text'")
    with pytest.raises(DataError) as info:
        load_registry(write_bytes(tmp_path, "people.csv", b"town\nYork\n"), columns={"identity_id": ROW_NUMBERS})
    check(info.value, "row numbers can give only 'doc_id', not 'identity_id'")
    odd = write_bytes(tmp_path, "odd.csv", b"<row number>,post,author\nx,a post,A\n")
    with pytest.raises(DataError) as info:
        load_documents(odd, columns={"doc_id": ROW_NUMBERS, "text": "post", "identity_id": "author"})
    check(info.value, str(odd), "a column named '<row number>'")


def test_row_numbers_replace_an_id_column_the_curator_chose_not_to_use(tmp_path):
    path = write_bytes(tmp_path, "d.csv", b"doc_id,text,identity_id\nX,a note,A\nX,b note,B\n")  # duplicate ids
    loaded = load_documents(path, columns={"doc_id": ROW_NUMBERS})
    assert loaded.frame["doc_id"].tolist() == ["1", "2"]


def test_the_form_says_how_to_give_a_missing_id():
    assert mapping_problems({"doc_id": None, "text": "b", "identity_id": "c"}, ("doc_id", "text", "identity_id")) \
        == ["no column chosen for 'doc_id' (a file without doc_ids: number the rows)"]
    assert mapping_problems({"doc_id": ROW_NUMBERS, "text": "b", "identity_id": "c"},
                            ("doc_id", "text", "identity_id")) == []


# ------------------------------------------------------------------------ the text column guessed from the content

def blog_frame(**columns) -> pd.DataFrame:
    return pd.DataFrame({"author": ["A", "B", "A"], "score": ["12", "7.5", "130"],
                         "title": ["Dogs", "A visit", "Baking"],
                         "entrytext": ["went hiking with the dog again today", "my sister visited from the coast",
                                       "new recipe for the bakery stall"], **columns})


def test_the_text_column_is_guessed_from_the_content_for_a_name_no_synonym_knows():
    frame = blog_frame()
    lengths = free_text_lengths(frame)
    assert guess_columns(frame.columns, DOCUMENT_SYNONYMS)["text"] is None  # the name says nothing
    assert guess_columns(frame.columns, DOCUMENT_SYNONYMS, lengths) == {
        "doc_id": None, "text": "entrytext", "identity_id": "author", "group": None}


def test_the_guess_from_content_never_takes_a_column_already_mapped():
    # the longest free text is in a column whose name says it is the subject: it stays the subject's
    frame = pd.DataFrame({"subject": ["the long-winded person of the first row", "another wordy person here"],
                          "words": ["short one", "two words"]})
    guess = guess_columns(frame.columns, DOCUMENT_SYNONYMS, free_text_lengths(frame))
    assert guess["identity_id"] == "subject" and guess["text"] == "words"


def test_numeric_ids_and_one_word_codes_are_never_guessed_as_text():
    frame = pd.DataFrame({"amount": ["123456789012345678901234567890", "98765432109876543210", "1e5"],
                          "code": ["a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6", "f" * 40, "0" * 36],
                          "count": [3, 14, 159], "label": ["x y", "y z", "z w"]})
    lengths = free_text_lengths(frame)
    assert set(lengths) == {"label"}
    assert guess_columns(["amount", "code", "count"], DOCUMENT_SYNONYMS,
                         free_text_lengths(frame[["amount", "code", "count"]]))["text"] is None


def test_a_name_that_says_text_wins_over_the_content_and_a_tie_is_no_guess():
    frame = blog_frame(body=["hi", "yo", "ok"])
    assert guess_columns(frame.columns, DOCUMENT_SYNONYMS, free_text_lengths(frame))["text"] == "body"
    tied = pd.DataFrame({"a": ["one two", "three four"], "b": ["five six", "seven eig"]})  # 8.5 each
    assert guess_columns(tied.columns, DOCUMENT_SYNONYMS, free_text_lengths(tied))["text"] is None


@pytest.mark.parametrize("name", ["post", "Entry", "comment", "review", "Tweet"])
def test_blog_and_review_columns_are_text_by_their_names(name):
    assert guess_columns(["author", name], DOCUMENT_SYNONYMS)["text"] == name
